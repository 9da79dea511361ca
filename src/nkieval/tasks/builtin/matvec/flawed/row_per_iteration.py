"""Flawed: one CUDA warp per row becomes one [1, K] single-partition tile per row."""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def matvec(a, x):
    m, k = a.shape
    y = nl.ndarray((m,), dtype=nl.float32, buffer=nl.shared_hbm)
    xv = nl.ndarray((1, k), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=xv, src=x.reshape((1, k)))
    for r in range(m):
        t = nl.ndarray((1, k), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[r:r + 1])
        nisa.tensor_tensor(dst=t, data1=t, data2=xv, op=nl.multiply)
        s = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=s, op=nl.add, data=t, axis=1)
        nisa.dma_copy(dst=y[r:r + 1].reshape((1, 1)), src=s)
    return y
