"""Beta-1 (``neuronxcc.nki``) version of the expert solution: x broadcast once, multiply then row sum.

x is loaded once as a [1, K] row and broadcast to 128 partitions; each 128-row block of a is
one masked load, the products are one Vector instruction and the row sum one Scalar-engine
``activation_reduce`` (copy with a sum reduction), so the two engines overlap across tiles.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def matvec(a, x):
    m, k = a.shape
    y = nl.ndarray((m,), dtype=nl.float32, buffer=nl.shared_hbm)
    y2 = y.reshape((m, 1))
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(k)[None, :]
    i_0 = nl.arange(1)[None, :]
    xb = nl.broadcast_to(nl.load(x.reshape((1, k))[nl.arange(1)[:, None], i_f]), shape=(128, k))
    for i in nl.affine_range((m + 127) // 128):
        rows = i * 128 + i_p
        ok = rows < m
        t = nl.load(a[rows, i_f], mask=ok)
        prod = nl.multiply(t, xb, mask=ok)
        s = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(op=nl.copy, data=prod, reduce_op=nl.add, reduce_res=s, mask=ok)
        nl.store(y2[rows, i_0], value=s, mask=ok)
    return y
