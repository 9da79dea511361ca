"""Baseline: 512-column chunks; the bias chunk is re-broadcast for every tile; multiply and add separately.

Correct for every shape, but the [128, 512] bias broadcast is reloaded for every chunk of every
row tile and each chunk costs two Vector instructions.
"""

import nki
import nki.isa as nisa
import nki.language as nl

F = 512


@nki.jit
def scale_bias_broadcast(x, row_scale, col_bias):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    for i in range((n + p - 1) // p):
        rows = min(p, n - i * p)
        s = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s[0:rows], src=row_scale[i * p:i * p + rows].reshape((rows, 1)))
        for j in range((d + F - 1) // F):
            lo = j * F
            w = min(F, d - lo)
            t = nl.ndarray((p, F), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t[0:rows, 0:w], src=x[i * p:i * p + rows, lo:lo + w])
            b = nl.ndarray((p, F), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=b[0:rows, 0:w], src=col_bias[lo:lo + w].reshape((1, w)).broadcast(0, rows))
            nisa.tensor_scalar(dst=t[0:rows, 0:w], data=t[0:rows, 0:w], op0=nl.multiply, operand0=s[0:rows])
            nisa.tensor_tensor(dst=t[0:rows, 0:w], data1=t[0:rows, 0:w], data2=b[0:rows, 0:w], op=nl.add)
            nisa.dma_copy(dst=out[i * p:i * p + rows, lo:lo + w], src=t[0:rows, 0:w])
    return out
