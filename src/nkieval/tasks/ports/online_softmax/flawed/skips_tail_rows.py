"""Flawed port: only whole 128-row tiles are computed."""


import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def online_softmax(x):
    n, d = x.shape
    y = nl.ndarray((n, d), dtype=nl.float32, buffer=nl.shared_hbm)
    lse = nl.ndarray((n,), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    for i in nl.affine_range(n // p):
        r0 = i * p
        rows = min(p, n - r0)
        t = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[0:rows], src=x[r0:r0 + rows])
        neg_m = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=neg_m[0:rows], op=nl.maximum, data=t[0:rows], axis=1, negate=True)
        nisa.tensor_scalar(dst=neg_m[0:rows], data=neg_m[0:rows], op0=nl.multiply, operand0=0.125)
        total = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        e = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(dst=e[0:rows], op=nl.exp, data=t[0:rows], scale=0.125, bias=neg_m[0:rows],
                               reduce_op=nl.add, reduce_res=total[0:rows])
        inv = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv[0:rows], data=total[0:rows])
        nisa.tensor_scalar(dst=e[0:rows], data=e[0:rows], op0=nl.multiply, operand0=inv[0:rows])
        nisa.dma_copy(dst=y[r0:r0 + rows], src=e[0:rows])
        lt = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=lt[0:rows], op=nl.log, data=total[0:rows])
        nisa.tensor_tensor(dst=lt[0:rows], data1=lt[0:rows], data2=neg_m[0:rows], op=nl.subtract)
        nisa.dma_copy(dst=lse[r0:r0 + rows].reshape((rows, 1)), src=lt[0:rows])
    return y, lse
