"""Flawed: one CUDA block per row becomes one single-partition [1, D] tile per row."""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def row_argmax(x):
    n, d = x.shape
    values = nl.ndarray((n,), dtype=nl.float32, buffer=nl.shared_hbm)
    indices = nl.ndarray((n,), dtype=nl.int32, buffer=nl.shared_hbm)
    for r in range(n):
        t = nl.ndarray((1, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[r:r + 1])
        top = nl.ndarray((1, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.max8(dst=top, src=t)
        pos = nl.ndarray((1, 8), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.nc_find_index8(dst=pos, data=t, vals=top)
        idx = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=idx, src=pos[:, 0:1])
        nisa.dma_copy(dst=values[r:r + 1].reshape((1, 1)), src=top[:, 0:1])
        nisa.dma_copy(dst=indices[r:r + 1].reshape((1, 1)), src=idx)
    return values, indices
