"""Reference for row_argmax: row maxima (exact in fp32) and first-occurrence argmax."""

import numpy as np


def reference(x):
    idx = np.argmax(x, axis=1)
    return x[np.arange(x.shape[0]), idx].astype(np.float32), idx.astype(np.int32)


def oracle(x):
    """float64 row maxima: the numerics standard judges the `values` output against it."""
    return np.asarray(x, dtype=np.float64).max(axis=1)
