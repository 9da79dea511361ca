"""Reference for causal_attention: one head, scores scaled by 1/sqrt(D), causal mask j <= i, float64."""

import numpy as np


def oracle(q_t, k_t, v):
    q = q_t.astype(np.float64).T
    k = k_t.astype(np.float64).T
    s, d = q.shape
    scores = (q @ k.T) / np.sqrt(d)
    keep = np.arange(s)[None, :] <= np.arange(s)[:, None]
    scores = np.where(keep, scores, -np.inf)
    scores = scores - scores.max(axis=1, keepdims=True)
    p = np.exp(scores)
    p /= p.sum(axis=1, keepdims=True)
    return p @ v.astype(np.float64)


def reference(q_t, k_t, v):
    return oracle(q_t, k_t, v).astype(np.float32)
