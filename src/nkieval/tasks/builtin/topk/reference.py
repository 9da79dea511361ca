"""Reference for topk: stable descending sort of each row, first k entries."""

import numpy as np


def reference(x, k=16):
    idx = np.argsort(-x, axis=1, kind="stable")[:, :k]
    vals = np.take_along_axis(x, idx, axis=1)
    return vals.astype(np.float32), idx.astype(np.int32)


def oracle(x, k=16):
    """float64 top-k values for the numerics standard."""
    xd = np.asarray(x, dtype=np.float64)
    return -np.sort(-xd, axis=1)[:, :k]


def no_replace_oracle(x, k=16):
    """The 8 largest values repeated k / 8 times: every max8 round sees the same, unreplaced data."""
    return np.tile(oracle(x, 8), (1, k // 8))


# Known wrong formulas: the review's numerics diagnosis names one when it reproduces the values.
VARIANTS = {
    "no_replace": {
        "cause": "repeats the 8 largest values in every group of 8 (max8 runs again on the same data without "
                 "removing the maxima it found)",
        "action": "replace the 8 maxima found by each max8 round (nc_match_replace8 with -inf) before the next round",
        "fn": no_replace_oracle,
    },
}
