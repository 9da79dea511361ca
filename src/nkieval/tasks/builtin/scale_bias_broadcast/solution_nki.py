"""Expert solution: bias broadcast once, one scalar_tensor_tensor per 128-row tile.

The column bias is replicated to all 128 partitions by one stride-0 DMA and stays in SBUF. Per
tile: one DMA for the rows of x, one for their [rows, 1] scales (the row axis is the partition
axis, so the row scale is a per-partition scalar), and a single Vector instruction computing
(x * row_scale) + bias. x crosses HBM once in each direction.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def scale_bias_broadcast(x, row_scale, col_bias):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    bias = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=bias, src=col_bias.reshape((1, d)).broadcast(0, p))
    for i in range((n + p - 1) // p):
        rows = min(p, n - i * p)
        t = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[0:rows], src=x[i * p:i * p + rows])
        s = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s[0:rows], src=row_scale[i * p:i * p + rows].reshape((rows, 1)))
        nisa.scalar_tensor_tensor(dst=t[0:rows], data=t[0:rows], op0=nl.multiply, operand0=s[0:rows],
                                  op1=nl.add, operand1=bias[0:rows])
        nisa.dma_copy(dst=out[i * p:i * p + rows], src=t[0:rows])
    return out
