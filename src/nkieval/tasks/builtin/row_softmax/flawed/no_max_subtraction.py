"""Flawed: exp(x) / sum(exp(x)) without subtracting the row max: exp overflows on large logits."""

import math

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def row_softmax(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    for i in nl.affine_range(math.ceil(n / p)):
        r0 = i * p
        rows = min(p, n - r0)
        t = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[0:rows], src=x[r0:r0 + rows])
        total = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(dst=t[0:rows], op=nl.exp, data=t[0:rows], reduce_op=nl.add,
                               reduce_res=total[0:rows])
        inv = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv[0:rows], data=total[0:rows])
        nisa.tensor_scalar(dst=t[0:rows], data=t[0:rows], op0=nl.multiply, operand0=inv[0:rows])
        nisa.dma_copy(dst=out[r0:r0 + rows], src=t[0:rows])
    return out
