"""Flawed: a CUDA row of threads becomes a single-partition [1, D] tile per row."""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def scale_bias_broadcast(x, row_scale, col_bias):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=nl.float32, buffer=nl.shared_hbm)
    bias = nl.ndarray((1, d), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=bias, src=col_bias.reshape((1, d)))
    for r in range(n):
        t = nl.ndarray((1, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[r:r + 1])
        s = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=row_scale[r:r + 1].reshape((1, 1)))
        nisa.scalar_tensor_tensor(dst=t, data=t, op0=nl.multiply, operand0=s, op1=nl.add, operand1=bias)
        nisa.dma_copy(dst=out[r:r + 1], src=t)
    return out
