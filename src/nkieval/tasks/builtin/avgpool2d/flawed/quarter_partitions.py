"""Flawed: the expert algorithm on 32-channel tiles: 96 of 128 partitions idle."""

import nki
import nki.isa as nisa
import nki.language as nl

FMAX = 8192  # elements per partition per chunk tile


@nki.jit
def avgpool2d(x):
    c, h, w = x.shape
    out = nl.ndarray((c, h, w), dtype=nl.float32, buffer=nl.shared_hbm)
    p = 32
    rb = max(1, min(h, FMAX // (w + 2) - 2))
    for cb in range((c + p - 1) // p):
        c0 = cb * p
        cw = min(p, c - c0)
        for r in range((h + rb - 1) // rb):
            y0 = r * rb
            ry = min(rb, h - y0)
            lo = max(0, y0 - 1)
            hi = min(h, y0 + ry + 1)
            xp = nl.ndarray((p, rb + 2, w + 2), dtype=nl.float32, buffer=nl.sbuf)
            nisa.memset(dst=xp[0:cw, 0:ry + 2, :], value=0.0)
            nisa.dma_copy(dst=xp[0:cw, lo - y0 + 1:hi - y0 + 1, 1:w + 1], src=x[c0:c0 + cw, lo:hi, :])
            hs = nl.ndarray((p, rb + 2, w), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=hs[0:cw, 0:ry + 2], data1=xp[0:cw, 0:ry + 2, 0:w], data2=xp[0:cw, 0:ry + 2, 1:w + 1],
                               op=nl.add)
            nisa.tensor_tensor(dst=hs[0:cw, 0:ry + 2], data1=hs[0:cw, 0:ry + 2], data2=xp[0:cw, 0:ry + 2, 2:w + 2],
                               op=nl.add)
            vs = nl.ndarray((p, rb, w), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=vs[0:cw, 0:ry], data1=hs[0:cw, 0:ry], data2=hs[0:cw, 1:ry + 1], op=nl.add)
            nisa.tensor_tensor(dst=vs[0:cw, 0:ry], data1=vs[0:cw, 0:ry], data2=hs[0:cw, 2:ry + 2], op=nl.add)
            nisa.activation(dst=vs[0:cw, 0:ry], op=nl.copy, data=vs[0:cw, 0:ry], scale=1.0 / 9.0)
            nisa.dma_copy(dst=out[c0:c0 + cw, y0:y0 + ry, :], src=vs[0:cw, 0:ry])
    return out
