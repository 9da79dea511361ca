"""Beta-1 (``neuronxcc.nki``) version of the expert solution: bn_stats / bn_aggr and fused affine steps.

gamma and beta are loaded once as [1, D] rows and broadcast to the tile's partitions; per
128-row tile: one masked load, ``nisa.bn_stats`` over 512-column chunks and ``nisa.bn_aggr``
for mean and variance, rstd from a [P, 1] add and rsqrt, then (x - mean) * rstd and the
gamma / beta terms.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def layernorm(x, gamma, beta, eps=1e-5):
    n, d = x.shape
    y = nl.ndarray((n, d), dtype=nl.float32, buffer=nl.shared_hbm)
    fs = 512
    nch = (d + fs - 1) // fs
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(d)[None, :]
    i_0 = nl.arange(1)[:, None]
    g = nl.broadcast_to(nl.load(gamma.reshape((1, d))[i_0, i_f]), shape=(128, d))
    b = nl.broadcast_to(nl.load(beta.reshape((1, d))[i_0, i_f]), shape=(128, d))
    for i in nl.affine_range((n + 127) // 128):
        rows = i * 128 + i_p
        ok = rows < n
        t = nl.load(x[rows, i_f], mask=ok, dtype=nl.float32)
        stats = nl.ndarray((128, nch * 6), dtype=nl.float32, buffer=nl.sbuf)
        for c in nl.affine_range(nch):
            w = min(fs, d - c * fs)
            i_c = c * fs + nl.arange(w)[None, :]
            i_s = c * 6 + nl.arange(6)[None, :]
            stats[i_p, i_s] = nisa.bn_stats(t[i_p, i_c], mask=ok)
        mv = nisa.bn_aggr(stats, mask=ok)
        rstd = nl.rsqrt(nl.add(mv[i_p, nl.arange(1)[None, :] + 1], eps, mask=ok), mask=ok)
        xc = nisa.tensor_scalar(data=t, op0=nl.subtract, operand0=mv[i_p, nl.arange(1)[None, :]], op1=nl.multiply,
                                operand1=rstd, mask=ok)
        yv = nl.add(nl.multiply(xc, g, mask=ok), b, mask=ok)
        nl.store(y[rows, i_f], value=yv, mask=ok)
    return y
