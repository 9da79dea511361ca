"""Reference for causal_attention: one head, scores scaled by 1/sqrt(D), causal mask j <= i, float64."""

import numpy as np


def _masked_attention(q_t, k_t, v, diagonal):
    q = q_t.astype(np.float64).T
    k = k_t.astype(np.float64).T
    s, d = q.shape
    scores = (q @ k.T) / np.sqrt(d)
    j, i = np.arange(s)[None, :], np.arange(s)[:, None]
    keep = j <= i if diagonal else j < i
    scores = np.where(keep, scores, -np.inf)
    with np.errstate(invalid="ignore"):
        scores = scores - scores.max(axis=1, keepdims=True)
        p = np.exp(scores)
        p /= p.sum(axis=1, keepdims=True)
    p = np.where(keep.any(axis=1, keepdims=True), p, 1.0 / s)  # no visible key: uniform, as a finite mask value gives
    return p @ v.astype(np.float64)


def oracle(q_t, k_t, v):
    return _masked_attention(q_t, k_t, v, diagonal=True)


def mask_off_by_one_oracle(q_t, k_t, v):
    """Attention over keys j < i only (the diagonal masked out); query 0 sees no key: a uniform average of v."""
    return _masked_attention(q_t, k_t, v, diagonal=False)


# Known wrong formulas: the review's numerics diagnosis names one when it reproduces the output.
VARIANTS = {
    "mask_off_by_one": {
        "cause": "causal mask off by one: masks the diagonal (keys j < i instead of j <= i), so each query "
                 "loses its own key",
        "action": "keep key j for query i when j <= i (compare with >=, not >)",
        "fn": mask_off_by_one_oracle,
    },
}


def reference(q_t, k_t, v):
    return oracle(q_t, k_t, v).astype(np.float32)
