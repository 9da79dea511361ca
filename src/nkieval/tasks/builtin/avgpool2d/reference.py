"""Reference for avgpool2d: 3x3 box sum with zero padding, divided by 9, in float64."""

import numpy as np


def _box_sum(x):
    xd = np.asarray(x, dtype=np.float64)
    c, h, w = xd.shape
    xp = np.zeros((c, h + 2, w + 2))
    xp[:, 1:h + 1, 1:w + 1] = xd
    s = np.zeros((c, h, w))
    for di in range(3):
        for dj in range(3):
            s += xp[:, di:di + h, dj:dj + w]
    return s


def oracle(x):
    return _box_sum(x) / 9.0


def excludes_padding_oracle(x):
    """The box sum divided by the number of in-image pixels of each window (count_include_pad=False)."""
    return _box_sum(x) / _box_sum(np.ones(np.shape(x)[1:])[None])


# Known wrong formulas: the review's numerics diagnosis names one when it reproduces the output.
VARIANTS = {
    "excludes_padding": {
        "cause": "divides border outputs by the number of in-image pixels (count_include_pad=False) instead of 9",
        "action": "divide every window sum by 9: the zero padding counts (count_include_pad=True)",
        "fn": excludes_padding_oracle,
    },
}


def reference(x):
    return oracle(x).astype(np.float32)
