"""Flawed: transliterates the CUDA grid: each 256-thread block becomes a [1, 256] tile on one partition.

Correct, but every instruction drives 1 of 128 lanes and the kernel issues ~N*D/85 instructions.
"""

import nki
import nki.isa as nisa
import nki.language as nl

BLOCK = 256


@nki.jit
def relu(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    total = n * d
    xf = x.reshape((total,))
    of = out.reshape((total,))
    for blk in range((total + BLOCK - 1) // BLOCK):
        lo = blk * BLOCK
        w = min(BLOCK, total - lo)
        t = nl.ndarray((1, BLOCK), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[:, 0:w], src=xf[lo:lo + w].reshape((1, w)))
        nisa.tensor_scalar(dst=t[:, 0:w], data=t[:, 0:w], op0=nl.maximum, operand0=0.0)
        nisa.dma_copy(dst=of[lo:lo + w].reshape((1, w)), src=t[:, 0:w])
    return out
