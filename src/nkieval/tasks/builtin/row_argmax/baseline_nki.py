"""Baseline: max, then the smallest column where x equals the max (compare / select / min-reduce).

The direct translation of "first index attaining the maximum": a max reduction, an equality
mask against the row max, the column index where the mask is set (a large sentinel elsewhere)
and a min reduction: five full-width Vector instructions per 128-row tile. Correct for every
shape and tie-breaking like numpy.argmax.
"""

import nki
import nki.isa as nisa
import nki.language as nl

BIG = 16777216.0  # 2**24: larger than any column index, exact in fp32


@nki.jit
def row_argmax(x):
    n, d = x.shape
    values = nl.ndarray((n,), dtype=nl.float32, buffer=nl.shared_hbm)
    indices = nl.ndarray((n,), dtype=nl.int32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    # column index minus BIG, the same on every partition
    col = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
    nisa.iota(dst=col, pattern=[[1, d]], offset=0, channel_multiplier=0)
    nisa.tensor_scalar(dst=col, data=col, op0=nl.subtract, operand0=BIG)
    for i in range((n + p - 1) // p):
        rows = min(p, n - i * p)
        t = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[0:rows], src=x[i * p:i * p + rows])
        mx = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=mx[0:rows], op=nl.maximum, data=t[0:rows], axis=1)
        eq = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=eq[0:rows], data=t[0:rows], op0=nl.equal, operand0=mx[0:rows])
        nisa.tensor_tensor(dst=eq[0:rows], data1=eq[0:rows], data2=col[0:rows], op=nl.multiply)
        nisa.tensor_scalar(dst=eq[0:rows], data=eq[0:rows], op0=nl.add, operand0=BIG)
        first = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=first[0:rows], op=nl.minimum, data=eq[0:rows], axis=1)
        idx = nl.ndarray((p, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=idx[0:rows], src=first[0:rows])
        nisa.dma_copy(dst=values[i * p:i * p + rows].reshape((rows, 1)), src=mx[0:rows])
        nisa.dma_copy(dst=indices[i * p:i * p + rows].reshape((rows, 1)), src=idx[0:rows])
    return values, indices
