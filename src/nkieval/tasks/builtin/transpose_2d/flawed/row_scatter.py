"""Flawed: thread-per-element thinking: each row of x is loaded on one partition and scattered as a column."""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def transpose_2d(x):
    m, n = x.shape
    out = nl.ndarray((n, m), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in range(m):
        t = nl.ndarray((1, n), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[i:i + 1])
        c = nl.ndarray((1, n), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=c, src=t)
        nisa.dma_copy(dst=out[:, i:i + 1].permute((1, 0)), src=c)
    return out
