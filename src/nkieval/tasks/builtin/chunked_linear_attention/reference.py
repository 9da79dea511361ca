"""Reference for chunked_linear_attention: o = tril(q k^T) v in float64."""

import numpy as np


def oracle(q, k, v):
    qd, kd, vd = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    return np.tril(qd @ kd.T) @ vd


def reference(q, k, v):
    return oracle(q, k, v).astype(np.float32)
