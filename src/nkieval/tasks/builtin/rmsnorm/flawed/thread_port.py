"""Flawed: a literal port of the CUDA kernel: one thread block per row becomes one [1, D] tile per row."""

import math

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def rmsnorm(x, w, eps=1e-6):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    for row in range(n):
        t = nl.ndarray((1, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[row:row + 1])
        wr = nl.ndarray((1, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=wr, src=w.reshape((1, d)))
        sq = nl.ndarray((1, d), dtype=nl.float32, buffer=nl.sbuf)
        ms = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(dst=sq, op=nl.square, data=t, scale=1.0 / math.sqrt(d), reduce_op=nl.add,
                               reduce_res=ms)
        nisa.tensor_scalar(dst=ms, data=ms, op0=nl.add, operand0=eps)
        rstd = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=rstd, op=nl.rsqrt, data=ms)
        nisa.scalar_tensor_tensor(dst=sq, data=t, op0=nl.multiply, operand0=rstd, op1=nl.multiply, operand1=wr)
        nisa.dma_copy(dst=out[row:row + 1], src=sq)
    return out
