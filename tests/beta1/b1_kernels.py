"""Core kernels written (by us) in Beta-1 style: masks, arange/mgrid, `+=` accumulation, SPMD grids.

Imported after the shim is installed (tests/conftest.py), so `neuronxcc.nki` is nkieval's.
"""

import math

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np


@nki.jit(mode="simulation")
def tiled_add(a, b):
    """out = a + b for [N, F]; N need not be a multiple of 128 (the last tile is masked)."""
    n, f = a.shape
    out = nl.ndarray((n, f), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(f)[None, :]
    for i in nl.affine_range(math.ceil(n / 128)):
        rows = i * 128 + i_p
        ta = nl.load(a[rows, i_f], mask=(rows < n))
        tb = nl.load(b[rows, i_f], mask=(rows < n))
        tc = nl.add(ta, tb, mask=(rows < n))
        nl.store(out[rows, i_f], value=tc, mask=(rows < n))
    return out


@nki.jit(mode="simulation")
def softmax(x):
    """Row softmax of x [N, F] with a ragged last tile: max, exp(x - max), sum, divide."""
    n, f = x.shape
    out = nl.ndarray((n, f), dtype=x.dtype, buffer=nl.shared_hbm)
    ix, iy = nl.mgrid[0:128, 0:f]
    for i in nl.affine_range(math.ceil(n / 128)):
        valid = (i * 128 + ix < n)
        t = nl.load(x[i * 128 + ix, iy], mask=valid, dtype=nl.float32)
        mx = nl.max(t, axis=[1], keepdims=True, mask=(i * 128 + nl.arange(128)[:, None] < n))
        e = nl.exp(t - mx, mask=valid)
        s = nl.sum(e, axis=1, keepdims=True, mask=(i * 128 + nl.arange(128)[:, None] < n))
        y = nl.multiply(e, nl.reciprocal(s), mask=valid, dtype=x.dtype)
        nl.store(out[i * 128 + ix, iy], value=y, mask=valid)
    return out


@nki.jit(mode="simulation")
def rmsnorm(x, gamma):
    """y = x / sqrt(mean(x^2) + eps) * gamma for x [N, D], gamma [D] (gamma broadcast across partitions)."""
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_d = nl.arange(d)[None, :]
    g = nl.load(gamma.reshape((1, d))[0, i_d])
    for i in nl.affine_range(math.ceil(n / 128)):
        rows = i * 128 + i_p
        t = nl.load(x[rows, i_d], mask=(rows < n))
        sq = nl.square(t, mask=(rows < n))
        ms = nl.sum(sq, axis=[1], mask=(rows < n)) * (1.0 / d)  # [128, 1]
        inv = nl.rsqrt(ms + 1e-6, mask=(rows < n))
        y = t * inv  # tensor * [P, 1] column
        y = nl.multiply(y, g, mask=(rows < n))  # [1, D] broadcast over partitions
        nl.store(out[rows, i_d], value=y, mask=(rows < n))
    return out


@nki.jit(mode="simulation")
def layernorm(x, gamma, beta):
    """LayerNorm over the last axis with bn_stats / bn_aggr (D <= 512), then scale and shift."""
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_d = nl.arange(d)[None, :]
    g = nl.load(gamma.reshape((1, d))[0, i_d])
    bt = nl.load(beta.reshape((1, d))[0, i_d])
    for i in nl.affine_range(math.ceil(n / 128)):
        rows = i * 128 + i_p
        ok = rows < n
        t = nl.load(x[rows, i_d], mask=ok, dtype=nl.float32)
        stats = nisa.bn_stats(t, mask=ok)
        mv = nisa.bn_aggr(stats, mask=ok)  # [P, 2] = (mean, var)
        mean = mv[i_p, nl.arange(1)[None, :]]
        var = mv[i_p, 1 + nl.arange(1)[None, :]]
        rstd = nl.rsqrt(var + 1e-5, mask=ok)
        xc = nisa.tensor_scalar(t, np.subtract, mean, op1=np.multiply, operand1=rstd, mask=ok)
        y = nl.add(nl.multiply(xc, g), bt)  # (nl calls broadcast g's one partition; operators do not)
        nl.store(out[rows, i_d], value=y, mask=ok)
    return out


@nki.jit(mode="simulation")
def matmul_tiled(lhs_t, rhs):
    """out[M, N] = lhs_t.T @ rhs with PSUM `+=` accumulation over 128-row K tiles (nl.matmul)."""
    k, m = lhs_t.shape
    _, n = rhs.shape
    out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    for mi in nl.affine_range(m // 128):
        for ni in nl.affine_range(n // 512):
            res = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
            for ki in nl.affine_range(k // 128):
                a = nl.load(lhs_t[ki * 128:(ki + 1) * 128, mi * 128:(mi + 1) * 128])
                b = nl.load(rhs[ki * 128:(ki + 1) * 128, ni * 512:(ni + 1) * 512])
                res += nl.matmul(a, b, transpose_x=True)
            o = nl.copy(res, dtype=out.dtype)
            nl.store(out[mi * 128:(mi + 1) * 128, ni * 512:(ni + 1) * 512], value=o)
    return out


@nki.jit(mode="simulation")
def matmul_isa(lhs_t, rhs):
    """Same product through nisa.nc_matmul with block-dimension tiles (nl.par_dim) and index grids."""
    k, m = lhs_t.shape
    _, n = rhs.shape
    kt = k // 128
    out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    i_k = nl.arange(128)[:, None]
    i_m = nl.arange(m)[None, :]
    i_n = nl.arange(n)[None, :]
    a = nl.ndarray((kt, nl.par_dim(128), m), dtype=lhs_t.dtype, buffer=nl.sbuf)
    b = nl.ndarray((kt, nl.par_dim(128), n), dtype=rhs.dtype, buffer=nl.sbuf)
    for ki in nl.affine_range(kt):
        a[ki, i_k, i_m] = nl.load(lhs_t[ki * 128 + i_k, i_m])
        b[ki, i_k, i_n] = nl.load(rhs[ki * 128 + i_k, i_n])
    ps = nl.zeros((m, n), nl.float32, buffer=nl.psum)
    for ki in nl.affine_range(kt):
        ps += nisa.nc_matmul(a[ki], b[ki])
    nl.store(out, value=nl.copy(ps))
    return out


@nki.jit(mode="simulation")
def transpose(x):
    """out = x.T for x [P<=128, F<=128] on the Tensor engine (nisa.nc_transpose), plus load_transpose2d."""
    p, f = x.shape
    out = nl.ndarray((f, p), dtype=x.dtype, buffer=nl.shared_hbm)
    out2 = nl.ndarray((f, p), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    tt = nisa.nc_transpose(t)
    nl.store(out, value=nl.copy(tt))
    nl.store(out2, value=nl.load_transpose2d(x))
    return out, out2


@nki.jit(mode="simulation")
def causal_mask(scores):
    """Keep scores[q, k] where k <= q, else -inf stand-in (nisa.affine_select on an mgrid predicate)."""
    q, k = scores.shape
    out = nl.ndarray((q, k), dtype=scores.dtype, buffer=nl.shared_hbm)
    iq, ik = nl.mgrid[0:q, 0:k]
    s = nl.load(scores[iq, ik])
    masked = nisa.affine_select(pred=(ik <= iq), on_true_tile=s[iq, ik], on_false_value=nl.fp32.min)
    nl.store(out[iq, ik], value=masked)
    return out


@nki.jit
def spmd_scale(a, scale):
    """Each program of a 2-D grid scales its [128, 256] block of a [G0*128, G1*256] tensor."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    i = nl.program_id(0)
    j = nl.program_id(1)
    ip, jf = nl.mgrid[0:128, 0:256]
    t = nl.load(a[i * 128 + ip, j * 256 + jf])
    nl.store(out[i * 128 + ip, j * 256 + jf], value=t * scale + nl.num_programs(1))
    return out
