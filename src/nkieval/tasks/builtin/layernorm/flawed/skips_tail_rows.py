"""Flawed: the expert algorithm over whole 128-row tiles only; the last N % 128 rows are never written."""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def layernorm(x, gamma, beta, eps=1e-5):
    n, d = x.shape
    y = nl.ndarray((n, d), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    fs = nl.tile_size.bn_stats_fmax
    nch = (d + fs - 1) // fs
    g = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
    b = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=g, src=gamma.reshape((1, d)).broadcast(0, p))
    nisa.dma_copy(dst=b, src=beta.reshape((1, d)).broadcast(0, p))
    for i in range(n // p):
        rows = p
        t = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[0:rows], src=x[i * p:i * p + rows])
        stats = nl.ndarray((p, nch * 6), dtype=nl.float32, buffer=nl.sbuf)
        for c in range(nch):
            w = min(fs, d - c * fs)
            nisa.bn_stats(dst=stats[0:rows, c * 6:(c + 1) * 6], data=t[0:rows, c * fs:c * fs + w])
        mv = nl.ndarray((p, 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.bn_aggr(dst=mv[0:rows], data=stats[0:rows])
        rstd = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=rstd[0:rows], data=mv[0:rows, 1:2], op0=nl.add, operand0=eps)
        nisa.activation(dst=rstd[0:rows], op=nl.rsqrt, data=rstd[0:rows])
        u = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(dst=u[0:rows], data=t[0:rows], op0=nl.subtract, operand0=mv[0:rows, 0:1],
                                  op1=nl.multiply, operand1=g[0:rows])
        nisa.scalar_tensor_tensor(dst=u[0:rows], data=u[0:rows], op0=nl.multiply, operand0=rstd[0:rows],
                                  op1=nl.add, operand1=b[0:rows])
        nisa.dma_copy(dst=y[i * p:i * p + rows], src=u[0:rows])
    return y
