"""Flawed: a literal port of the CUDA kernel: one 256-element 'block' per iteration on one partition.

Each CUDA thread block becomes a [1, 256] tile, so every instruction drives 1 of 128 lanes and
the kernel issues ~n/64 instructions.
"""

import nki
import nki.isa as nisa
import nki.language as nl

BLOCK = 256


@nki.jit
def vector_add(a, b):
    n = a.shape[0]
    out = nl.ndarray((n,), dtype=a.dtype, buffer=nl.shared_hbm)
    for blk in range((n + BLOCK - 1) // BLOCK):
        lo = blk * BLOCK
        w = min(BLOCK, n - lo)
        ta = nl.ndarray((1, BLOCK), dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray((1, BLOCK), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta[:, 0:w], src=a[lo:lo + w].reshape((1, w)))
        nisa.dma_copy(dst=tb[:, 0:w], src=b[lo:lo + w].reshape((1, w)))
        nisa.tensor_tensor(dst=ta[:, 0:w], data1=ta[:, 0:w], data2=tb[:, 0:w], op=nl.add)
        nisa.dma_copy(dst=out[lo:lo + w].reshape((1, w)), src=ta[:, 0:w])
    return out
