"""Reference for online_softmax: softmax(x * 0.125) per row and its log-sum-exp, in float64, rounded to fp32."""

import numpy as np

SCALE = 0.125


def _parts(x):
    s = x.astype(np.float64) * SCALE
    m = s.max(axis=-1, keepdims=True)
    e = np.exp(s - m)
    tot = e.sum(axis=-1, keepdims=True)
    return e / tot, (m + np.log(tot))[:, 0]


def oracle(x):
    return _parts(x)[0]


def oracle_lse(x):
    return _parts(x)[1]


def reference(x):
    y, lse = _parts(x)
    return y.astype(np.float32), lse.astype(np.float32)
