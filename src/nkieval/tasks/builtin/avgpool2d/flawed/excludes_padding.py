"""Flawed: count_include_pad=False: each output is divided by the number of in-image taps, not by 9."""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def avgpool2d(x):
    c, h, w = x.shape
    out = nl.ndarray((c, h, w), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    # per-pixel tap counts: (rows inside) * (columns inside), identical for every channel
    cnt = nl.ndarray((p, h, w), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=cnt, value=9.0)
    if h > 1:
        nisa.memset(dst=cnt[:, 0:1, :], value=6.0)
        nisa.memset(dst=cnt[:, h - 1:h, :], value=6.0)
    if w > 1:
        nisa.tensor_scalar(dst=cnt[:, :, 0:1], data=cnt[:, :, 0:1], op0=nl.multiply, operand0=2.0 / 3.0)
        nisa.tensor_scalar(dst=cnt[:, :, w - 1:w], data=cnt[:, :, w - 1:w], op0=nl.multiply, operand0=2.0 / 3.0)
    inv = nl.ndarray((p, h, w), dtype=nl.float32, buffer=nl.sbuf)
    nisa.reciprocal(dst=inv, data=cnt)
    for cb in range((c + p - 1) // p):
        c0 = cb * p
        cw = min(p, c - c0)
        xp = nl.ndarray((p, h + 2, w + 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=xp[0:cw], value=0.0)
        nisa.dma_copy(dst=xp[0:cw, 1:h + 1, 1:w + 1], src=x[c0:c0 + cw])
        hs = nl.ndarray((p, h + 2, w), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=hs[0:cw], data1=xp[0:cw, :, 0:w], data2=xp[0:cw, :, 1:w + 1], op=nl.add)
        nisa.tensor_tensor(dst=hs[0:cw], data1=hs[0:cw], data2=xp[0:cw, :, 2:w + 2], op=nl.add)
        vs = nl.ndarray((p, h, w), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=vs[0:cw], data1=hs[0:cw, 0:h], data2=hs[0:cw, 1:h + 1], op=nl.add)
        nisa.tensor_tensor(dst=vs[0:cw], data1=vs[0:cw], data2=hs[0:cw, 2:h + 2], op=nl.add)
        nisa.tensor_tensor(dst=vs[0:cw], data1=vs[0:cw], data2=inv[0:cw], op=nl.multiply)
        nisa.dma_copy(dst=out[c0:c0 + cw], src=vs[0:cw])
    return out
