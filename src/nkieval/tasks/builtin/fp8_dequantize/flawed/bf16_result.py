"""Flawed: the scaled values are written to a bf16 tile; the fp32 store only widens bf16-rounded values."""

import nki
import nki.isa as nisa
import nki.language as nl

FMAX = 4096


@nki.jit
def fp8_dequantize(q, scale):
    n, d = q.shape
    y = nl.ndarray((n, d), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    fw = min(FMAX, d)
    for i in range((n + p - 1) // p):
        rows = min(p, n - i * p)
        s = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s[0:rows], src=scale[i * p:i * p + rows])
        for j in range((d + FMAX - 1) // FMAX):
            lo = j * FMAX
            w = min(FMAX, d - lo)
            t = nl.ndarray((p, fw), dtype=q.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t[0:rows, 0:w], src=q[i * p:i * p + rows, lo:lo + w])
            o = nl.ndarray((p, fw), dtype=nl.bfloat16, buffer=nl.sbuf)
            nisa.activation(dst=o[0:rows, 0:w], op=nl.copy, data=t[0:rows, 0:w], scale=s[0:rows])
            nisa.dma_copy(dst=y[i * p:i * p + rows, lo:lo + w], src=o[0:rows, 0:w])
    return y
