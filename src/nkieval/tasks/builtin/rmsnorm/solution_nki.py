"""Expert solution: 128 rows per tile, w broadcast to all partitions once, three fused instructions per tile.

* w is loaded once as a [1, D] row and broadcast to [128, D] outside the row loop.
* activation(square, scale=1/sqrt(D)) with a free-axis reduction yields mean(x^2) per row in
  one Scalar-engine pass (fp32 accumulation).
* (mean + eps)^-1/2 is a [128, 1] add and rsqrt.
* scalar_tensor_tensor computes (x * rstd) * w in one Vector-engine instruction.
One DMA in and one out per tile; the ragged last tile is a [rows, D] slice.
"""

import math

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def rmsnorm(x, w, eps=1e-6):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    w_all = nl.broadcast_to(nl.load(w.reshape((1, d))), (p, d))
    for i in nl.affine_range(math.ceil(n / p)):
        r0 = i * p
        rows = min(p, n - r0)
        t = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[0:rows], src=x[r0:r0 + rows])
        sq = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        ms = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(dst=sq[0:rows], op=nl.square, data=t[0:rows], scale=1.0 / math.sqrt(d),
                               reduce_op=nl.add, reduce_res=ms[0:rows])
        nisa.tensor_scalar(dst=ms[0:rows], data=ms[0:rows], op0=nl.add, operand0=eps)
        rstd = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=rstd[0:rows], op=nl.rsqrt, data=ms[0:rows])
        nisa.scalar_tensor_tensor(dst=sq[0:rows], data=t[0:rows], op0=nl.multiply, operand0=rstd[0:rows],
                                  op1=nl.multiply, operand1=w_all[0:rows])
        nisa.dma_copy(dst=out[r0:r0 + rows], src=sq[0:rows])
    return out
