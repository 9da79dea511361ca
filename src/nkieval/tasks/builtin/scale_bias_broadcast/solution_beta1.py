"""Beta-1 (``neuronxcc.nki``) version of the expert solution: bias broadcast once, one fused op per tile.

The column bias is loaded once and broadcast to 128 partitions; per 128-row tile the rows of x and
their [rows, 1] scales are loaded with a row mask and one ``nisa.scalar_tensor_tensor`` computes
(x * row_scale) + bias.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def scale_bias_broadcast(x, row_scale, col_bias):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(d)[None, :]
    i_0 = nl.arange(1)[None, :]
    bias = nl.broadcast_to(nl.load(col_bias.reshape((1, d))[nl.arange(1)[:, None], i_f]), shape=(128, d))
    rs = row_scale.reshape((n, 1))
    for i in nl.affine_range((n + 127) // 128):
        rows = i * 128 + i_p
        ok = rows < n
        t = nl.load(x[rows, i_f], mask=ok)
        s = nl.load(rs[rows, i_0], mask=ok)
        yv = nisa.scalar_tensor_tensor(data=t, op0=nl.multiply, operand0=s, op1=nl.add, operand1=bias, mask=ok)
        nl.store(out[rows, i_f], value=yv, mask=ok)
    return out
