"""Flawed: the expert scan written into a bf16 tile: each prefix is rounded to 8 bits and the carry compounds it."""

import nki
import nki.isa as nisa
import nki.language as nl

FMAX = 4096


@nki.jit
def cumsum(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    fw = min(FMAX, d)
    ones = nl.ndarray((p, fw), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=ones, value=1.0)
    for i in range((n + p - 1) // p):
        rows = min(p, n - i * p)
        prev = None
        for c in range((d + FMAX - 1) // FMAX):
            lo = c * FMAX
            w = min(FMAX, d - lo)
            t = nl.ndarray((p, fw), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t[0:rows, 0:w], src=x[i * p:i * p + rows, lo:lo + w])
            y = nl.ndarray((p, fw), dtype=nl.bfloat16, buffer=nl.sbuf)
            init = 0.0 if prev is None else prev
            nisa.tensor_tensor_scan(dst=y[0:rows, 0:w], data0=ones[0:rows, 0:w], data1=t[0:rows, 0:w],
                                    initial=init, op0=nl.multiply, op1=nl.add)
            nisa.dma_copy(dst=out[i * p:i * p + rows, lo:lo + w], src=y[0:rows, 0:w])
            prev = y[0:rows, w - 1:w]
    return out
