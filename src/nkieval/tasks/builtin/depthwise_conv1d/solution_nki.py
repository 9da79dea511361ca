"""Expert solution: channels on partitions; K fused multiply-adds over shifted views per chunk.

Each 128-channel block keeps its filters and bias as per-partition scalars ([128, K], [128, 1]).
The sequence is processed in 4096-column chunks held in a tile with K-1 leading columns for the
causal halo: zeros for the first chunk, then the last K-1 inputs of the previous chunk, copied
on chip (no re-read from HBM). Tap 0 is a tensor_scalar (x * w0 + bias), every further tap one
scalar_tensor_tensor (x_shift * w_k + acc): K Vector instructions per chunk.
"""

import nki
import nki.isa as nisa
import nki.language as nl

FMAX = 4096


@nki.jit
def depthwise_conv1d(x, w, bias):
    c, length = x.shape
    _, k = w.shape
    out = nl.ndarray((c, length), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    h = k - 1
    fw = min(FMAX, length)
    for cb in range((c + p - 1) // p):
        c0 = cb * p
        cw = min(p, c - c0)
        wt = nl.ndarray((p, k), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=wt[0:cw], src=w[c0:c0 + cw])
        bt = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=bt[0:cw], src=bias[c0:c0 + cw].reshape((cw, 1)))
        prev = None
        for j in range((length + FMAX - 1) // FMAX):
            t0 = j * FMAX
            tw = min(FMAX, length - t0)
            xp = nl.ndarray((p, fw + h), dtype=nl.float32, buffer=nl.sbuf)
            if h > 0:
                if prev is None:
                    nisa.memset(dst=xp[0:cw, 0:h], value=0.0)
                else:
                    pt, pw = prev
                    nisa.tensor_copy(dst=xp[0:cw, 0:h], src=pt[0:cw, pw:pw + h])
            nisa.dma_copy(dst=xp[0:cw, h:h + tw], src=x[c0:c0 + cw, t0:t0 + tw])
            acc = nl.ndarray((p, fw), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=acc[0:cw, 0:tw], data=xp[0:cw, 0:tw], op0=nl.multiply, operand0=wt[0:cw, 0:1],
                               op1=nl.add, operand1=bt[0:cw])
            for kk in range(1, k):
                nisa.scalar_tensor_tensor(dst=acc[0:cw, 0:tw], data=xp[0:cw, kk:kk + tw], op0=nl.multiply,
                                          operand0=wt[0:cw, kk:kk + 1], op1=nl.add, operand1=acc[0:cw, 0:tw])
            nisa.dma_copy(dst=out[c0:c0 + cw, t0:t0 + tw], src=acc[0:cw, 0:tw])
            prev = (xp, tw)
    return out
