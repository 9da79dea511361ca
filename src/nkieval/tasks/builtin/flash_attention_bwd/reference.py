"""Reference for flash_attention_bwd: float64 attention backward from the given lse."""

import math

import numpy as np


def _grads(q, k, v, o, do, lse):
    qd, kd, vd, od, dd = (np.asarray(a, dtype=np.float64) for a in (q, k, v, o, do))
    scale = 1.0 / math.sqrt(qd.shape[1])
    p = np.exp(scale * (qd @ kd.T) - np.asarray(lse, dtype=np.float64)[:, None])
    di = (dd * od).sum(axis=1, keepdims=True)
    dv = p.T @ dd
    ds = p * (dd @ vd.T - di)
    return scale * (ds @ kd), scale * (ds.T @ qd), dv


def oracle(q, k, v, o, do, lse):
    """float64 dq (the numerics standard judges the first output)."""
    return _grads(q, k, v, o, do, lse)[0]


def reference(q, k, v, o, do, lse):
    return tuple(g.astype(np.float32) for g in _grads(q, k, v, o, do, lse))
