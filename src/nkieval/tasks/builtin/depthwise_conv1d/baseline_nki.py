"""Baseline: 512-column chunks; each tap is a separate multiply and add; the halo is re-read from HBM.

For every chunk the K-1 halo columns are loaded again from HBM (two DMAs per chunk), the filters
and bias are reloaded, and each tap costs two Vector instructions. Correct for every shape.
"""

import nki
import nki.isa as nisa
import nki.language as nl

F = 512


@nki.jit
def depthwise_conv1d(x, w, bias):
    c, length = x.shape
    _, k = w.shape
    out = nl.ndarray((c, length), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    h = k - 1
    for cb in range((c + p - 1) // p):
        c0 = cb * p
        cw = min(p, c - c0)
        for j in range((length + F - 1) // F):
            t0 = j * F
            tw = min(F, length - t0)
            wt = nl.ndarray((p, k), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=wt[0:cw], src=w[c0:c0 + cw])
            bt = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=bt[0:cw], src=bias[c0:c0 + cw].reshape((cw, 1)))
            xp = nl.ndarray((p, F + 8), dtype=nl.float32, buffer=nl.sbuf)
            nisa.memset(dst=xp[0:cw, 0:F + h], value=0.0)
            lo = max(0, t0 - h)
            if t0 > lo:
                nisa.dma_copy(dst=xp[0:cw, h - (t0 - lo):h], src=x[c0:c0 + cw, lo:t0])
            nisa.dma_copy(dst=xp[0:cw, h:h + tw], src=x[c0:c0 + cw, t0:t0 + tw])
            acc = nl.ndarray((p, F), dtype=nl.float32, buffer=nl.sbuf)
            nisa.memset(dst=acc[0:cw, 0:tw], value=0.0)
            tmp = nl.ndarray((p, F), dtype=nl.float32, buffer=nl.sbuf)
            for kk in range(k):
                nisa.tensor_scalar(dst=tmp[0:cw, 0:tw], data=xp[0:cw, kk:kk + tw], op0=nl.multiply,
                                   operand0=wt[0:cw, kk:kk + 1])
                nisa.tensor_tensor(dst=acc[0:cw, 0:tw], data1=acc[0:cw, 0:tw], data2=tmp[0:cw, 0:tw], op=nl.add)
            nisa.tensor_scalar(dst=acc[0:cw, 0:tw], data=acc[0:cw, 0:tw], op0=nl.add, operand0=bt[0:cw])
            nisa.dma_copy(dst=out[c0:c0 + cw, t0:t0 + tw], src=acc[0:cw, 0:tw])
    return out
