"""Flawed: only whole 128-row tiles are reduced; the last N % 128 rows are never written."""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def row_sum(x):
    n, d = x.shape
    out = nl.ndarray((n,), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    for i in range(n // p):
        t = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[i * p:(i + 1) * p])
        s = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=s, op=nl.add, data=t, axis=1)
        nisa.dma_copy(dst=out[i * p:(i + 1) * p].reshape((p, 1)), src=s)
    return out
