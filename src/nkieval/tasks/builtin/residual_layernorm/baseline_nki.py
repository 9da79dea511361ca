"""Baseline: two passes, as two separate kernels would do it: add and store h, then LayerNorm reading h back.

Pass 2 re-reads h from HBM, reloads gamma and beta for every tile, and computes the statistics
with separate reduce / centre / square / reduce instructions. Correct for every shape.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def residual_layernorm(x, residual, gamma, beta, eps=1e-5):
    n, d = x.shape
    y = nl.ndarray((n, d), dtype=nl.float32, buffer=nl.shared_hbm)
    h = nl.ndarray((n, d), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    for i in range((n + p - 1) // p):
        rows = min(p, n - i * p)
        xt = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        rt = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt[0:rows], src=x[i * p:i * p + rows])
        nisa.dma_copy(dst=rt[0:rows], src=residual[i * p:i * p + rows])
        nisa.tensor_tensor(dst=xt[0:rows], data1=xt[0:rows], data2=rt[0:rows], op=nl.add)
        nisa.dma_copy(dst=h[i * p:i * p + rows], src=xt[0:rows])
    for i in range((n + p - 1) // p):
        rows = min(p, n - i * p)
        t = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[0:rows], src=h[i * p:i * p + rows])
        g = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        b = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=g[0:rows], src=gamma.reshape((1, d)).broadcast(0, rows))
        nisa.dma_copy(dst=b[0:rows], src=beta.reshape((1, d)).broadcast(0, rows))
        s = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=s[0:rows], op=nl.add, data=t[0:rows], axis=1)
        mean = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=mean[0:rows], data=s[0:rows], op0=nl.multiply, operand0=1.0 / d)
        c = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=c[0:rows], data=t[0:rows], op0=nl.subtract, operand0=mean[0:rows])
        sq = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=sq[0:rows], data1=c[0:rows], data2=c[0:rows], op=nl.multiply)
        ss = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=ss[0:rows], op=nl.add, data=sq[0:rows], axis=1)
        rstd = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=rstd[0:rows], data=ss[0:rows], op0=nl.multiply, operand0=1.0 / d, op1=nl.add,
                           operand1=eps)
        nisa.activation(dst=rstd[0:rows], op=nl.rsqrt, data=rstd[0:rows])
        nisa.tensor_scalar(dst=c[0:rows], data=c[0:rows], op0=nl.multiply, operand0=rstd[0:rows])
        nisa.tensor_tensor(dst=c[0:rows], data1=c[0:rows], data2=g[0:rows], op=nl.multiply)
        nisa.tensor_tensor(dst=c[0:rows], data1=c[0:rows], data2=b[0:rows], op=nl.add)
        nisa.dma_copy(dst=y[i * p:i * p + rows], src=c[0:rows])
    return y, h
