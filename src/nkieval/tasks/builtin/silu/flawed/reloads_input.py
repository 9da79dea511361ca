"""Flawed: each x chunk is loaded from HBM twice (for sigmoid and for the product), 64 columns at a time."""

import nki
import nki.isa as nisa
import nki.language as nl

F = 64


@nki.jit
def silu(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    for i in range((n + p - 1) // p):
        rows = min(p, n - i * p)
        for j in range((d + F - 1) // F):
            w = min(F, d - j * F)
            a = nl.ndarray((p, F), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=a[0:rows, 0:w], src=x[i * p:i * p + rows, j * F:j * F + w])
            s = nl.ndarray((p, F), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=s[0:rows, 0:w], op=nl.sigmoid, data=a[0:rows, 0:w])
            b = nl.ndarray((p, F), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=b[0:rows, 0:w], src=x[i * p:i * p + rows, j * F:j * F + w])
            nisa.tensor_tensor(dst=b[0:rows, 0:w], data1=b[0:rows, 0:w], data2=s[0:rows, 0:w], op=nl.multiply)
            nisa.dma_copy(dst=out[i * p:i * p + rows, j * F:j * F + w], src=b[0:rows, 0:w])
    return out
