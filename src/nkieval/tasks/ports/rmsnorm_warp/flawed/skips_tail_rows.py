"""Flawed port: only whole 128-row tiles are normalised."""

import math

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def rmsnorm_warp(x, w):
    n, d = x.shape
    y = nl.ndarray((n, d), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    w_row = nl.ndarray((1, d), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=w_row, src=w.reshape((1, d)))
    nisa.tensor_scalar(dst=w_row, data=w_row, op0=nl.add, operand0=1.0)
    w_all = nl.broadcast_to(w_row, (p, d))
    for i in nl.affine_range(n // p):
        r0 = i * p
        rows = min(p, n - r0)
        t = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[0:rows], src=x[r0:r0 + rows])
        sq = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        ms = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(dst=sq[0:rows], op=nl.square, data=t[0:rows], scale=1.0 / math.sqrt(d),
                               reduce_op=nl.add, reduce_res=ms[0:rows])
        nisa.tensor_scalar(dst=ms[0:rows], data=ms[0:rows], op0=nl.add, operand0=1e-6)
        rstd = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=rstd[0:rows], op=nl.rsqrt, data=ms[0:rows])
        nisa.scalar_tensor_tensor(dst=sq[0:rows], data=t[0:rows], op0=nl.multiply, operand0=rstd[0:rows],
                                  op1=nl.multiply, operand1=w_all[0:rows])
        nisa.dma_copy(dst=y[r0:r0 + rows], src=sq[0:rows])
    return y
