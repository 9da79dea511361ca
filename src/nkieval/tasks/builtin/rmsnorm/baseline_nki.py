"""Baseline: 128 rows per tile, one instruction per step of the formula, w re-broadcast for every tile."""

import math

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def rmsnorm(x, w, eps=1e-6):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    for i in nl.affine_range(math.ceil(n / p)):
        r0 = i * p
        rows = min(p, n - r0)
        t = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[0:rows], src=x[r0:r0 + rows])
        sq = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=sq[0:rows], data1=t[0:rows], data2=t[0:rows], op=nl.multiply)
        ss = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=ss[0:rows], op=nl.add, data=sq[0:rows], axis=1)
        nisa.tensor_scalar(dst=ss[0:rows], data=ss[0:rows], op0=nl.multiply, operand0=1.0 / d, op1=nl.add,
                           operand1=eps)
        rstd = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=rstd[0:rows], op=nl.rsqrt, data=ss[0:rows])
        y = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=y[0:rows], data=t[0:rows], op0=nl.multiply, operand0=rstd[0:rows])
        w_all = nl.broadcast_to(nl.load(w.reshape((1, d))), (p, d))
        nisa.tensor_tensor(dst=y[0:rows], data1=y[0:rows], data2=w_all[0:rows], op=nl.multiply)
        nisa.dma_copy(dst=out[r0:r0 + rows], src=y[0:rows])
    return out
