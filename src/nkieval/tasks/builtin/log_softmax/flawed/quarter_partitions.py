"""Flawed: the expert algorithm on 32-row tiles (a warp-sized row group): 96 of 128 partitions idle."""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def log_softmax(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=nl.float32, buffer=nl.shared_hbm)
    p = 32
    for i in range((n + p - 1) // p):
        rows = min(p, n - i * p)
        t = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[0:rows], src=x[i * p:i * p + rows])
        neg_max = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=neg_max[0:rows], op=nl.maximum, data=t[0:rows], axis=1, negate=True)
        e = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        total = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(dst=e[0:rows], op=nl.exp, data=t[0:rows], bias=neg_max[0:rows],
                               reduce_op=nl.add, reduce_res=total[0:rows])
        lse = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=lse[0:rows], op=nl.log, data=total[0:rows])
        y = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=y[0:rows], data=t[0:rows], op0=nl.add, operand0=neg_max[0:rows],
                           op1=nl.subtract, operand1=lse[0:rows])
        nisa.dma_copy(dst=out[i * p:i * p + rows], src=y[0:rows])
    return out
