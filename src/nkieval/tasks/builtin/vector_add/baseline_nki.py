"""Baseline: the vector as rows of 512 elements, 128 rows per tile; the short last row on its own.

Correct for every length, but each DMA moves only 2 KiB per partition and there are 8x more
instructions than needed: the speed reference an expert solution should beat.
"""

import nki
import nki.isa as nisa
import nki.language as nl

F = 512


@nki.jit
def vector_add(a, b):
    n = a.shape[0]
    out = nl.ndarray((n,), dtype=a.dtype, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    rows = n // F
    if rows > 0:
        a2 = a[0:rows * F].reshape((rows, F))
        b2 = b[0:rows * F].reshape((rows, F))
        o2 = out[0:rows * F].reshape((rows, F))
        for i in range((rows + p - 1) // p):
            h = min(p, rows - i * p)
            ta = nl.ndarray((p, F), dtype=a.dtype, buffer=nl.sbuf)
            tb = nl.ndarray((p, F), dtype=b.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=ta[0:h], src=a2[i * p:i * p + h])
            nisa.dma_copy(dst=tb[0:h], src=b2[i * p:i * p + h])
            tc = nl.ndarray((p, F), dtype=a.dtype, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=tc[0:h], data1=ta[0:h], data2=tb[0:h], op=nl.add)
            nisa.dma_copy(dst=o2[i * p:i * p + h], src=tc[0:h])
    r = n - rows * F
    if r > 0:
        ta = nl.ndarray((1, r), dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray((1, r), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a[rows * F:n].reshape((1, r)))
        nisa.dma_copy(dst=tb, src=b[rows * F:n].reshape((1, r)))
        nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.add)
        nisa.dma_copy(dst=out[rows * F:n].reshape((1, r)), src=ta)
    return out
