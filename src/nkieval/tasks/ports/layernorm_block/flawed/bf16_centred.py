"""Flawed port: x - mean is kept in bf16."""

import math

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def layernorm_block(x, gamma, beta):
    n, d = x.shape
    y = nl.ndarray((n, d), dtype=nl.float32, buffer=nl.shared_hbm)
    mean_out = nl.ndarray((n,), dtype=nl.float32, buffer=nl.shared_hbm)
    rstd_out = nl.ndarray((n,), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    g_all = nl.broadcast_to(nl.load(gamma.reshape((1, d))), (p, d))
    b_all = nl.broadcast_to(nl.load(beta.reshape((1, d))), (p, d))
    for i in nl.affine_range(math.ceil(n / p)):
        r0 = i * p
        rows = min(p, n - r0)
        t = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[0:rows], src=x[r0:r0 + rows])
        mean = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=mean[0:rows], op=nl.add, data=t[0:rows], axis=1)
        nisa.tensor_scalar(dst=mean[0:rows], data=mean[0:rows], op0=nl.multiply, operand0=1.0 / d)
        neg_mean = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=neg_mean[0:rows], data=mean[0:rows], op0=nl.multiply, operand0=-1.0)
        xc = nl.ndarray((p, d), dtype=nl.bfloat16, buffer=nl.sbuf)
        sq = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        q = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=xc[0:rows], op=nl.copy, data=t[0:rows], bias=neg_mean[0:rows])
        nisa.activation_reduce(dst=sq[0:rows], op=nl.square, data=xc[0:rows], reduce_op=nl.add, reduce_res=q[0:rows])
        rstd = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=q[0:rows], data=q[0:rows], op0=nl.multiply, operand0=1.0 / d, op1=nl.add,
                           operand1=1e-5)
        nisa.activation(dst=rstd[0:rows], op=nl.rsqrt, data=q[0:rows])
        nisa.scalar_tensor_tensor(dst=sq[0:rows], data=xc[0:rows], op0=nl.multiply, operand0=rstd[0:rows],
                                  op1=nl.multiply, operand1=g_all[0:rows])
        nisa.tensor_tensor(dst=sq[0:rows], data1=sq[0:rows], data2=b_all[0:rows], op=nl.add)
        nisa.dma_copy(dst=y[r0:r0 + rows], src=sq[0:rows])
        nisa.dma_copy(dst=mean_out[r0:r0 + rows].reshape((rows, 1)), src=mean[0:rows])
        nisa.dma_copy(dst=rstd_out[r0:r0 + rows].reshape((rows, 1)), src=rstd[0:rows])
    return y, mean_out, rstd_out
