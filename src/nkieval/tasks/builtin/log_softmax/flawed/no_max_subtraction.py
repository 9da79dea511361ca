"""Flawed: log(sum(exp(x))) without subtracting the row maximum; exp overflows to inf for large logits."""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def log_softmax(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    for i in range((n + p - 1) // p):
        rows = min(p, n - i * p)
        t = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[0:rows], src=x[i * p:i * p + rows])
        e = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        total = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(dst=e[0:rows], op=nl.exp, data=t[0:rows], reduce_op=nl.add, reduce_res=total[0:rows])
        lse = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=lse[0:rows], op=nl.log, data=total[0:rows])
        y = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=y[0:rows], data=t[0:rows], op0=nl.subtract, operand0=lse[0:rows])
        nisa.dma_copy(dst=out[i * p:i * p + rows], src=y[0:rows])
    return out
