"""Reference for layernorm_block: two-pass statistics in float64, rounded once to fp32; y, mean and rstd."""

import numpy as np

EPS = 1e-5


def _stats(x):
    xf = x.astype(np.float64)
    mean = xf.mean(axis=-1)
    var = ((xf - mean[:, None]) ** 2).mean(axis=-1)
    return xf, mean, 1.0 / np.sqrt(var + EPS)


def oracle(x, gamma, beta):
    """float64 y (the numerics standard judges the first output)."""
    xf, mean, rstd = _stats(x)
    return (xf - mean[:, None]) * rstd[:, None] * gamma.astype(np.float64) + beta.astype(np.float64)


def oracle_mean(x, gamma, beta):
    return _stats(x)[1]


def oracle_rstd(x, gamma, beta):
    return _stats(x)[2]


def reference(x, gamma, beta):
    return tuple(a.astype(np.float32) for a in (oracle(x, gamma, beta), *_stats(x)[1:]))
