"""Flawed: 512-column partial sums are accumulated in a bf16 tile (8 significant bits)."""

import nki
import nki.isa as nisa
import nki.language as nl

F = 512


@nki.jit
def row_sum(x):
    n, d = x.shape
    out = nl.ndarray((n,), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    for i in range((n + p - 1) // p):
        rows = min(p, n - i * p)
        acc = nl.ndarray((p, 1), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.memset(dst=acc, value=0.0)
        for j in range((d + F - 1) // F):
            w = min(F, d - j * F)
            t = nl.ndarray((p, F), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t[0:rows, 0:w], src=x[i * p:i * p + rows, j * F:j * F + w])
            s = nl.ndarray((p, 1), dtype=nl.bfloat16, buffer=nl.sbuf)
            nisa.tensor_reduce(dst=s[0:rows], op=nl.add, data=t[0:rows, 0:w], axis=1)
            nisa.tensor_tensor(dst=acc[0:rows], data1=acc[0:rows], data2=s[0:rows], op=nl.add)
        res = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res[0:rows], src=acc[0:rows])
        nisa.dma_copy(dst=out[i * p:i * p + rows].reshape((rows, 1)), src=res[0:rows])
    return out
