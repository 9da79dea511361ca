"""Reference for mamba_selective_scan: the sequential recurrence in float64."""

import numpy as np


def _to_bf16(v):
    """``v`` rounded to bfloat16 (nearest, ties to even) and widened back to float64."""
    bits = np.asarray(v, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32).astype(np.float64)


def _scan(x, delta, a, b, c, decay_bf16=False):
    """The recurrence's output sum_n h[d, n] c[n, t], without the skip term."""
    xd, dd, ad, bd, cd = (np.asarray(v, dtype=np.float64) for v in (x, delta, a, b, c))
    dch, length = xd.shape
    h = np.zeros((dch, ad.shape[1]))
    y = np.empty((dch, length))
    for t in range(length):
        decay = np.exp(-dd[:, t:t + 1] * ad)
        if decay_bf16:
            decay = _to_bf16(decay)
        h = decay * h + (dd[:, t] * xd[:, t])[:, None] * bd[:, t][None, :]
        y[:, t] = h @ cd[:, t]
    return y


def oracle(x, delta, a, b, c, d_skip):
    return _scan(x, delta, a, b, c) + np.asarray(d_skip, dtype=np.float64)[:, None] * np.asarray(x, dtype=np.float64)


def no_skip_oracle(x, delta, a, b, c, d_skip):
    """The scan output without the d_skip * x skip connection."""
    return _scan(x, delta, a, b, c)


def bf16_decay_oracle(x, delta, a, b, c, d_skip):
    """The recurrence with each step's decay exp(-delta * a) rounded to bf16 (the error compounds)."""
    return _scan(x, delta, a, b, c, decay_bf16=True) + np.asarray(d_skip, dtype=np.float64)[:, None] * np.asarray(
        x, dtype=np.float64)


# Known wrong formulas: the review's numerics diagnosis names one when it reproduces the output.
VARIANTS = {
    "no_skip": {
        "cause": "drops the d_skip * x skip connection from the output",
        "action": "add d_skip[d] * x[d, t] to every output y[d, t]",
        "fn": no_skip_oracle,
    },
    "bf16_decay": {
        "cause": "rounds the per-step decay exp(-delta * a) to bf16",
        "action": "keep the decay in fp32: its rounding error compounds along the recurrence",
        "fn": bf16_decay_oracle,
    },
}


def reference(x, delta, a, b, c, d_skip):
    return oracle(x, delta, a, b, c, d_skip).astype(np.float32)
