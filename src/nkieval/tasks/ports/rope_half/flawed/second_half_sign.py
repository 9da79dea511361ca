"""Flawed port: the second half subtracts x1 * sin."""

import math

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def rope_half(x, cos_t, sin_t):
    bt, d = x.shape
    t_len, half = cos_t.shape
    y = nl.ndarray((bt, d), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    for b in range(bt // t_len):
        for j in range(math.ceil(t_len / p)):
            t0 = j * p
            rows = min(p, t_len - t0)
            r0 = b * t_len + t0
            xt = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=xt[0:rows], src=x[r0:r0 + rows])
            c = nl.ndarray((p, half), dtype=nl.float32, buffer=nl.sbuf)
            s = nl.ndarray((p, half), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=c[0:rows], src=cos_t[t0:t0 + rows])
            nisa.dma_copy(dst=s[0:rows], src=sin_t[t0:t0 + rows])
            x1, x2 = xt[0:rows, 0:half], xt[0:rows, half:d]
            out = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
            a = nl.ndarray((p, half), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=a[0:rows], data1=x2, data2=s[0:rows], op=nl.multiply)
            nisa.tensor_tensor(dst=out[0:rows, 0:half], data1=x1, data2=c[0:rows], op=nl.multiply)
            nisa.tensor_tensor(dst=out[0:rows, 0:half], data1=out[0:rows, 0:half], data2=a[0:rows], op=nl.subtract)
            nisa.tensor_tensor(dst=a[0:rows], data1=x1, data2=s[0:rows], op=nl.multiply)
            nisa.tensor_tensor(dst=out[0:rows, half:d], data1=x2, data2=c[0:rows], op=nl.multiply)
            nisa.tensor_tensor(dst=out[0:rows, half:d], data1=out[0:rows, half:d], data2=a[0:rows], op=nl.subtract)
            nisa.dma_copy(dst=y[r0:r0 + rows], src=out[0:rows])
    return y
