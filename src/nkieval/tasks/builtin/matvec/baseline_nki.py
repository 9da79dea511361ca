"""Baseline: 128-row tiles, 512-column chunks, x chunk reloaded for every tile, partials added.

Each chunk is one DMA of a, one broadcast DMA of the x chunk, a multiply, a row reduction and
an add into the running [128, 1] sum, all on the Vector engine. Correct for every shape.
"""

import nki
import nki.isa as nisa
import nki.language as nl

F = 512


@nki.jit
def matvec(a, x):
    m, k = a.shape
    y = nl.ndarray((m,), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    for i in range((m + p - 1) // p):
        rows = min(p, m - i * p)
        acc = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=acc, value=0.0)
        for j in range((k + F - 1) // F):
            w = min(F, k - j * F)
            t = nl.ndarray((p, F), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t[0:rows, 0:w], src=a[i * p:i * p + rows, j * F:j * F + w])
            xb = nl.ndarray((p, F), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=xb[0:rows, 0:w], src=x[j * F:j * F + w].reshape((1, w)).broadcast(0, rows))
            nisa.tensor_tensor(dst=t[0:rows, 0:w], data1=t[0:rows, 0:w], data2=xb[0:rows, 0:w], op=nl.multiply)
            s = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_reduce(dst=s[0:rows], op=nl.add, data=t[0:rows, 0:w], axis=1)
            nisa.tensor_tensor(dst=acc[0:rows], data1=acc[0:rows], data2=s[0:rows], op=nl.add)
        nisa.dma_copy(dst=y[i * p:i * p + rows].reshape((rows, 1)), src=acc[0:rows])
    return y
