"""Baseline: one head at a time per 128-token tile, the tables reloaded for every head.

For each head: load x[:, h, :] (a strided [rows, D] slice), cos and sin, then compute the two
halves with separate multiplies and adds (six small instructions). Correct for
every shape, but H times the instructions and DMAs of the all-heads version.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def rope(x, cos, sin):
    t, h, d = x.shape
    half = d // 2
    out = nl.ndarray((t, h, d), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    for i in range((t + p - 1) // p):
        rows = min(p, t - i * p)
        for hh in range(h):
            xt = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=xt[0:rows], src=x[i * p:i * p + rows, hh, :])
            c = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=c[0:rows], src=cos[i * p:i * p + rows])
            s = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=s[0:rows], src=sin[i * p:i * p + rows])
            a = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
            b = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=a[0:rows], data1=xt[0:rows], data2=c[0:rows], op=nl.multiply)
            nisa.tensor_tensor(dst=b[0:rows, 0:half], data1=xt[0:rows, half:d], data2=s[0:rows, 0:half], op=nl.multiply)
            nisa.tensor_tensor(dst=b[0:rows, half:d], data1=xt[0:rows, 0:half], data2=s[0:rows, half:d], op=nl.multiply)
            o = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=o[0:rows, 0:half], data1=a[0:rows, 0:half], data2=b[0:rows, 0:half], op=nl.add)
            nisa.tensor_tensor(dst=o[0:rows, half:d], data1=a[0:rows, half:d], data2=b[0:rows, half:d], op=nl.add)
            nisa.dma_copy(dst=out[i * p:i * p + rows, hh, :], src=o[0:rows])
    return out
