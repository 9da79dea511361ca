"""Reference for depthwise_conv1d: causal depthwise convolution in float64."""

import numpy as np


def _conv(x, w, bias, lag):
    """out[c, t] = bias[c] + sum_k w[c, k] * x[c, t + k - lag], reading zeros outside 0 <= t < L."""
    xd = np.asarray(x, dtype=np.float64)
    wd = np.asarray(w, dtype=np.float64)
    c, length = xd.shape
    k = wd.shape[1]
    xp = np.concatenate([np.zeros((c, lag)), xd, np.zeros((c, k - 1 - lag))], axis=1)
    out = np.broadcast_to(np.asarray(bias, dtype=np.float64)[:, None], (c, length)).copy()
    for j in range(k):
        out += wd[:, j:j + 1] * xp[:, j:j + length]
    return out


def oracle(x, w, bias):
    return _conv(x, w, bias, lag=np.shape(w)[1] - 1)


def centred_taps_oracle(x, w, bias):
    """The centred (non-causal) convolution: tap k reads x[t + k - (K-1)//2] instead of x[t - (K-1) + k]."""
    return _conv(x, w, bias, lag=(np.shape(w)[1] - 1) // 2)


# Known wrong formulas: the review's numerics diagnosis names one when it reproduces the output.
VARIANTS = {
    "centred_taps": {
        "cause": "aligns the filter as a centred (non-causal) convolution: tap k reads x[t + k - (K-1)//2] "
                 "instead of x[t - (K-1) + k]",
        "action": "pad K-1 zeros on the left only, so that tap K-1 multiplies x[t]",
        "fn": centred_taps_oracle,
    },
}


def reference(x, w, bias):
    return oracle(x, w, bias).astype(np.float32)
