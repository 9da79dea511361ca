"""Baseline: the CUDA kernel's sequential walk over time, all states of 128 channels per step.

The state h [128, N] lives in SBUF; every time step costs an exp, a broadcast multiply and a
fused update of h, and a multiply + reduction for y_t: about five small instructions per step,
so the instruction count grows with L. b and c columns arrive with one broadcast DMA per
256-step chunk. Correct for every shape.
"""

import nki
import nki.isa as nisa
import nki.language as nl

TC = 256


@nki.jit
def mamba_selective_scan(x, delta, a, b, c, d_skip):
    dch, length = x.shape
    n = a.shape[1]
    y = nl.ndarray((dch, length), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    for cb in range((dch + p - 1) // p):
        c0 = cb * p
        cw = min(p, dch - c0)
        at = nl.ndarray((p, n), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=at[0:cw], src=a[c0:c0 + cw])
        ds = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=ds[0:cw], src=d_skip[c0:c0 + cw].reshape((cw, 1)))
        h = nl.ndarray((p, n), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=h, value=0.0)
        for ti in range((length + TC - 1) // TC):
            t0 = ti * TC
            tw = min(TC, length - t0)
            xt = nl.ndarray((p, TC), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=xt[0:cw, 0:tw], src=x[c0:c0 + cw, t0:t0 + tw])
            dt = nl.ndarray((p, TC), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=dt[0:cw, 0:tw], src=delta[c0:c0 + cw, t0:t0 + tw])
            bt = nl.ndarray((p, TC, n), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=bt[0:cw, 0:tw, :], src=b[:, t0:t0 + tw].permute((1, 0)).expand_dim(0).broadcast(0, cw))
            ct = nl.ndarray((p, TC, n), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=ct[0:cw, 0:tw, :], src=c[:, t0:t0 + tw].permute((1, 0)).expand_dim(0).broadcast(0, cw))
            yt = nl.ndarray((p, TC), dtype=nl.float32, buffer=nl.sbuf)
            for t in range(tw):
                ndt = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_scalar(dst=ndt[0:cw], data=dt[0:cw, t:t + 1], op0=nl.multiply, operand0=-1.0)
                da = nl.ndarray((p, n), dtype=nl.float32, buffer=nl.sbuf)
                nisa.activation(dst=da[0:cw], op=nl.exp, data=at[0:cw], scale=ndt[0:cw])
                dxt = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_tensor(dst=dxt[0:cw], data1=dt[0:cw, t:t + 1], data2=xt[0:cw, t:t + 1], op=nl.multiply)
                nisa.tensor_tensor(dst=h[0:cw], data1=h[0:cw], data2=da[0:cw], op=nl.multiply)
                nisa.scalar_tensor_tensor(dst=h[0:cw], data=bt[0:cw, t, :], op0=nl.multiply, operand0=dxt[0:cw],
                                          op1=nl.add, operand1=h[0:cw])
                prod = nl.ndarray((p, n), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_tensor(dst=prod[0:cw], data1=h[0:cw], data2=ct[0:cw, t, :], op=nl.multiply)
                nisa.tensor_reduce(dst=yt[0:cw, t:t + 1], op=nl.add, data=prod[0:cw], axis=1)
            nisa.scalar_tensor_tensor(dst=yt[0:cw, 0:tw], data=xt[0:cw, 0:tw], op0=nl.multiply, operand0=ds[0:cw],
                                      op1=nl.add, operand1=yt[0:cw, 0:tw])
            nisa.dma_copy(dst=y[c0:c0 + cw, t0:t0 + tw], src=yt[0:cw, 0:tw])
    return y
