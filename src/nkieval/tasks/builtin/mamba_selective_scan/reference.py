"""Reference for mamba_selective_scan: the sequential recurrence in float64."""

import numpy as np


def _scan(x, delta, a, b, c):
    """The recurrence's output sum_n h[d, n] c[n, t], without the skip term."""
    xd, dd, ad, bd, cd = (np.asarray(v, dtype=np.float64) for v in (x, delta, a, b, c))
    dch, length = xd.shape
    h = np.zeros((dch, ad.shape[1]))
    y = np.empty((dch, length))
    for t in range(length):
        h = np.exp(-dd[:, t:t + 1] * ad) * h + (dd[:, t] * xd[:, t])[:, None] * bd[:, t][None, :]
        y[:, t] = h @ cd[:, t]
    return y


def oracle(x, delta, a, b, c, d_skip):
    return _scan(x, delta, a, b, c) + np.asarray(d_skip, dtype=np.float64)[:, None] * np.asarray(x, dtype=np.float64)


def no_skip_oracle(x, delta, a, b, c, d_skip):
    """The scan output without the d_skip * x skip connection."""
    return _scan(x, delta, a, b, c)


# Known wrong formulas: the review's numerics diagnosis names one when it reproduces the output.
VARIANTS = {
    "no_skip": {
        "cause": "drops the d_skip * x skip connection from the output",
        "action": "add d_skip[d] * x[d, t] to every output y[d, t]",
        "fn": no_skip_oracle,
    },
}


def reference(x, delta, a, b, c, d_skip):
    return oracle(x, delta, a, b, c, d_skip).astype(np.float32)
