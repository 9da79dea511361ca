"""Flawed: a literal port of the CUDA kernel: one thread block per row becomes one [1, D] tile per row.

Every instruction drives 1 of 128 partitions and the kernel issues five compute instructions
per row instead of per 128 rows.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def row_softmax(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    for row in range(n):
        t = nl.ndarray((1, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[row:row + 1])
        neg_max = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=neg_max, op=nl.maximum, data=t, axis=1, negate=True)
        total = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(dst=t, op=nl.exp, data=t, bias=neg_max, reduce_op=nl.add, reduce_res=total)
        inv = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv, data=total)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=inv)
        nisa.dma_copy(dst=out[row:row + 1], src=t)
    return out
