"""Reference for scaled_masked_softmax: float64 masked softmax, masked entries exactly 0."""

import numpy as np


def oracle(x, scale=2.0):
    xd = np.asarray(x, dtype=np.float64) * scale
    n, s = xd.shape
    keep = np.arange(s)[None, :] <= np.arange(n)[:, None] + (s - n)
    z = np.where(keep, xd, -np.inf)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def reference(x, scale=2.0):
    return oracle(x, scale).astype(np.float32)
