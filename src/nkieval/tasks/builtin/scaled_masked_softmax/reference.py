"""Reference for scaled_masked_softmax: float64 masked softmax, masked entries exactly 0."""

import numpy as np


def _masked_softmax(x, scale, last_key_offset):
    """Softmax of scale * x over keys j <= i + (S - N) + last_key_offset for query i."""
    xd = np.asarray(x, dtype=np.float64) * scale
    n, s = xd.shape
    keep = np.arange(s)[None, :] <= np.arange(n)[:, None] + (s - n) + last_key_offset
    z = np.where(keep, xd, -np.inf)
    with np.errstate(invalid="ignore"):
        e = np.exp(z - z.max(axis=1, keepdims=True))
        p = e / e.sum(axis=1, keepdims=True)
    return np.where(keep.any(axis=1, keepdims=True), p, 1.0 / s)  # no visible key: uniform (a finite mask value)


def oracle(x, scale=2.0):
    return _masked_softmax(x, scale, 0)


def mask_excludes_diagonal_oracle(x, scale=2.0):
    """The softmax with the query's own key i + S - N masked out too (keys j < i + S - N)."""
    return _masked_softmax(x, scale, -1)


# Known wrong formulas: the review's numerics diagnosis names one when it reproduces the output.
VARIANTS = {
    "mask_excludes_diagonal": {
        "cause": "off-by-one causal mask: key i + S - N (the query's own position) is masked out",
        "action": "keep key j for query i when j <= i + (S - N) (the diagonal included)",
        "fn": mask_excludes_diagonal_oracle,
    },
}


def reference(x, scale=2.0):
    return oracle(x, scale).astype(np.float32)
