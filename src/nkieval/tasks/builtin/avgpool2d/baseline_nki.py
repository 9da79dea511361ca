"""Baseline: the direct nine-tap sum, one output image row at a time (the CUDA thread-per-pixel order).

For every output row, the three input rows it needs are loaded again from HBM (each input row
three times), then nine shifted adds and a scale. Channels are on partitions, so every
instruction still uses 128 lanes; correct for every shape.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def avgpool2d(x):
    c, h, w = x.shape
    out = nl.ndarray((c, h, w), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    for cb in range((c + p - 1) // p):
        c0 = cb * p
        cw = min(p, c - c0)
        for y in range(h):
            xp = nl.ndarray((p, 3, w + 2), dtype=nl.float32, buffer=nl.sbuf)
            nisa.memset(dst=xp[0:cw], value=0.0)
            lo = max(0, y - 1)
            hi = min(h, y + 2)
            nisa.dma_copy(dst=xp[0:cw, lo - y + 1:hi - y + 1, 1:w + 1], src=x[c0:c0 + cw, lo:hi, :])
            acc = nl.ndarray((p, w), dtype=nl.float32, buffer=nl.sbuf)
            nisa.memset(dst=acc[0:cw], value=0.0)
            for di in range(3):
                for dj in range(3):
                    nisa.tensor_tensor(dst=acc[0:cw], data1=acc[0:cw], data2=xp[0:cw, di, dj:dj + w], op=nl.add)
            nisa.tensor_scalar(dst=acc[0:cw], data=acc[0:cw], op0=nl.multiply, operand0=1.0 / 9.0)
            nisa.dma_copy(dst=out[c0:c0 + cw, y, :], src=acc[0:cw])
    return out
