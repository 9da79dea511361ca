"""Baseline: the CUDA kernel's Hillis-Steele scan, 512 columns at a time, ping-ponging two tiles.

log2(512) = 9 shift-and-add steps (each an add over the shifted part plus a copy of the head)
and one add of the running total per chunk: ~20 Vector instructions per 512 columns where one
scan instruction would do. Correct for every shape.
"""

import nki
import nki.isa as nisa
import nki.language as nl

F = 512


@nki.jit
def cumsum(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    for i in range((n + p - 1) // p):
        rows = min(p, n - i * p)
        carry = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=carry, value=0.0)
        for c in range((d + F - 1) // F):
            lo = c * F
            w = min(F, d - lo)
            a = nl.ndarray((p, F), dtype=nl.float32, buffer=nl.sbuf)
            b = nl.ndarray((p, F), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=a[0:rows, 0:w], src=x[i * p:i * p + rows, lo:lo + w])
            s = 1
            while s < w:
                nisa.tensor_copy(dst=b[0:rows, 0:s], src=a[0:rows, 0:s])
                nisa.tensor_tensor(dst=b[0:rows, s:w], data1=a[0:rows, s:w], data2=a[0:rows, 0:w - s], op=nl.add)
                a, b = b, a
                s *= 2
            nisa.tensor_scalar(dst=a[0:rows, 0:w], data=a[0:rows, 0:w], op0=nl.add, operand0=carry[0:rows])
            nisa.tensor_copy(dst=carry[0:rows], src=a[0:rows, w - 1:w])
            nisa.dma_copy(dst=out[i * p:i * p + rows, lo:lo + w], src=a[0:rows, 0:w])
    return out
