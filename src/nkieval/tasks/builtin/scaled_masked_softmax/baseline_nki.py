"""Baseline: the mask built explicitly from index tiles, then scale, mask, max, subtract, exp, sum, divide.

Column indices (iota) are compared with each row's last visible key (a per-partition iota) to
form a 0/1 keep tile, turned into an additive mask; every step is a separate full-width
instruction (about nine per tile). Correct for every shape.
"""

import nki
import nki.isa as nisa
import nki.language as nl

MASKED = -1.0e30


@nki.jit
def scaled_masked_softmax(x, scale=2.0):
    n, s = x.shape
    out = nl.ndarray((n, s), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    col = nl.ndarray((p, s), dtype=nl.float32, buffer=nl.sbuf)
    nisa.iota(dst=col, pattern=[[1, s]], offset=0, channel_multiplier=0)
    for i in range((n + p - 1) // p):
        rows = min(p, n - i * p)
        last = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.iota(dst=last, pattern=[[0, 1]], offset=i * p + s - n, channel_multiplier=1)
        t = nl.ndarray((p, s), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[0:rows], src=x[i * p:i * p + rows])
        nisa.tensor_scalar(dst=t[0:rows], data=t[0:rows], op0=nl.multiply, operand0=scale)
        hide = nl.ndarray((p, s), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=hide[0:rows], data=col[0:rows], op0=nl.greater, operand0=last[0:rows],
                           op1=nl.multiply, operand1=MASKED)
        nisa.tensor_tensor(dst=t[0:rows], data1=t[0:rows], data2=hide[0:rows], op=nl.add)
        mx = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=mx[0:rows], op=nl.maximum, data=t[0:rows], axis=1)
        nisa.tensor_scalar(dst=t[0:rows], data=t[0:rows], op0=nl.subtract, operand0=mx[0:rows])
        nisa.activation(dst=t[0:rows], op=nl.exp, data=t[0:rows])
        total = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=total[0:rows], op=nl.add, data=t[0:rows], axis=1)
        inv = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv[0:rows], data=total[0:rows])
        nisa.tensor_scalar(dst=t[0:rows], data=t[0:rows], op0=nl.multiply, operand0=inv[0:rows])
        nisa.dma_copy(dst=out[i * p:i * p + rows], src=t[0:rows])
    return out
