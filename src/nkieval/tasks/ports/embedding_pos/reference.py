"""Reference for embedding_pos: wte[idx] * sqrt(C) + wpe[t] in float64, rounded once to fp32."""

import numpy as np


def oracle(idx, wte, wpe):
    idx = np.asarray(idx).astype(np.int64)  # (the numerics standard passes every operand as float64)
    t = idx.shape[1]
    c = wte.shape[1]
    return wte.astype(np.float64)[idx] * np.sqrt(c) + wpe.astype(np.float64)[None, :t, :]


def reference(idx, wte, wpe):
    return oracle(idx, wte, wpe).astype(np.float32)
