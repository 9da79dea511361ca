"""Conformance table for the legacy Beta-1 front end (``neuronxcc.nki.language`` / ``neuronxcc.nki.isa``).

Kernels are written the Beta-1 way: value-returning calls, ``nl.arange`` / ``nl.mgrid`` indexing,
``mask=``, ``psum += nl.matmul(...)``, kernels that return their HBM outputs, launched with
``nki.simulate_kernel`` (``Case(frontend="beta1")``). Expectations are NumPy written from the
documented semantics (element-wise references are shared with the current-API table). API names
are ``nl.<name>`` / ``nisa.<name>`` of the ``neuronxcc.nki`` modules; the coverage listing counts
them against the Beta-1 modules' ``__all__``.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
from conf_cases_isa import (
    BOUNDS,
    FP32_MIN,
    LG_IDX,
    LG_SRC,
    SEG,
    ref_local_gather,
    ref_match_replace8,
    ref_scan,
    ref_seq_bounds,
    ref_shuffle,
)
from conf_cases_language import BINARY, UNARY
from conf_kit import Case, Illegal, frontend_available, randint, randn

if frontend_available("beta1"):
    import neuronxcc.nki as nki  # type: ignore[import-not-found]
    import neuronxcc.nki.compiler as ncc  # type: ignore[import-not-found]
    import neuronxcc.nki.isa as nisa  # type: ignore[import-not-found]
    import neuronxcc.nki.language as nl  # type: ignore[import-not-found]
    import neuronxcc.nki.typing as nt  # type: ignore[import-not-found]

P, F = 32, 64
X = randn(P, F)
Y = randn(P, F)
POS = (np.abs(randn(P, F)) + 0.5).astype(np.float32)
I1 = randint(-1000, 1000, P, F)


def B1(api: str, kernel: Any, args: tuple[Any, ...], expect: Any = None, **kw: Any) -> Case:
    return Case(api, kernel, args, expect, frontend="beta1", **kw)


def B1X(api: str, kernel: Any, args: tuple[Any, ...], rule: str, **kw: Any) -> Illegal:
    return Illegal(api, kernel, args, rule, frontend="beta1", **kw)


# -- kernel shapes ----------------------------------------------------------------------------------
def out_like(shape: Any, dtype: Any = None) -> Any:
    return nl.ndarray(tuple(shape), dtype=dtype or nl.float32, buffer=nl.shared_hbm)


def k1(fn: Any, shape: Any = None, dtype: Any = None) -> Any:
    """``out = fn(load(x))`` with the result stored through an mgrid access."""
    def kernel(x):
        t = nl.load(x)
        r = fn(t)
        out = out_like(shape or r.shape, dtype or r.dtype)
        nl.store(out, r)
        return out

    return kernel


def k2(fn: Any, dtype: Any = None) -> Any:
    def kernel(x, y):
        r = fn(nl.load(x), nl.load(y))
        out = out_like(r.shape, dtype or r.dtype)
        nl.store(out, r)
        return out

    return kernel


def _unary(name: str, dtype: Any) -> Any:
    def kernel(x):
        out = out_like(x.shape, dtype)
        i_p, i_f = nl.mgrid[0:x.shape[0], 0:x.shape[1]]
        t = nl.load(x[i_p, i_f])
        nl.store(out[i_p, i_f], getattr(nl, name)(t, dtype=dtype))
        return out

    return kernel


def _binary(name: str, dtype: Any) -> Any:
    def kernel(x, y):
        out = out_like(x.shape, dtype)
        i_p = nl.arange(x.shape[0])[:, None]
        i_f = nl.arange(x.shape[1])[None, :]
        nl.store(out[i_p, i_f], getattr(nl, name)(nl.load(x[i_p, i_f]), nl.load(y[i_p, i_f]), dtype=dtype))
        return out

    return kernel


def _elementwise_cases() -> list[Case]:
    out = []
    for name, (ref, x, rtol) in UNARY.items():
        if frontend_available("beta1") and name not in nl.__all__:
            continue
        is_int = x.dtype.kind in "iu"
        out.append(B1(f"nl.{name}", _unary(name, "int32" if is_int else "float32"), (x,),
                      lambda a, r=ref: np.asarray(r(a)), rtol=max(rtol, 1e-6), atol=1e-5))
    for name, (ref, a, b) in BINARY.items():
        if frontend_available("beta1") and name not in nl.__all__:
            continue
        is_int = a.dtype.kind in "iu"
        out.append(B1(f"nl.{name}", _binary(name, "int32" if is_int else "float32"), (a, b),
                      lambda u, v, r=ref: np.asarray(r(u, v)), rtol=1e-5, atol=1e-5))
    return out


# -- nl: creation, movement, indexing -------------------------------------------------------------
def k_masked_load_store(x):
    out = out_like((20, F))
    i_p = nl.arange(P)[:, None]
    i_f = nl.arange(F)[None, :]
    t = nl.load(x[i_p, i_f], mask=(i_p < 20))
    nl.store(out[i_p, i_f], t, mask=(i_p < 20))
    return out


def k_creation(x):
    out = out_like((4, P, F))
    z, o = nl.zeros((P, F), nl.float32), nl.ones((P, F), nl.float32)
    f = nl.full((P, F), 2.5, nl.float32)
    zl = nl.zeros_like(z)
    e = nl.empty_like(o)
    e[...] = nl.load(x)
    for i, t in enumerate((z + zl, o, f, e)):
        nl.store(out[i], t)
    return out


def k_ndarray_blocks(x):
    """(B, par_dim(P), F) block tensor: t[b] is a tile."""
    out = out_like((3, P, F))
    t = nl.ndarray((3, nl.par_dim(P), F), dtype=nl.float32, buffer=nl.sbuf)
    for b in nl.affine_range(3):
        t[b] = nl.load(x) * float(b + 1)
        nl.store(out[b], t[b])
    return out


def k_copy_static_cast(x):
    out = out_like(x.shape, nl.bfloat16)
    t = nl.copy(nl.load(x))
    nl.store(out, nl.static_cast(t, nl.bfloat16))
    return out


def k_ds(x):
    out = out_like((P, 16))
    nl.store(out, nl.load(x[:, nl.ds(8, 16)]))
    return out


def k_load_transpose2d(x):
    out = out_like((x.shape[1], x.shape[0]))
    nl.store(out, nl.load_transpose2d(x))
    return out


def k_atomic_rmw(data, idx, vals):
    out = out_like(data.shape)
    nl.store(out, nl.load(data))
    i_p = nl.arange(idx.shape[0])[:, None]
    i_f = nl.arange(data.shape[1])[None, :]
    it = nl.load(idx)
    nl.atomic_rmw(out[it[i_p, 0], i_f], value=nl.load(vals), op=np.add)
    return out


def _atomic_ref(data: np.ndarray, idx: np.ndarray, vals: np.ndarray) -> np.ndarray:
    r = data.copy()
    np.add.at(r, idx[:, 0], vals)
    return r


def k_shared_constant(x):
    out = out_like(x.shape)
    c = nl.shared_constant(np.full((P, F), 3.0, np.float32), dtype=nl.float32)
    nl.store(out, nl.load(x) + nl.load(c))
    return out


def k_identity(x):
    out = out_like((P, P))
    nl.store(out, nl.load(nl.shared_identity_matrix(P, dtype=nl.float32)))
    return out


def k_buffer_queries(x):
    out = out_like((1, 3), nl.int32)
    s = nl.load(x)
    p = nl.matmul(s, s, transpose_x=True)
    flags = nl.zeros((1, 3), nl.int32)
    flags[0, 0] = int(nl.is_sbuf(s.buffer))
    flags[0, 1] = int(nl.is_psum(p.buffer))
    flags[0, 2] = int(nl.is_hbm(x.buffer))
    nl.store(out, flags)
    return out


def k_constants(x):
    """nl.tile_size, nl.fp32 / nl.bfp16 minima, nl.finfo, gemm tile definitions."""
    out = out_like((1, 6))
    t = nl.zeros((1, 6), nl.float32)
    t[0, 0] = float(nl.tile_size.pmax)
    t[0, 1] = float(nl.gemm_grid().fmax)
    t[0, 2] = float(nl.gemm_stationary_grid().fmax)
    t[0, 3] = nl.fp32.min
    t[0, 4] = nl.bfp16.min
    t[0, 5] = float(nl.finfo(nl.float16).max)
    nl.store(out, t)
    return out


def _constants_ref(x: np.ndarray) -> np.ndarray:
    bf = float(ml_dtypes.finfo(ml_dtypes.bfloat16).min)
    return np.array([[128, 512, 128, FP32_MIN, bf, 65504.0]], np.float32)


def k_loops(x):
    out = out_like(x.shape)
    acc = nl.zeros((P, F), nl.float32)
    for _ in nl.sequential_range(2):
        acc[...] = acc + nl.load(x)
    for i in nl.static_range(2):
        acc[...] = acc + float(i)
    nl.store(out, nl.load(x) + acc)
    return out


# -- nl: compute -----------------------------------------------------------------------------------
def k_matmul_accumulate(a, b):
    """psum += nl.matmul(x, y) over K tiles (x given [K, M] with transpose_x)."""
    out = out_like((a.shape[1], b.shape[1]))
    ps = nl.zeros((a.shape[1], b.shape[1]), nl.float32, buffer=nl.psum)
    for k in nl.affine_range(a.shape[0] // 32):
        i_k = nl.arange(32)[:, None]
        ps += nl.matmul(nl.load(a[k * 32 + i_k, nl.arange(a.shape[1])[None, :]]),
                        nl.load(b[k * 32 + i_k, nl.arange(b.shape[1])[None, :]]), transpose_x=True)
    nl.store(out, nl.copy(ps))
    return out


def k_matmul_plain(a, b):
    out = out_like((a.shape[0], b.shape[1]))
    nl.store(out, nl.copy(nl.matmul(nl.load(a), nl.load(b))))
    return out


def k_matmul_masked(a, b):
    """Only result rows < 20 and columns < 40 are computed; the rest of the PSUM tile keeps its zeros."""
    out = out_like((a.shape[1], b.shape[1]))
    ps = nl.zeros((a.shape[1], b.shape[1]), nl.float32, buffer=nl.psum)
    i_m = nl.arange(a.shape[1])[:, None]
    i_n = nl.arange(b.shape[1])[None, :]
    ps[i_m, i_n] += nl.matmul(nl.load(a), nl.load(b), transpose_x=True, mask=(i_m < 20) & (i_n < 40))
    nl.store(out, nl.copy(ps))
    return out


def _masked_mm_ref(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    r = np.zeros((a.shape[1], b.shape[1]), np.float32)
    r[:20, :40] = (a.T @ b)[:20, :40]
    return r


def k_transpose(x):
    out = out_like((x.shape[1], x.shape[0]))
    nl.store(out, nl.copy(nl.transpose(nl.load(x))))
    return out


def k_transpose_masked(x):
    out = out_like((x.shape[1], x.shape[0]))
    z = nl.zeros((x.shape[1], x.shape[0]), nl.float32)
    i_f = nl.arange(x.shape[1])[:, None]
    i_p = nl.arange(x.shape[0])[None, :]
    z[i_f, i_p] = nl.transpose(nl.load(x), mask=(i_f < 10))
    nl.store(out, z)
    return out


def k_where(x, y):
    out = out_like(x.shape)
    a, b = nl.load(x), nl.load(y)
    nl.store(out, nl.where(a > b, a, -1.0))
    return out


def _red(name: str, axis: Any, masked: bool = False) -> Any:
    def kernel(x):
        t = nl.load(x)
        if masked:
            i_p = nl.arange(x.shape[0])[:, None]
            i_f = nl.arange(x.shape[1])[None, :]
            r = getattr(nl, name)(t[i_p, i_f], axis=axis, mask=(i_p < 16), keepdims=True)
        else:
            r = getattr(nl, name)(t, axis=axis, keepdims=True)
        out = out_like(r.shape, r.dtype)
        nl.store(out, r)
        return out

    return kernel


def k_var(x):
    r = nl.var(nl.load(x), axis=1)
    out = out_like(r.shape)
    nl.store(out, r)
    return out


def k_all(x):
    r = nl.all(nl.load(x), axis=1, dtype=nl.float32)
    out = out_like(r.shape)
    nl.store(out, r)
    return out


def k_softmax_masked(x):
    out = out_like(x.shape)
    i_p = nl.arange(x.shape[0])[:, None]
    i_f = nl.arange(x.shape[1])[None, :]
    z = nl.zeros(x.shape, nl.float32)
    z[i_p, i_f] = nl.softmax(nl.load(x), axis=1, mask=(i_f < 16))
    nl.store(out, z)
    return out


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def _softmax_masked_ref(x: np.ndarray) -> np.ndarray:
    r = np.zeros_like(x)
    r[:, :16] = _softmax(x[:, :16])
    return r


def k_rms_norm(x, w):
    out = out_like(x.shape)
    nl.store(out, nl.rms_norm(nl.load(x), nl.load(w), axis=1, n=x.shape[1]))
    return out


def k_broadcast_to(x):
    out = out_like((P, F))
    nl.store(out, nl.broadcast_to(nl.load(x), shape=(P, F)))  # [1, F] -> [P, F]
    return out


def k_expand_dims(x):
    out = out_like((P, F, 1))
    nl.store(out, nl.expand_dims(nl.load(x), 2))
    return out


def k_gather_flattened(x, i):
    out = out_like(i.shape)
    nl.store(out, nl.gather_flattened(nl.load(x), nl.load(i)))
    return out


def k_device_print(x):
    out = out_like(x.shape)
    t = nl.load(x)
    nl.device_print("t =", t)
    nl.store(out, t)
    return out


def k_dropout(x):
    out = out_like(x.shape)
    nl.store(out, nl.dropout(nl.load(x), rate=0.5))
    return out


def _dropout_check(o: np.ndarray, x: np.ndarray) -> None:
    kept = o != 0
    assert 0.3 < kept.mean() < 0.7, kept.mean()
    # kept elements keep their value (Beta 1 / hardware dropout does not rescale) or are scaled by 1/(1-rate)
    ratio = o[kept] / x[kept]
    assert np.allclose(ratio, ratio.reshape(-1)[0], rtol=1e-5), np.unique(ratio)[:4]


def k_rand_seed(x):
    out = out_like((2, P, F))
    nl.random_seed(7)
    a = nl.rand((P, F))
    nl.random_seed(7)
    b = nl.rand((P, F))
    nl.store(out[0], a)
    nl.store(out[1], b)
    return out


def _rand_check(o: np.ndarray) -> None:
    assert np.array_equal(o[0], o[1]), "same seed, same values"
    assert o.min() >= 0 and o.max() < 1 and 0.4 < o.mean() < 0.6 and len(np.unique(o)) > 1000


def k_loop_reduce_subscript(x):
    out = out_like((P, F))
    acc = nl.zeros((P, F), nl.float32)
    for k in nl.affine_range(x.shape[0]):
        acc[...] = nl.loop_reduce(nl.load(x[k]), op=np.maximum, loop_indices=[k])
    nl.store(out, acc)
    return out


def k_loop_reduce_masked(x):
    out = out_like((P, F))
    acc = nl.zeros((P, F), nl.float32)
    i_p = nl.arange(P)[:, None]
    i_f = nl.arange(F)[None, :]
    for k in nl.affine_range(x.shape[0]):
        acc[i_p, i_f] = nl.loop_reduce(nl.load(x[k]), op=np.add, loop_indices=[k], mask=(i_f < 20))
    nl.store(out, acc)
    return out


def _loop_reduce_masked_ref(x: np.ndarray) -> np.ndarray:
    r = np.zeros(x.shape[1:], np.float32)
    r[:, :20] = x.sum(0)[:, :20]
    return r


def k_loop_reduce_rebind(x):
    out = out_like((P, F))
    b = nl.zeros((P, F), nl.float32)
    for k in nl.affine_range(x.shape[0]):
        b = nl.loop_reduce(nl.load(x[k]), op=np.add, loop_indices=[k], dtype=nl.float32)
    nl.store(out, b)
    return out


def _grid_kernel():
    def kernel(x):
        out = out_like((2, 3, 1, 4))
        i, j = nl.program_id(0), nl.program_id(axis=1)
        t = nl.zeros((1, 4), nl.float32)
        t[0, 0] = float(i)
        t[0, 1] = float(j)
        t[0, 2] = float(nl.num_programs(1))
        t[0, 3] = float(nl.program_ndim())
        nl.store(out[i, j], t)
        return out

    return nki.jit(kernel, mode="simulation")[2, 3] if frontend_available("beta1") else kernel


def _grid_ref(x: np.ndarray) -> np.ndarray:
    r = np.zeros((2, 3, 1, 4), np.float32)
    for i in range(2):
        for j in range(3):
            r[i, j, 0] = [i, j, 3, 2]
    return r


def _spmd_kernel(grid: Any) -> Any:
    def kernel(x):
        out = out_like(x.shape)
        i = nl.program_id(0)
        nl.store(out[i], nl.load(x[i]) * 2.0)
        return out

    return nki.jit(kernel, mode="simulation")[grid] if frontend_available("beta1") else kernel


def _all_reduce_kernel(op: Any, axes: Any) -> Any:
    def kernel(x):
        out = out_like(x.shape)
        i, j = nl.program_id(0), nl.program_id(1)
        r = nl.all_reduce(nl.load(x[i, j]), op=op, program_axes=axes)
        nl.store(out[i, j], r)
        return out

    return nki.jit(kernel, mode="simulation")[2, 3] if frontend_available("beta1") else kernel


XG = randn(2, 3, 4, 8)


# -- nisa ------------------------------------------------------------------------------------------
def k_nc_matmul_acc(a, b):
    out = out_like((a.shape[1], b.shape[1]))
    ps = nl.zeros((a.shape[1], b.shape[1]), nl.float32, buffer=nl.psum)
    for k in nl.affine_range(a.shape[0] // 32):
        ps += nisa.nc_matmul(nl.load(a[k * 32:(k + 1) * 32, :]), nl.load(b[k * 32:(k + 1) * 32, :]))
    nl.store(out, nl.copy(ps))
    return out


def k_nc_matmul_masked(a, b):
    out = out_like((a.shape[1], b.shape[1]))
    ps = nl.zeros((a.shape[1], b.shape[1]), nl.float32, buffer=nl.psum)
    i_m = nl.arange(a.shape[1])[:, None]
    i_n = nl.arange(b.shape[1])[None, :]
    ps[i_m, i_n] += nisa.nc_matmul(nl.load(a), nl.load(b), mask=(i_m < 20) & (i_n < 40))
    nl.store(out, nl.copy(ps))
    return out


def k_activation_reduce(x):
    out = out_like((P, F + 1))
    t = nl.load(x)
    r = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    e = nisa.activation_reduce(op=nl.exp, data=t, reduce_op=np.add, reduce_res=r, scale=0.5)
    nl.store(out[:, 0:F], e)
    nl.store(out[:, F:F + 1], r)
    return out


def k_affine_select(x):
    out = out_like(x.shape)
    iy, ix = nl.mgrid[0:x.shape[0], 0:x.shape[1]]
    nl.store(out, nisa.affine_select(iy >= ix, nl.load(x), -1e4))
    return out


def k_bn(x):
    out = out_like((P, 2))
    nl.store(out, nisa.bn_aggr(nisa.bn_stats(nl.load(x))))
    return out


def k_dma_copy(x):
    out = out_like(x.shape)
    t = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=out, src=t)
    return out


def k_dma_copy_rmw(x, y):
    out = out_like(x.shape)
    nisa.dma_copy(dst=out, src=x)
    nisa.dma_copy(dst=out, src=nl.load(y), dst_rmw_op=np.add)
    return out


def k_dma_transpose(x):
    out = out_like((x.shape[1], x.shape[0]), nl.bfloat16)
    nl.store(out, nisa.dma_transpose(x))
    return out


def k_dropout_isa(x):
    out = out_like(x.shape)
    nl.store(out, nisa.dropout(nl.load(x), prob=0.5))
    return out


def k_nc_version(x):
    out = out_like((1, 1), nl.int32)
    t = nl.zeros((1, 1), nl.int32)
    t[0, 0] = int(nisa.get_nc_version())
    nl.store(out, t)
    return out


def k_iota(x):
    out = out_like((P, F), nl.int32)
    i_p, i_f = nl.mgrid[0:P, 0:F]
    nl.store(out, nisa.iota(3 + 10 * i_p + i_f, dtype=nl.int32))
    return out


def k_local_gather(x, i):
    r = nisa.local_gather(nl.load(x), nl.load(i), num_elem_per_idx=2)
    out = out_like(r.shape)
    nl.store(out, r)
    return out


def k_max8_find_match(x):
    out = out_like((P, 8 + 8 + F))
    t = nl.load(x)
    m = nisa.max8(src=t)
    idx = nisa.nc_find_index8(data=t, vals=m)
    rep = nisa.nc_match_replace8(data=t, vals=m, imm=-1.0)
    nl.store(out[:, 0:8], m)
    nl.store(out[:, 8:16], nl.copy(idx, dtype=nl.float32))
    nl.store(out[:, 16:16 + F], rep)
    return out


def _max8_ref(x: np.ndarray) -> np.ndarray:
    m = -np.sort(-x, 1)[:, :8]
    return np.concatenate([m, np.argsort(-x, 1)[:, :8].astype(np.float32), ref_match_replace8(x, m, -1.0)[0]], 1)


def k_memset(x):
    out = out_like((P, F))
    i_p = nl.arange(P)[:, None]
    z = nl.zeros((P, F), nl.float32)
    z[...] = nisa.memset((P, F), 2.5, nl.float32, mask=(i_p < 16))
    nl.store(out, z, mask=(i_p < 16))
    return out


def k_nc_stream_shuffle(x):
    out = out_like(x.shape)
    t = nl.load(x)
    d = nl.full(x.shape, 7.0, nl.float32)
    mask = [(i + 1) % 32 for i in range(32)]
    mask[5] = 255
    nisa.nc_stream_shuffle(src=t, dst=d, shuffle_mask=mask)
    nl.store(out, d)
    return out


def k_nc_transpose(x):
    out = out_like((x.shape[1], x.shape[0]))
    nl.store(out, nl.copy(nisa.nc_transpose(nl.load(x))))
    return out


def k_nc_transpose_vector(x):
    out = out_like((x.shape[1], x.shape[0]))
    nl.store(out, nisa.nc_transpose(nl.load(x), engine=nisa.vector_engine))
    return out


def k_range_select(x, b):
    out = out_like((P, F + 1))
    t = nl.load(x)
    bb = nl.load(b)
    r = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    d = nisa.range_select(on_true_tile=t, comp_op0=np.greater_equal, comp_op1=np.less, bound0=bb[:, 0:1],
                          bound1=bb[:, 1:2], reduce_cmd=nisa.reduce_cmd.reset_reduce, reduce_res=r,
                          reduce_op=np.max, range_start=4)
    nl.store(out[:, 0:F], d)
    nl.store(out[:, F:F + 1], r)
    return out


def _range_ref(x: np.ndarray, b: np.ndarray) -> np.ndarray:
    j = np.arange(F) + 4
    d = np.where((j >= b[:, :1]) & (j < b[:, 1:]), x, FP32_MIN)
    return np.concatenate([d, d.max(1, keepdims=True)], 1)


def k_select_reduce(x, y):
    out = out_like((P, F + 1))
    a, b = nl.load(x), nl.load(y)
    d = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.sbuf)
    r = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.select_reduce(dst=d, predicate=nl.greater(a, b, dtype=nl.uint8), on_true=a, on_false=-1.0, reduce_res=r,
                       reduce_cmd=nisa.reduce_cmd.reset_reduce, reduce_op=np.max)
    nl.store(out[:, 0:F], d)
    nl.store(out[:, F:F + 1], r)
    return out


def _select_ref(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    d = np.where(x > y, x, -1.0)
    return np.concatenate([d, d.max(1, keepdims=True)], 1)


def k_sequence_bounds(s):
    r = nisa.sequence_bounds(segment_ids=nl.load(s))
    out = out_like(r.shape)
    nl.store(out, r)
    return out


def k_copy_predicated(x, y):
    out = out_like(x.shape)
    a, b = nl.load(x), nl.load(y)
    nisa.tensor_copy_predicated(src=a, dst=b, predicate=nl.greater(a, b))
    nl.store(out, b)
    return out


def k_dyn_src(src, offs):
    out = out_like((P, offs.shape[1]))
    s, o = nl.load(src), nl.load(offs)
    ob = nl.ndarray((P, offs.shape[1]), dtype=nl.float32, buffer=nl.sbuf)
    ix, iy = nl.mgrid[0:P, 0:1]
    for j in nl.affine_range(offs.shape[1]):
        ob[ix, j] = nisa.tensor_copy_dynamic_src(s[ix, o[0, j] + iy])
    nl.store(out, ob)
    return out


def k_dyn_src_3d(src, offs):
    """src [P, 32, 4]; a runtime offset used directly as the middle index."""
    out = out_like((P, offs.shape[1], 4))
    s, o = nl.load(src), nl.load(offs)
    ob = nl.ndarray((P, offs.shape[1], 4), dtype=nl.float32, buffer=nl.sbuf)
    ix, _, iz = nl.mgrid[0:P, 0:1, 0:4]
    for j in nl.affine_range(offs.shape[1]):
        ob[ix, j, iz] = nisa.tensor_copy_dynamic_src(s[ix, o[0, j], iz])
    nl.store(out, ob)
    return out


def k_dyn_dst(src, offs):
    """Scatter column j of src to column offs[0, j] of the result."""
    out = out_like((P, F))
    s, o = nl.load(src), nl.load(offs)
    d = nl.zeros((P, F), nl.float32)
    ix, iy = nl.mgrid[0:P, 0:1]
    for j in nl.sequential_range(offs.shape[1]):
        nisa.tensor_copy_dynamic_dst(dst=d[ix, o[0, j] + iy], src=s[ix, j + iy])
    nl.store(out, d)
    return out


DYN_SRC = randn(P, 96)
DYN_OFFS = (4 + 3 * np.arange(16, dtype=np.int32))[None, :]
DYN_SRC3 = randn(P, 32, 4)
DYN_OFFS3 = np.array([[5, 0, 31, 7]], np.int32)


def _dyn_dst_ref(src: np.ndarray, offs: np.ndarray) -> np.ndarray:
    r = np.zeros((P, F), np.float32)
    r[:, offs[0]] = src[:, : offs.shape[1]]
    return r


def k_tensor_reduce(x):
    out = out_like((P, 1))
    nl.store(out, nisa.tensor_reduce(np.add, nl.load(x), axis=1, keepdims=True))
    return out


def k_tensor_reduce_masked(x):
    out = out_like((P, 1))
    i_p = nl.arange(P)[:, None]
    i_f = nl.arange(F)[None, :]
    z = nl.zeros((P, 1), nl.float32)
    z[i_p, 0] = nisa.tensor_reduce(np.max, nl.load(x)[i_p, i_f], axis=1, mask=(i_f < 10), keepdims=True)
    nl.store(out, z)
    return out


def k_tensor_scalar_reduce(x):
    out = out_like((P, F + 1))
    r = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    d = nisa.tensor_scalar_reduce(data=nl.load(x), op0=np.multiply, operand0=2.0, reduce_op=np.add, reduce_res=r)
    nl.store(out[:, 0:F], d)
    nl.store(out[:, F:F + 1], r)
    return out


def k_tensor_scalar_cumulative(x):
    out = out_like(x.shape)
    d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar_cumulative(src=nl.load(x), dst=d, op0=np.multiply, op1=np.add, imm0=2.0)
    nl.store(out, d)
    return out


def k_tensor_tensor_masked(x, y):
    out = out_like(x.shape)
    i_p = nl.arange(P)[:, None]
    i_f = nl.arange(F)[None, :]
    z = nl.zeros((P, F), nl.float32)
    z[i_p, i_f] = nisa.tensor_tensor(nl.load(x), nl.load(y), np.subtract, mask=(i_f >= 8))
    nl.store(out, z)
    return out


def _tt_masked_ref(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    r = np.zeros_like(x)
    r[:, 8:] = (x - y)[:, 8:]
    return r


# -- mask= on every value-returning call: only the masked box is computed; t[...] = masked result writes only it ----
def _masked(fn: Any, out_shape: Any, rows: int = 16, cols: Any = None, base: float = 0.0) -> Any:
    """``z = full(base); z[i_p, i_f] = fn(t, mask)``; mask = (i_p < rows) [& (i_f < cols)] over the result shape."""
    def kernel(x, *more):
        t = nl.load(x)
        extra = [nl.load(m) for m in more]
        shp = out_shape(t.shape) if callable(out_shape) else out_shape
        i_p = nl.arange(shp[0])[:, None]
        i_f = nl.arange(shp[1])[None, :]
        m = (i_p < rows) if cols is None else (i_p < rows) & (i_f < cols)
        z = nl.full(shp, base, nl.float32)
        z[i_p, i_f] = fn(t, m, *extra)
        out = out_like(shp)
        nl.store(out, z)
        return out

    return kernel


def _keep(ref: Any, rows: int = 16, cols: Any = None, base: float = 0.0) -> Any:
    def want(*args: Any) -> np.ndarray:
        r = np.asarray(ref(*args), dtype=np.float64)
        z = np.full(r.shape, base)
        z[:rows, :cols] = r[:rows, :cols]
        return z

    return want


def _in_mask(fn: Any, rows: int = 16, cols: Any = None) -> Any:
    """A row-wise op whose mask is over its *input* (masked-out columns are not read)."""
    def kernel(x):
        t = nl.load(x)
        i_p = nl.arange(x.shape[0])[:, None]
        i_f = nl.arange(x.shape[1])[None, :]
        m = (i_p < rows) if cols is None else (i_p < rows) & (i_f < cols)
        r = fn(t, m)
        z = nl.zeros(r.shape, nl.float32)
        z[nl.arange(r.shape[0])[:, None], nl.arange(r.shape[1])[None, :]] = r
        out = out_like(r.shape)
        nl.store(out, z)
        return out

    return kernel


def _rows_of(ref: Any, rows: int = 16) -> Any:
    def want(x: np.ndarray) -> np.ndarray:
        r = np.asarray(ref(x), dtype=np.float64)
        z = np.zeros(r.shape)
        z[:rows] = r[:rows]
        return z

    return want




# -- nki.compiler direct allocation -----------------------------------------------------------------
def k_mod_alloc(x):
    """Blocks of a mod_alloc tensor rotate over num_free_tiles physical tiles: block i aliases block i % 2."""
    out = out_like((2, P, F))
    t = nl.ndarray((4, nl.par_dim(P), F), dtype=nl.float32,
                   buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)))
    for b in nl.sequential_range(4):
        t[b] = nl.load(x) + float(b)
    nl.store(out[0], t[0])  # block 0 shares block 2's tile: holds x + 2
    nl.store(out[1], t[1])  # block 1 shares block 3's: x + 3
    return out


def k_mod_alloc_double_buffer(x):
    """The documented double-buffering pattern: each block is consumed before its alias is rewritten."""
    out = out_like(x.shape)
    t = nl.ndarray((x.shape[0], nl.par_dim(P), F), dtype=nl.float32,
                   buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)))
    for b in nl.affine_range(x.shape[0]):
        t[b] = nl.load(x[b])
        nl.store(out[b], nl.exp(t[b]))
    return out


def k_psum_mod_alloc(a, b):
    """PSUM blocks rotate over num_bank_tiles banks."""
    out = out_like((3, a.shape[1], b.shape[1]))
    ps = nl.ndarray((3, nl.par_dim(a.shape[1]), b.shape[1]), dtype=nl.float32,
                    buffer=ncc.psum.mod_alloc(base_bank=0, num_bank_tiles=(2,)))
    for i in nl.sequential_range(3):
        ps[i] = nisa.nc_matmul(nl.load(a) * float(i + 1), nl.load(b))
    for i in nl.sequential_range(3):
        nl.store(out[i], nl.copy(ps[i]))  # block 0 was overwritten by block 2
    return out


def k_alloc_same_address(x):
    """Two tensors that ncc.sbuf.alloc places at the same address alias each other."""
    out = out_like((P, F))

    def at_zero(idx, pdim_size, fdim_size):
        return 0, 0

    a = nl.ndarray((nl.par_dim(P), F), dtype=nl.float32, buffer=ncc.sbuf.alloc(at_zero))
    b = nl.ndarray((nl.par_dim(P), F), dtype=nl.float32, buffer=ncc.sbuf.alloc(at_zero))
    a[...] = nl.load(x)
    b[...] = nl.load(x) * 3.0
    nl.store(out, a)  # a's tile now holds b's values
    return out


def k_alloc_blocks(x):
    """A user allocation function: block (i,) at byte address 1024 * (i // 2), so blocks 0,1 and 2,3 alias."""
    out = out_like((4, P, F))

    def pairs(idx, pdim_size, fdim_size):
        return 0, 1024 * (idx[0] // 2)

    t = nl.ndarray((4, nl.par_dim(P), F), dtype=nl.float32, buffer=ncc.sbuf.alloc(pairs))
    for i in nl.sequential_range(4):
        t[i] = nl.load(x) * float(i)
    for i in nl.sequential_range(4):
        nl.store(out[i], t[i])
    return out


def k_psum_alloc(a, b):
    """ncc.psum.alloc with (bank, partition, byte_addr): two result tiles in banks 0 and 3."""
    out = out_like((2, a.shape[1], b.shape[1]))

    def banks(idx, pdim_size, fdim_size):
        return 3 * idx[0], 0, 0

    ps = nl.ndarray((2, nl.par_dim(a.shape[1]), b.shape[1]), dtype=nl.float32, buffer=ncc.psum.alloc(banks))
    for i in nl.affine_range(2):
        ps[i] = nisa.nc_matmul(nl.load(a) * float(i + 1), nl.load(b))
        nl.store(out[i], nl.copy(ps[i]))
    return out


def x_alloc_bad_return(x):
    return nl.ndarray((2, nl.par_dim(P), F), dtype=nl.float32, buffer=ncc.sbuf.alloc(lambda i, p, f: 0))


# -- kernel parameters -----------------------------------------------------------------------------
def k_mutable_param(a: nt.mutable_tensor, b):
    out = out_like(a.shape)
    y = nl.load(a) + nl.load(b)
    nl.store(out, y)
    nl.store(a, y * 2.0)
    return out, a


def _mutable_check(out: Any, a: np.ndarray, b: np.ndarray) -> None:
    """(a0 + b, a) where the kernel wrote 2 * (a0 + b) into a (written back in place); rerun-safe."""
    s, a_out = out
    np.testing.assert_allclose(a_out, 2 * s, rtol=1e-6)
    np.testing.assert_allclose(a, a_out, rtol=1e-6)


def k_immutable_write(a):
    nl.store(a, nl.load(a) + 1.0)
    return a


def k_mutable_not_returned(a: nt.mutable_tensor):
    out = out_like(a.shape)
    y = nl.load(a) + 1.0
    nl.store(out, y)
    nl.store(a, y)
    return out


def k_old_style_output_param(a, out):
    """Older Beta-1 style: the output is a parameter and the kernel returns nothing (allowed)."""
    nl.store(out, nl.load(a) + 1.0)


# -- illegal uses ------------------------------------------------------------------------------------
def x_partitions(x):
    return nl.zeros((256, 4), nl.float32)


def x_oob(x):
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(F)[None, :]
    return nl.load(x[i_p, i_f])


def x_mixed_index(x):
    return nl.load(x[0:4, nl.arange(8)[None, :]])


def x_1d_arange(x):
    return nl.load(x[nl.arange(4), nl.arange(8)[None, :]])


def x_affine_dependency(x):
    out = out_like(x.shape)
    acc = nl.zeros((P, F), nl.float32)
    for i in nl.affine_range(2):
        acc[...] = nl.load(x) * float(i)
    nl.store(out, acc)
    return out


def x_load_from_sbuf(x):
    return nl.load(nl.load(x))


def x_control_flow(x):
    if nl.arange(4)[:, None] < 2:
        return None
    return None


def x_hbm_init(x):
    return nl.zeros((P, F), nl.float32, buffer=nl.shared_hbm)


def x_nested_grid(x):
    inner = nki.jit(lambda y: y, mode="simulation")
    return inner[2](x)


def x_matmul_partitions(x, y):
    return nl.matmul(nl.load(x), nl.load(y), transpose_x=True)


def x_tensor_tensor_partitions(x, y):
    return nisa.tensor_tensor(nl.load(x), nl.load(y[0:16, :]), np.add)


def x_dyn_offset_not_scalar(src, offs):
    s, o = nl.load(src), nl.load(offs)
    ix, iy = nl.mgrid[0:P, 0:1]
    return nisa.tensor_copy_dynamic_src(s[ix, o[0:1, 0:2] + iy])


def x_dyn_src_static(src, offs):
    return nisa.tensor_copy_dynamic_src(nl.load(src))


def x_all_reduce_axis(x):
    return nl.all_reduce(nl.load(x[0]), op=np.add, program_axes=3)


def x_mod_alloc_partitions(x):
    return nl.ndarray((2, nl.par_dim(P), F), dtype=nl.float32,
                      buffer=ncc.sbuf.mod_alloc(base_addr=0, base_partition=120, num_free_tiles=(2,)))


if frontend_available("beta1"):
    _GRID = _grid_kernel()
    _SPMD2 = _spmd_kernel(2)
    _SPMD_NC = _spmd_kernel(nl.nc(2))
    _SPMD_DIM = _spmd_kernel(nl.spmd_dim(2, nl.nc(2)))
    _AR_ADD = _all_reduce_kernel(np.add, 1)
    _AR_MAX = _all_reduce_kernel(np.maximum, (0, 1))
else:  # the table still lists its names; the cases are skipped
    _GRID = _SPMD2 = _SPMD_NC = _SPMD_DIM = _AR_ADD = _AR_MAX = None

MM_A, MM_B = randn(64, 32), randn(64, 48)
XB = randn(2, P, F)
XB4 = randn(4, P, F)  # spmd_dim(2, nc(2)): 4 programs
XM = randn(P, F)  # written by a mutable-parameter kernel
IDX_RMW = np.array([[1], [3], [1], [0]], np.int32)
VALS_RMW = randn(4, 8)
DATA_RMW = randn(6, 8)
GF_IDX = randint(0, F, P, 16, dtype=np.uint32)
W_ROW = randn(1, F)
SEQ = SEG
OLD_OUT = np.zeros((P, F), np.float32)  # written by the kernel (an output parameter)


MASKED_CASES = [
    B1("nisa.nc_transpose", _masked(lambda t, m: nisa.nc_transpose(t, mask=m), (F, P), 20, 8), (X,),
       _keep(lambda x: x.T, 20, 8), id="mask"),
    B1("nisa.affine_select", _masked(lambda t, m: nisa.affine_select(
        nl.mgrid[0:P, 0:F][0] >= nl.mgrid[0:P, 0:F][1], t, -1e4, mask=m), (P, F), 16, 40), (X,),
       _keep(lambda x: np.where(np.arange(P)[:, None] >= np.arange(F)[None, :], x, -1e4), 16, 40), id="mask"),
    B1("nisa.activation", _masked(lambda t, m: nisa.activation(op=nl.exp, data=t, mask=m), (P, F), 16, 33), (X,),
       _keep(np.exp, 16, 33), rtol=1e-6, id="mask"),
    B1("nisa.tensor_scalar", _masked(lambda t, m: nisa.tensor_scalar(t, np.add, 1.0, mask=m), (P, F)), (X,),
       _keep(lambda x: x + 1), id="mask"),
    B1("nisa.bn_stats", _in_mask(lambda t, m: nisa.bn_aggr(nisa.bn_stats(t, mask=m), mask=m)), (X,),
       _rows_of(lambda x: np.stack([x.mean(1), x.var(1)], 1)), rtol=1e-4, atol=1e-5, id="mask"),
    B1("nisa.max8", _in_mask(lambda t, m: nisa.max8(src=t, mask=m), cols=20), (X,),
       _rows_of(lambda x: -np.sort(-x[:, :20], 1)[:, :8]), id="mask"),
    B1("nisa.tensor_partition_reduce", _in_mask(lambda t, m: nisa.tensor_partition_reduce(np.add, t, mask=m),
                                                cols=F), (X,),
       lambda x: x[:16].sum(0, keepdims=True), rtol=1e-5, atol=1e-5, id="mask"),
    B1("nl.rms_norm", _masked(lambda t, m, w: nl.rms_norm(t, w, axis=1, n=F, mask=m), (P, F)), (X, W_ROW),
       _keep(lambda x, w: x / np.sqrt((x * x).mean(1, keepdims=True) + 1e-6) * w), rtol=1e-4, atol=1e-5, id="mask"),
    B1("nl.exp", _masked(lambda t, m: nl.exp(t, mask=m), (P, F), 16, 10, base=-1.0), (X,),
       _keep(np.exp, 16, 10, base=-1.0), rtol=1e-6, id="mask"),
    B1("nl.add", _masked(lambda t, m: nl.add(t, 2.0, mask=m), (P, F), 7), (X,), _keep(lambda x: x + 2, 7),
       id="mask"),
    B1("nl.copy", _masked(lambda t, m: nl.copy(t, mask=m), (P, F), 9, 9), (X,), _keep(lambda x: x, 9, 9), id="mask"),
]

CASES = [
    *_elementwise_cases(),
    *MASKED_CASES,
    # creation / movement / indexing
    B1("nl.load", k_masked_load_store, (X,), lambda x: x[:20], id="mask"),
    B1("nl.store", k_masked_load_store, (X,), lambda x: x[:20], id="mask"),
    B1("nl.arange", k_masked_load_store, (X,), lambda x: x[:20]),
    B1("nl.zeros", k_creation, (X,), lambda x: np.stack([0 * x, 0 * x + 1, 0 * x + 2.5, x])),
    B1("nl.ones", k_creation, (X,), lambda x: np.stack([0 * x, 0 * x + 1, 0 * x + 2.5, x])),
    B1("nl.full", k_creation, (X,), lambda x: np.stack([0 * x, 0 * x + 1, 0 * x + 2.5, x])),
    B1("nl.zeros_like", k_creation, (X,), lambda x: np.stack([0 * x, 0 * x + 1, 0 * x + 2.5, x])),
    B1("nl.empty_like", k_creation, (X,), lambda x: np.stack([0 * x, 0 * x + 1, 0 * x + 2.5, x])),
    B1("nl.ndarray", k_ndarray_blocks, (X,), lambda x: np.stack([x, 2 * x, 3 * x])),
    B1("nl.par_dim", k_ndarray_blocks, (X,), lambda x: np.stack([x, 2 * x, 3 * x])),
    B1("nl.affine_range", k_ndarray_blocks, (X,), lambda x: np.stack([x, 2 * x, 3 * x])),
    B1("nl.copy", k_copy_static_cast, (X,), lambda x: x.astype(ml_dtypes.bfloat16)),
    B1("nl.static_cast", k_copy_static_cast, (X,), lambda x: x.astype(ml_dtypes.bfloat16)),
    B1("nl.ds", k_ds, (X,), lambda x: x[:, 8:24]),
    B1("nl.load_transpose2d", k_load_transpose2d, (randn(16, 24),), lambda x: x.T),
    B1("nl.atomic_rmw", k_atomic_rmw, (DATA_RMW, IDX_RMW, VALS_RMW), _atomic_ref, rtol=1e-6),
    B1("nl.shared_constant", k_shared_constant, (X,), lambda x: x + 3),
    B1("nl.shared_identity_matrix", k_identity, (X,), lambda x: np.eye(P)),
    B1("nl.is_sbuf", k_buffer_queries, (X,), lambda x: np.array([[1, 1, 1]])),
    B1("nl.is_psum", k_buffer_queries, (X,), lambda x: np.array([[1, 1, 1]])),
    B1("nl.is_hbm", k_buffer_queries, (X,), lambda x: np.array([[1, 1, 1]])),
    B1("nl.tile_size", k_constants, (X,), _constants_ref),
    B1("nl.fp32", k_constants, (X,), _constants_ref),
    B1("nl.bfp16", k_constants, (X,), _constants_ref),
    B1("nl.finfo", k_constants, (X,), _constants_ref),
    B1("nl.gemm_grid", k_constants, (X,), _constants_ref),
    B1("nl.gemm_stationary_grid", k_constants, (X,), _constants_ref),
    B1("nl.sequential_range", k_loops, (X,), lambda x: 3 * x + 1, rtol=1e-6),
    B1("nl.static_range", k_loops, (X,), lambda x: 3 * x + 1, rtol=1e-6),
    # SPMD
    B1("nl.program_id", _GRID, (X,), _grid_ref),
    B1("nl.num_programs", _GRID, (X,), _grid_ref),
    B1("nl.program_ndim", _GRID, (X,), _grid_ref),
    B1("nl.nc", _SPMD_NC, (XB,), lambda x: 2 * x),
    B1("nl.spmd_dim", _SPMD_DIM, (XB4,), lambda x: 2 * x),
    B1("nl.all_reduce", _AR_ADD, (XG,), lambda x: np.broadcast_to(x.sum(1, keepdims=True), x.shape), rtol=1e-5,
       atol=1e-6),
    B1("nl.all_reduce", _AR_MAX, (XG,), lambda x: np.broadcast_to(x.max((0, 1), keepdims=True), x.shape),
       id="max-two-axes"),
    # compute
    B1("nl.matmul", k_matmul_accumulate, (MM_A, MM_B), lambda a, b: a.T @ b, rtol=1e-5, atol=1e-5, id="psum+="),
    B1("nl.matmul", k_matmul_plain, (randn(32, 64), MM_B[:, :48][:64]), lambda a, b: a @ b, rtol=1e-5, atol=1e-5),
    B1("nl.matmul", k_matmul_masked, (MM_A, MM_B), _masked_mm_ref, rtol=1e-5, atol=1e-5, id="mask"),
    B1("nl.transpose", k_transpose, (X,), lambda x: x.T),
    B1("nl.transpose", k_transpose_masked, (X,),
       lambda x: np.where(np.arange(F)[:, None] < 10, x.T, 0), id="mask"),
    B1("nl.where", k_where, (X, Y), lambda x, y: np.where(x > y, x, -1.0)),
    B1("nl.sum", _red("sum", 1), (X,), lambda x: x.sum(1, keepdims=True), rtol=1e-5, atol=1e-5),
    B1("nl.sum", _red("sum", 1, True), (X,), check=lambda o, x: np.testing.assert_allclose(
        o[:16], x[:16].sum(1, keepdims=True), rtol=1e-5, atol=1e-5), id="mask"),
    B1("nl.max", _red("max", 1), (X,), lambda x: x.max(1, keepdims=True)),
    B1("nl.min", _red("min", 1), (X,), lambda x: x.min(1, keepdims=True)),
    B1("nl.prod", _red("prod", 1), (POS[:, :8].copy(),), lambda x: x.prod(1, keepdims=True), rtol=1e-5),
    B1("nl.mean", _red("mean", 1), (X,), lambda x: x.mean(1, keepdims=True), rtol=1e-5, atol=1e-6),
    B1("nl.var", k_var, (X,), lambda x: x.var(1, keepdims=True), rtol=1e-4, atol=1e-5),
    B1("nl.all", k_all, (np.where(X > -2.5, 1.0, 0.0).astype(np.float32),),
       lambda x: np.all(x != 0, axis=1, keepdims=True).astype(np.float32)),
    B1("nl.softmax", k1(lambda t: nl.softmax(t, axis=1)), (X,), _softmax, rtol=1e-5, atol=1e-6),
    B1("nl.softmax", k_softmax_masked, (X,), _softmax_masked_ref, rtol=1e-5, atol=1e-6, id="mask"),
    B1("nl.rms_norm", k_rms_norm, (X, W_ROW),
       lambda x, w: x / np.sqrt((x * x).mean(1, keepdims=True) + 1e-6) * w, rtol=1e-4, atol=1e-5),
    B1("nl.broadcast_to", k_broadcast_to, (W_ROW,), lambda w: np.broadcast_to(w, (P, F))),
    B1("nl.expand_dims", k_expand_dims, (X,), lambda x: x[:, :, None]),
    B1("nl.gather_flattened", k_gather_flattened, (X, GF_IDX),
       lambda x, i: np.take_along_axis(x, i.astype(np.int64), 1)),
    B1("nl.device_print", k_device_print, (X,), lambda x: x),
    B1("nl.dropout", k_dropout, (POS,), check=_dropout_check),
    B1("nl.rand", k_rand_seed, (X,), check=_rand_check),
    B1("nl.random_seed", k_rand_seed, (X,), check=_rand_check),
    B1("nl.loop_reduce", k_loop_reduce_subscript, (XB,), lambda x: np.maximum(0, x.max(0))),
    B1("nl.loop_reduce", k_loop_reduce_masked, (XB,), _loop_reduce_masked_ref, rtol=1e-6, id="mask"),
    B1("nl.loop_reduce", k_loop_reduce_rebind, (XB,), lambda x: x.sum(0), rtol=1e-6, id="rebind"),
    # nisa
    B1("nisa.nc_matmul", k_nc_matmul_acc, (MM_A, MM_B), lambda a, b: a.T @ b, rtol=1e-5, atol=1e-5),
    B1("nisa.nc_matmul", k_nc_matmul_masked, (MM_A, MM_B), _masked_mm_ref, rtol=1e-5, atol=1e-5, id="mask"),
    B1("nisa.nc_transpose", k_nc_transpose, (X,), lambda x: x.T),
    B1("nisa.nc_transpose", k_nc_transpose_vector, (randn(32, 32),), lambda x: x.T, id="vector"),
    B1("nisa.activation", k1(lambda t: nisa.activation(op=nl.exp, data=t, scale=0.5, bias=None)), (X,),
       lambda x: np.exp(0.5 * x), rtol=1e-6),
    B1("nisa.activation_reduce", k_activation_reduce, (X,),
       lambda x: np.concatenate([np.exp(0.5 * x), np.exp(0.5 * x).sum(1, keepdims=True)], 1), rtol=1e-5),
    B1("nisa.affine_select", k_affine_select, (X,),
       lambda x: np.where(np.arange(P)[:, None] >= np.arange(F)[None, :], x, -1e4)),
    B1("nisa.bn_stats", k_bn, (X,), lambda x: np.stack([x.mean(1), x.var(1)], 1), rtol=1e-4, atol=1e-5),
    B1("nisa.bn_aggr", k_bn, (POS,), lambda x: np.stack([x.mean(1), x.var(1)], 1), rtol=1e-4, atol=1e-5),
    B1("nisa.dma_copy", k_dma_copy, (X,), lambda x: x),
    B1("nisa.dma_copy", k_dma_copy_rmw, (X, Y), lambda x, y: x + y, rtol=1e-6, id="dst_rmw_op"),
    B1("nisa.dma_transpose", k_dma_transpose, (randn(32, 16).astype(ml_dtypes.bfloat16),), lambda x: x.T),
    B1("nisa.dropout", k_dropout_isa, (POS,), check=_dropout_check),
    B1("nisa.get_nc_version", k_nc_version, (X,), lambda x: np.array([[3]])),
    B1("nisa.iota", k_iota, (X,), lambda x: 3 + 10 * np.arange(P)[:, None] + np.arange(F)[None, :]),
    B1("nisa.local_gather", k_local_gather, (LG_SRC, LG_IDX), lambda s, i: ref_local_gather(s, i, 2)),
    B1("nisa.max8", k_max8_find_match, (X,), _max8_ref),
    B1("nisa.nc_find_index8", k_max8_find_match, (X,), _max8_ref),
    B1("nisa.nc_match_replace8", k_max8_find_match, (X,), _max8_ref),
    B1("nisa.memset", k_memset, (X,), check=lambda o: np.testing.assert_array_equal(o[:16], 2.5), id="mask"),
    B1("nisa.nc_stream_shuffle", k_nc_stream_shuffle, (randn(64, 8),), ref_shuffle),
    B1("nisa.range_select", k_range_select, (X, BOUNDS), _range_ref),
    B1("nisa.reciprocal", k1(lambda t: nisa.reciprocal(t)), (POS,), lambda x: 1 / x, rtol=1e-6),
    B1("nisa.scalar_tensor_tensor", k2(lambda a, b: nisa.scalar_tensor_tensor(
        data=a, op0=np.multiply, operand0=2.0, op1=np.add, operand1=b)), (X, Y), lambda x, y: 2 * x + y),
    B1("nisa.select_reduce", k_select_reduce, (X, Y), _select_ref),
    B1("nisa.sequence_bounds", k_sequence_bounds, (SEQ,), lambda s: ref_seq_bounds(s[0])),
    B1("nisa.tensor_copy", k1(lambda t: nisa.tensor_copy(t, dtype=nl.bfloat16)), (X,),
       lambda x: x.astype(ml_dtypes.bfloat16)),
    B1("nisa.tensor_copy_dynamic_src", k_dyn_src, (DYN_SRC, DYN_OFFS), lambda s, o: s[:, o[0]]),
    B1("nisa.tensor_copy_dynamic_src", k_dyn_src_3d, (DYN_SRC3, DYN_OFFS3), lambda s, o: s[:, o[0], :],
       id="middle-axis"),
    B1("nisa.tensor_copy_dynamic_dst", k_dyn_dst, (DYN_SRC, DYN_OFFS), _dyn_dst_ref),
    B1("nisa.tensor_copy_predicated", k_copy_predicated, (X, Y), lambda x, y: np.where(x > y, x, y)),
    B1("nisa.tensor_partition_reduce", k1(lambda t: nisa.tensor_partition_reduce(np.add, t)), (X,),
       lambda x: x.sum(0, keepdims=True), rtol=1e-5, atol=1e-5),
    B1("nisa.tensor_reduce", k_tensor_reduce, (X,), lambda x: x.sum(1, keepdims=True), rtol=1e-5, atol=1e-5),
    B1("nisa.tensor_reduce", k_tensor_reduce_masked, (X,), lambda x: x[:, :10].max(1, keepdims=True), id="mask"),
    B1("nisa.tensor_scalar", k1(lambda t: nisa.tensor_scalar(t, np.multiply, 2.0, op1=np.add, operand1=1.0)), (X,),
       lambda x: 2 * x + 1),
    B1("nisa.tensor_scalar_reduce", k_tensor_scalar_reduce, (X,),
       lambda x: np.concatenate([2 * x, (2 * x).sum(1, keepdims=True)], 1), rtol=1e-5, atol=1e-5),
    B1("nisa.tensor_scalar_cumulative", k_tensor_scalar_cumulative, (X,), lambda x: np.cumsum(2 * x, axis=1),
       rtol=1e-5, atol=1e-4),
    B1("nisa.tensor_tensor", k2(lambda a, b: nisa.tensor_tensor(a, b, np.subtract)), (X, Y), lambda x, y: x - y),
    B1("nisa.tensor_tensor", k_tensor_tensor_masked, (X, Y), _tt_masked_ref, id="mask"),
    B1("nisa.tensor_tensor_scan", k2(lambda a, b: nisa.tensor_tensor_scan(a, b, 0.5, np.multiply, np.add)),
       (X * 0.5, Y), lambda x, y: ref_scan(x, y, 0.5), rtol=1e-5, atol=1e-5),
    # nki.compiler direct allocation
    B1("ncc.sbuf.mod_alloc", k_mod_alloc, (X,), lambda x: np.stack([x + 2, x + 3])),
    B1("ncc.sbuf.mod_alloc", k_mod_alloc_double_buffer, (XB4,), np.exp, rtol=1e-6, id="double-buffer"),
    B1("ncc.psum.mod_alloc", k_psum_mod_alloc, (MM_A, MM_B),
       lambda a, b: np.stack([3 * a.T @ b, 2 * a.T @ b, 3 * a.T @ b]), rtol=1e-5, atol=1e-5),
    B1("ncc.psum.alloc", k_psum_alloc, (MM_A, MM_B), lambda a, b: np.stack([a.T @ b, 2 * a.T @ b]), rtol=1e-5,
       atol=1e-5),
    B1("ncc.sbuf.alloc", k_alloc_same_address, (X,), lambda x: 3 * x),
    B1("ncc.sbuf.alloc", k_alloc_blocks, (X,), lambda x: np.stack([x, x, 3 * x, 3 * x]), id="blocks"),
    # kernel parameters
    B1("nt.mutable_tensor", k_mutable_param, (XM, Y), check=_mutable_check),
    B1("nt.mutable_tensor", k_old_style_output_param, (X, OLD_OUT),
       check=lambda o, a, out: np.testing.assert_allclose(out, a + 1, rtol=1e-6), id="output-parameter"),
]

ILLEGAL = [
    B1X("nl.zeros", x_partitions, (X,), "partition-limit"),
    B1X("nl.load", x_oob, (X,), "out-of-bounds"),
    B1X("nl.load", x_mixed_index, (X,), "indexing", id="mixed-indexing"),
    B1X("nl.arange", x_1d_arange, (X,), "indexing", id="1d-arange"),
    B1X("nl.arange", x_control_flow, (X,), "indexing", id="control-flow"),
    B1X("nl.affine_range", x_affine_dependency, (X,), "loop-dependency"),
    B1X("nl.load", x_load_from_sbuf, (X,), "buffer", id="sbuf-source"),
    B1X("nl.zeros", x_hbm_init, (X,), "argument", id="hbm-init"),
    B1X("nl.program_id", x_nested_grid, (X,), "kernel", id="nested-grid"),
    B1X("nl.matmul", x_matmul_partitions, (randn(32, 16), randn(16, 8)), "partition-mismatch"),
    B1X("nisa.tensor_tensor", x_tensor_tensor_partitions, (X, Y), "partition-mismatch"),
    B1X("nisa.tensor_copy_dynamic_src", x_dyn_offset_not_scalar, (DYN_SRC, DYN_OFFS), "indexing", id="offset-shape"),
    B1X("nisa.tensor_copy_dynamic_src", x_dyn_src_static, (DYN_SRC, DYN_OFFS), "indexing", id="static-src"),
    B1X("nl.all_reduce", x_all_reduce_axis, (XB,), "argument"),
    B1X("ncc.sbuf.mod_alloc", x_mod_alloc_partitions, (X,), "out-of-bounds"),
    B1X("ncc.sbuf.alloc", x_alloc_bad_return, (X,), "argument"),
    B1X("nt.mutable_tensor", k_immutable_write, (X,), "kernel", id="immutable"),
    B1X("nt.mutable_tensor", k_mutable_not_returned, (X,), "kernel", id="not-returned"),
]
