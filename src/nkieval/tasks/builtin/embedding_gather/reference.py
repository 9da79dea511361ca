"""Reference for embedding_gather: table[ids]."""

import numpy as np


def reference(table, ids):
    return table[ids.astype(np.int64)].astype(np.float32)


def oracle(table, ids):
    """float64 gather for the numerics standard (ids arrive as float64 there)."""
    return np.asarray(table, dtype=np.float64)[np.asarray(ids).astype(np.int64)]
