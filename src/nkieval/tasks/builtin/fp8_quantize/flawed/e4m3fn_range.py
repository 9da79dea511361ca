"""Flawed: scales rows to +-448 (the float8_e4m3fn range) but stores float8_e4m3, whose maximum is 240."""

import nki
import nki.isa as nisa
import nki.language as nl

FP8_MAX = 448.0  # the e4m3fn maximum, wrong for float8_e4m3


@nki.jit
def fp8_quantize(x):
    n, d = x.shape
    q = nl.ndarray((n, d), dtype=nl.float8_e4m3, buffer=nl.shared_hbm)
    scale = nl.ndarray((n,), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    for i in range((n + p - 1) // p):
        rows = min(p, n - i * p)
        t = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[0:rows], src=x[i * p:i * p + rows])
        ab = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=ab[0:rows], op=nl.abs, data=t[0:rows])
        amax = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=amax[0:rows], op=nl.maximum, data=ab[0:rows], axis=1)
        s = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=s[0:rows], data=amax[0:rows], op0=nl.maximum, operand0=1e-12,
                           op1=nl.multiply, operand1=1.0 / FP8_MAX)
        inv = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv[0:rows], data=s[0:rows])
        qt = nl.ndarray((p, d), dtype=nl.float8_e4m3, buffer=nl.sbuf)
        nisa.activation(dst=qt[0:rows], op=nl.copy, data=t[0:rows], scale=inv[0:rows])
        nisa.dma_copy(dst=q[i * p:i * p + rows], src=qt[0:rows])
        nisa.dma_copy(dst=scale[i * p:i * p + rows].reshape((rows, 1)), src=s[0:rows])
    return q, scale
