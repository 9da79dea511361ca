"""Flawed: rotates interleaved pairs (x[2i], x[2i+1]) with cos/sin of column 2i: the GPT-J layout."""

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
        xt = nl.ndarray((p, h, half, 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt[0:rows], src=x[i * p:i * p + rows].reshape((rows, h, half, 2)))
        c = nl.ndarray((p, 1, half, 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=c[0:rows, 0], src=cos[i * p:i * p + rows].reshape((rows, half, 2)))
        s = nl.ndarray((p, 1, half, 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s[0:rows, 0], src=sin[i * p:i * p + rows].reshape((rows, half, 2)))
        o = nl.ndarray((p, h, half, 2), dtype=nl.float32, buffer=nl.sbuf)
        tmp = nl.ndarray((p, h, half, 1), dtype=nl.float32, buffer=nl.sbuf)
        # o_even = x_even * cos + x_odd * sin ; o_odd = x_odd * cos + x_even * sin (pairs, not halves)
        nisa.tensor_tensor(dst=o[0:rows], data1=xt[0:rows], data2=c[0:rows, :, :, 0:1].broadcast(1, h).broadcast(3, 2),
                           op=nl.multiply)
        nisa.tensor_tensor(dst=tmp[0:rows], data1=xt[0:rows, :, :, 1:2], data2=s[0:rows, :, :, 0:1].broadcast(1, h),
                           op=nl.multiply)
        nisa.tensor_tensor(dst=o[0:rows, :, :, 0:1], data1=o[0:rows, :, :, 0:1], data2=tmp[0:rows], op=nl.add)
        nisa.tensor_tensor(dst=tmp[0:rows], data1=xt[0:rows, :, :, 0:1], data2=s[0:rows, :, :, 0:1].broadcast(1, h),
                           op=nl.multiply)
        nisa.tensor_tensor(dst=o[0:rows, :, :, 1:2], data1=o[0:rows, :, :, 1:2], data2=tmp[0:rows], op=nl.add)
        nisa.dma_copy(dst=out[i * p:i * p + rows].reshape((rows, h, half, 2)), src=o[0:rows])
    return out
