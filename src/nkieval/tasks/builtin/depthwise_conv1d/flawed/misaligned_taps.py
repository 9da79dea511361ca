"""Flawed: a centred ('same') convolution: tap k reads x[t + k - (K-1)//2], zero padded on both sides."""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def depthwise_conv1d(x, w, bias):
    c, length = x.shape
    _, k = w.shape
    out = nl.ndarray((c, length), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    left = (k - 1) // 2
    right = k - 1 - left
    for cb in range((c + p - 1) // p):
        c0 = cb * p
        cw = min(p, c - c0)
        wt = nl.ndarray((p, k), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=wt[0:cw], src=w[c0:c0 + cw])
        bt = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=bt[0:cw], src=bias[c0:c0 + cw].reshape((cw, 1)))
        xp = nl.ndarray((p, length + k - 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=xp[0:cw], value=0.0)
        nisa.dma_copy(dst=xp[0:cw, left:left + length], src=x[c0:c0 + cw])
        acc = nl.ndarray((p, length), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=acc[0:cw], data=xp[0:cw, 0:length], op0=nl.multiply, operand0=wt[0:cw, 0:1],
                           op1=nl.add, operand1=bt[0:cw])
        for kk in range(1, k):
            nisa.scalar_tensor_tensor(dst=acc[0:cw], data=xp[0:cw, kk:kk + length], op0=nl.multiply,
                                      operand0=wt[0:cw, kk:kk + 1], op1=nl.add, operand1=acc[0:cw])
        nisa.dma_copy(dst=out[c0:c0 + cw], src=acc[0:cw])
        assert right >= 0
    return out
