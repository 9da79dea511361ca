"""Conformance table for ``NkiTensor`` view methods with runtime indices (``vector_select``, dynamic
``select``, ``indirect``, ``is_indirect``, ``get_pattern``) and the ``nl.*`` calls added with them
(``load_transpose2d``, ``shared_constant``, ``rand``, ``random_seed``, ``dropout``, and the names the
simulator refuses). Expectations come from ``shared/research/nki-api.md`` §3.1–3.2, §6.1–6.2; where
nkieval had to choose a reading (tensor indirection's index layout), docs/simulator.md says which.

Rows for view methods use the api name ``tensor.<method>`` (see conf_coverage.py).
"""

from __future__ import annotations

from typing import Any

import nki.isa as nisa
import nki.language as nl
import numpy as np
from conf_kit import Case, Illegal, load, randn, ret, tile

P, F = 32, 10
X = randn(P, F)
ROWS = randn(12, 6)
OFFS = np.array([7, 2, 5, 9], np.uint16)  # tensor-indirection column offsets
IDX = np.tile(OFFS, (P, 1))  # every partition of every group uses the same offsets
VIDX = np.array([[5], [0], [3], [5]], np.int32)  # vector_select rows (of ROWS[2:8])
SEED = np.array([[1234]], np.int32)


# ---- vector_select (HBM dim 0, resolved by DMA) -----------------------------------------------------
def k_vector_select_gather(x, idx):
    ix = load(idx)
    v = x[2:8].vector_select(0, ix)
    t = tile(v.shape)
    nisa.dma_copy(dst=t, src=v)
    return ret(t)


def k_vector_select_scatter(x, idx):
    ix = load(idx)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=x)
    src = tile((idx.shape[0], x.shape[1]))
    nisa.memset(dst=src, value=-1.0)
    nisa.dma_copy(dst=out[2:8].vector_select(0, ix), src=src)
    return out


def _scatter_ref(x, idx):
    o = x.copy()
    o[2 + idx[:, 0]] = -1.0
    return o


def k_vector_select_skip(x, idx):
    ix = load(idx)
    t = tile((idx.shape[0], x.shape[1]))
    nisa.memset(dst=t, value=0.0)
    nisa.dma_copy(dst=t, src=x[2:8].vector_select(0, ix), oob_mode=nisa.oob_mode.skip)
    return ret(t)


def _skip_ref(x, idx):
    v = x[2:8]
    return np.stack([v[i] if 0 <= i < 6 else np.zeros(x.shape[1], np.float32) for i in idx[:, 0]])


# ---- dynamic select ----------------------------------------------------------------------------------
def k_select_tensor(x, i):
    ii = load(i)
    xs = load(x)
    v = xs.select(1, ii)  # [P, A, B] -> [P, B] at A = i
    t = tile(v.shape)
    nisa.tensor_copy(dst=t, src=v)
    return ret(t)


def k_select_register(x, i):
    ii = load(i)
    r = nisa.register_alloc()
    nisa.register_load(r, ii)
    t = tile((1, x.shape[1]))
    nisa.dma_copy(dst=t, src=x.select(0, r))  # HBM: dim 0 is fine
    return ret(t)


def k_select_int_on_chip(x):
    xs = load(x)
    v = xs.select(1, 3)  # on chip a [P, F] tensor stays 2-D: [P, 1]
    t = tile(v.shape)
    nisa.tensor_copy(dst=t, src=v)
    return ret(t)


# ---- queries ------------------------------------------------------------------------------------------
def k_queries(x, idx, y):
    ix = load(idx)
    xs = load(y)
    v = x[2:8].vector_select(0, ix)
    flags = (x.is_indirect(), v.is_indirect(), xs.is_indirect(), xs[:, 2:6].is_indirect())
    return flags, xs[:, 1:9:2].get_pattern(), x[2:8].get_pattern()


# ---- tensor indirection (trn3 compute instructions) ------------------------------------------------
def k_ti_gather(x, idx):
    xs = load(x)
    ix = load(idx)
    out = tile((x.shape[0], idx.shape[1]))
    nisa.tensor_copy(dst=out, src=xs.indirect(ix))
    return ret(out)


def k_ti_scatter(x, idx):
    xs = load(x)
    ix = load(idx)
    dense = tile((x.shape[0], idx.shape[1]))
    nisa.memset(dst=dense, value=1.0)
    nisa.tensor_scalar(dst=xs.indirect(ix), data=dense, op0=nl.multiply, operand0=-3.0)
    return ret(xs)


def _ti_scatter_ref(x, idx):
    o = x.copy()
    o[:, idx[0]] = -3.0
    return o


def k_ti_num_elem(x, idx):
    xs = load(x)
    ix = load(idx)
    out = tile((x.shape[0], 2))
    nisa.activation(dst=out, op=nl.exp, data=xs.indirect(ix, num_elem=2))
    return ret(out)


def k_ti_per_group(x, idx):  # groups of 16 partitions may use different offsets (Vector engine)
    return k_ti_gather(x, idx)


IDX_GROUPS = np.concatenate([np.tile(OFFS, (16, 1)), np.tile(OFFS[::-1], (16, 1))]).astype(np.uint16)


def _per_group_ref(x, idx):
    return np.stack([x[p, idx[p]] for p in range(x.shape[0])])


def k_ti_matmul(a, b, idx):
    """moving = columns of b chosen at run time (Tensor engine: one offset list per 32 partitions)."""
    sa, sb, ix = load(a), load(b), load(idx)
    acc = nl.ndarray((a.shape[1], idx.shape[1]), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=sa, moving=sb.indirect(ix))
    return ret(acc)


A_MM, B_MM = randn(32, 16), randn(32, 12)


# ---- nl.* -----------------------------------------------------------------------------------------
def k_load_transpose2d(x):
    return ret(nl.load_transpose2d(x))


CONST = np.arange(24, dtype=np.float64).reshape(4, 6) / 4


def k_shared_constant(x):
    c = nl.shared_constant(CONST)
    t = tile(c.shape, c.dtype)
    nisa.dma_copy(dst=t, src=c)
    return ret(t), c.dtype == nl.float32


def k_rand(seed):
    s = load(seed)
    nl.random_seed(s)
    a = nl.rand((32, 256), nl.float32)
    b = nl.rand((32, 256), nl.float32)
    nl.random_seed(s)
    c = nl.rand((32, 256), nl.float32)
    return ret(a), ret(b), ret(c)


def _check_rand(out: Any) -> None:
    a, b, c = (np.asarray(o) for o in out)
    assert a.shape == (32, 256) and a.dtype == np.float32
    assert a.min() >= 0.0 and a.max() < 1.0
    assert abs(float(a.mean()) - 0.5) < 0.02 and abs(float(a.var()) - 1 / 12) < 0.01
    assert not np.array_equal(a, b), "the stream must advance"
    assert np.array_equal(a, c), "the same seed must give the same stream"


def k_dropout(x):
    t = load(x)
    return ret(nl.dropout(t, 0.0)), ret(nl.dropout(t, 1.0)), ret(nl.dropout(t, 0.5))


XD = (np.abs(randn(32, 256)) + 1.0).astype(np.float32)


def _check_dropout(out: Any, x: np.ndarray) -> None:
    keep, none, half = (np.asarray(o) for o in out)
    assert np.array_equal(keep, x) and not none.any()
    dropped = half == 0
    assert 0.45 < dropped.mean() < 0.55
    assert np.array_equal(half[~dropped], x[~dropped]), "survivors are not rescaled"


CASES: list[Case] = [
    Case("tensor.vector_select", k_vector_select_gather, (ROWS, VIDX), lambda x, i: x[2:8][i[:, 0]]),
    Case("tensor.vector_select", k_vector_select_scatter, (ROWS, VIDX[:3]), _scatter_ref, id="scatter"),
    Case("tensor.vector_select", k_vector_select_skip, (ROWS, np.array([[1], [6], [-1], [4]], np.int32)), _skip_ref,
         id="oob-skip"),
    Case("tensor.select", k_select_tensor, (randn(P, 4, 5), np.array([[2]], np.int32)), lambda x, i: x[:, 2]),
    Case("tensor.select", k_select_register, (ROWS, np.array([[9]], np.int32)), lambda x, i: x[9:10], id="register"),
    Case("tensor.select", k_select_int_on_chip, (X,), lambda x: x[:, 3:4], id="int-on-chip"),
    Case("tensor.is_indirect", k_queries, (ROWS, VIDX, X),
         lambda x, i, y: ((False, True, False, False), [[F, P], [2, 4]], [[6, 6], [1, 6]])),
    Case("tensor.get_pattern", k_queries, (ROWS, VIDX, X),
         lambda x, i, y: ((False, True, False, False), [[F, P], [2, 4]], [[6, 6], [1, 6]])),
    Case("tensor.indirect", k_ti_gather, (X, IDX), lambda x, i: x[:, OFFS], target="trn3"),
    Case("tensor.indirect", k_ti_scatter, (X, IDX), _ti_scatter_ref, target="trn3", id="scatter"),
    Case("tensor.indirect", k_ti_num_elem, (X, IDX), lambda x, i: np.exp(x[:, OFFS[:2]]), target="trn3",
         rtol=1e-5, id="num_elem"),
    Case("tensor.indirect", k_ti_per_group, (X, IDX_GROUPS), _per_group_ref, target="trn3", id="per-group"),
    Case("tensor.indirect", k_ti_matmul, (A_MM, B_MM, np.tile(np.array([3, 0, 11], np.uint16), (32, 1))),
         lambda a, b, i: a.T @ b[:, [3, 0, 11]], target="trn3", rtol=1e-5, atol=1e-5, id="nc_matmul"),
    Case("nl.load_transpose2d", k_load_transpose2d, (randn(48, 20),), lambda x: x.T),
    Case("nl.shared_constant", k_shared_constant, (X,), lambda x: (CONST.astype(np.float32), True)),
    Case("nl.rand", k_rand, (SEED,), check=_check_rand),
    Case("nl.rand", k_rand, (SEED,), check=_check_rand, target="trn3", id="trn3-rand2"),
    Case("nl.random_seed", k_rand, (SEED,), check=_check_rand, target="trn1"),
    Case("nl.dropout", k_dropout, (XD,), check=_check_dropout),
]


# ---- NkiScalar (nisa.scalar_load / scalar_store, NKI 0.7+): dynamic offsets and loop bounds ----------
# int32 rows here; nl.int64 tensors and int64 scalars have their own section below.
I32 = np.array([[3]], np.int32)


def _scalar(i, dtype=None):
    t = tile((1, 1), dtype or i.dtype)
    nisa.dma_copy(dst=t, src=i)
    return nisa.scalar_load(t)


def k_scalar_arith(i):
    s = _scalar(i)
    r = tile((1, 1), nl.int32)
    nisa.scalar_store(r, -(s * 4 + 1) + 2 * s - (10 - s))
    return ret(r)


def k_scalar_wrap(i):  # int32 never widens: 100000 * 100000 wraps
    s = _scalar(i)
    r = tile((1, 1), nl.int32)
    nisa.scalar_store(r, s * s)
    return ret(r)


def k_scalar_offset_hbm(x, i):  # row 2*i+1 of x via .ap(scalar_offset=, indirect_dim=0)
    s = _scalar(i)
    t = tile((1, x.shape[1]))
    nisa.dma_copy(dst=t, src=x.ap([[x.shape[1], 1], [1, x.shape[1]]], offset=0, scalar_offset=s * 2 + 1,
                                  indirect_dim=0))
    return ret(t)


def k_scalar_offset_dim1(x, i):  # scalar_offset on indirect_dim=1 of a 3-D tensor scales by the last dim
    s = _scalar(i)
    t = tile((x.shape[0], x.shape[2]))
    nisa.dma_copy(dst=t, src=x.ap([[x.shape[1] * x.shape[2], x.shape[0]], [1, x.shape[2]]], offset=0,
                                  scalar_offset=s, indirect_dim=1))
    return ret(t)


def k_scalar_offset_sbuf(x, i):  # free-dim offset into an SBUF tile (int32 scalar)
    s = _scalar(i)
    src = load(x)
    t = tile((x.shape[0], 2))
    nisa.tensor_copy(dst=t, src=src.ap([[x.shape[1], x.shape[0]], [1, 2]], offset=0, scalar_offset=s,
                                       indirect_dim=1))
    return ret(t)


def k_scalar_select(x, i):
    return ret(_copy_row(load(x).select(1, _scalar(i))))


def _copy_row(v):
    t = tile(v.shape)
    nisa.tensor_copy(dst=t, src=v)
    return t


def k_scalar_fori(x, n):  # out[r] = x[r] for r < n (runtime trip count), else 0
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    z = tile((1, x.shape[1]))
    nisa.memset(dst=z, value=0.0)
    for r in range(x.shape[0]):
        nisa.dma_copy(dst=out[r:r + 1], src=z)
    hi = _scalar(n)

    def body(r):
        row = tile((1, x.shape[1]))
        nisa.dma_copy(dst=row, src=x.ap([[x.shape[1], 1], [1, x.shape[1]]], offset=0, scalar_offset=r,
                                        indirect_dim=0))
        nisa.dma_copy(dst=out.ap([[x.shape[1], 1], [1, x.shape[1]]], offset=0, scalar_offset=r, indirect_dim=0),
                      src=row)

    nl.fori_loop(0, hi - 1, body)
    return out


def _fori_ref(x, n):
    o = np.zeros_like(x)
    o[:int(n[0, 0]) - 1] = x[:int(n[0, 0]) - 1]
    return o


def k_ds_runtime(x, i):  # nl.ds with a runtime start ([1, 1] uint32 SBUF tensor): a sliding window
    t = load(x)
    v = t[:, nl.ds(load(i), 3)]
    return v.is_indirect(), ret(_copy_row(v))


def k_ds_runtime_hbm(x, i):  # on HBM dim 0 with an NkiScalar start
    v = x[nl.ds(_scalar(i) + 1, 2), :]
    t = tile(v.shape)
    nisa.dma_copy(dst=t, src=v)
    return ret(t)


def k_ds_runtime_register(x, i):
    r = nisa.register_alloc()
    nisa.register_load(r, load(i))
    v = load(x)[:, nl.ds(r, 2)]
    return ret(_copy_row(v))


X4 = randn(3, 4, 5)
CASES += [
    Case("nl.ds", k_ds_runtime, (X, np.array([[6]], np.uint32)), lambda x, i: (True, x[:, 6:9]), id="runtime-start"),
    Case("nl.ds", k_ds_runtime_hbm, (ROWS, I32), lambda x, i: x[4:6], id="runtime-nkiscalar"),
    Case("nl.ds", k_ds_runtime_register, (X, I32), lambda x, i: x[:, 3:5], id="runtime-register"),
    Case("nisa.scalar_load", k_scalar_arith, (I32,), lambda i: np.array([[-(3 * 4 + 1) + 6 - 7]], np.int32)),
    Case("nisa.scalar_store", k_scalar_wrap, (np.array([[100000]], np.int32),),
         lambda i: np.array([[1410065408]], np.int32), id="int32-wraps"),
    Case("tensor.ap", k_scalar_offset_hbm, (ROWS, I32), lambda x, i: x[7:8], id="nkiscalar-offset"),
    Case("tensor.ap", k_scalar_offset_dim1, (X4, np.array([[2]], np.int32)), lambda x, i: x[:, 2, :],
         id="nkiscalar-indirect-dim1"),
    Case("tensor.ap", k_scalar_offset_sbuf, (X, I32), lambda x, i: x[:, 3:5], id="nkiscalar-sbuf"),
    Case("tensor.select", k_scalar_select, (X, I32), lambda x, i: x[:, 3:4], id="nkiscalar"),
    Case("nl.fori_loop", k_scalar_fori, (ROWS, np.array([[6]], np.int32)), _fori_ref, id="nkiscalar-bound"),
]


def _sl_unsigned(i):
    _scalar(i, nl.uint32)


def _sl_float(i):
    _scalar(i, nl.float32)


def _sl_shape(x):
    nisa.scalar_load(load(x))


def _ss_int(i):
    nisa.scalar_store(tile((1, 1), nl.int32), 3)


def _sc_python_int(i):
    range(_scalar(i))


def _sc_if(i):
    if _scalar(i):
        pass


def _sc_compare_used(i):
    s = _scalar(i)
    nisa.scalar_store(tile((1, 1), nl.int32), s < 4)


def _sc_div(i):
    _ = _scalar(i) // 2


def _sc_offset_oob(x, i):
    s = _scalar(i)
    nisa.dma_copy(dst=tile((1, x.shape[1])), src=x.ap([[x.shape[1], 1], [1, x.shape[1]]], offset=0,
                                                       scalar_offset=s, indirect_dim=0))


def _sc_bad_indirect_dim(x, i):
    x.ap([[x.shape[1], 1], [1, x.shape[1]]], offset=0, scalar_offset=_scalar(i), indirect_dim=2)


def _ds_partition(x, i):
    load(x)[nl.ds(load(i), 2), :]


def _ds_oob(x, i):
    load(x)[:, nl.ds(load(i), 3)]


def _ds_runtime_size(x, i):
    nl.ds(0, load(i))


def _ds_twice(x, i):
    ix = load(i)
    load(x)[:, nl.ds(ix, 4)][:, nl.ds(ix, 1)]


ILLEGAL_SCALAR: list[Illegal] = [
    Illegal("nl.ds", _ds_partition, (X, I32), "indexing", id="runtime-partition"),
    Illegal("nl.ds", _ds_oob, (X, np.array([[8]], np.int32)), "out-of-bounds", id="runtime-window"),
    Illegal("nl.ds", _ds_runtime_size, (X, I32), "argument", id="runtime-size"),
    Illegal("nl.ds", _ds_twice, (X, np.array([[0]], np.int32)), "indexing", id="runtime-twice"),
    Illegal("nisa.scalar_load", _sl_unsigned, (np.array([[1]], np.uint32),), "dtype", id="unsigned"),
    Illegal("nisa.scalar_load", _sl_float, (np.array([[1]], np.float32),), "dtype", id="float"),
    Illegal("nisa.scalar_load", _sl_shape, (ROWS,), "shape-mismatch", id="not-1x1"),
    Illegal("nisa.scalar_store", _ss_int, (I32,), "argument", id="python-int"),
    Illegal("nisa.scalar_load", _sc_python_int, (I32,), "argument", id="as-python-int"),
    Illegal("nisa.scalar_load", _sc_if, (I32,), "argument", id="as-condition"),
    Illegal("nisa.scalar_load", _sc_compare_used, (I32,), "argument", id="comparison-used"),
    Illegal("nisa.scalar_load", _sc_div, (I32,), "argument", id="floordiv"),
    Illegal("tensor.ap", _sc_offset_oob, (ROWS, np.array([[12]], np.int32)), "out-of-bounds", id="nkiscalar-oob"),
    Illegal("tensor.ap", _sc_bad_indirect_dim, (ROWS, I32), "argument", id="indirect-dim"),
]

# ---- nl.int64 (current API): DMA moves it, scalar_load / scalar_store read and write it, nothing computes on it
# Documented: scalar_load "accepts nl.int64, and the value is not truncated"; an int64 scalar "can be written back
# with nki.isa.scalar_store(), and can be passed as scalar_offset to address an HBM tensor"; at 64 bits "only
# addition, subtraction and multiplication are available"; comparisons are "Rejected at compile time"; it "cannot
# bound an nki.language.fori_loop()"; "on an SBUF or PSUM operand the offset must be nl.int32"; a 32-bit scalar
# "cannot be stored into an nl.int64 tile, nor a 64-bit scalar into an nl.int32 one".
BIG = np.array([[(1 << 40) + 7]], np.int64)  # needs more than 32 bits
I64 = np.array([[3]], np.int64)
WIDE = np.array([[(1 << 62) - 1, -(1 << 62), 1 << 33], [-1, 0, 5 - (1 << 40)]], np.int64)


def k_int64_dma(x):  # HBM -> SBUF -> HBM, bit-exact
    return ret(load(x))


def k_int64_scalar_arith(i):  # only + - * (binary and unary minus) at 64 bits; never truncated
    s = _scalar(i)
    r = tile((1, 1), nl.int64)
    nisa.scalar_store(r, -(s * 3) + s - 2 * (s - 5))
    return ret(r)


def k_int64_scalar_hbm(i):  # scalar_load / scalar_store straight from and to an HBM tensor
    s = nisa.scalar_load(i)
    o = nl.ndarray((1, 1), dtype=nl.int64, buffer=nl.shared_hbm)
    nisa.scalar_store(o, s * s)
    return o


def k_int64_offset_hbm(x, i):  # an int64 scalar (holding 2**40 + 7) addresses an HBM row after int64 arithmetic
    s = _scalar(i) - (1 << 40)
    t = tile((1, x.shape[1]))
    nisa.dma_copy(dst=t, src=x.ap([[x.shape[1], 1], [1, x.shape[1]]], offset=0, scalar_offset=s - 3,
                                  indirect_dim=0))
    return ret(t)


def k_int64_ds_hbm(x, i):  # an int64 scalar as the runtime start of an HBM window
    v = x[nl.ds(_scalar(i) - (1 << 40), 2), :]
    t = tile(v.shape)
    nisa.dma_copy(dst=t, src=v)
    return ret(t)


CASES += [
    Case("nisa.dma_copy", k_int64_dma, (WIDE,), lambda x: x, id="int64"),
    Case("nl.ds", k_int64_ds_hbm, (ROWS, BIG), lambda x, i: x[7:9], id="int64-runtime-hbm"),
    Case("nisa.scalar_load", k_int64_scalar_arith, (BIG,),
         lambda i: -(i * 3) + i - 2 * (i - 5), id="int64-arith"),
    Case("nisa.scalar_store", k_int64_scalar_hbm, (BIG,), lambda i: i * i, id="int64-hbm"),
    Case("tensor.ap", k_int64_offset_hbm, (ROWS, BIG), lambda x, i: x[4:5], id="int64-offset-hbm"),
]


def _i64_compare(i):
    _ = _scalar(i) < 4


def _i64_equal(i):
    _ = _scalar(i) == 3


def _i64_fori(i):
    nl.fori_loop(0, _scalar(i), lambda r: None)


def _i64_offset_sbuf(x, i):
    src = load(x)
    nisa.tensor_copy(dst=tile((x.shape[0], 2)), src=src.ap([[x.shape[1], x.shape[0]], [1, 2]], offset=0,
                                                           scalar_offset=_scalar(i), indirect_dim=1))


def _i64_store_into_int32(i):
    nisa.scalar_store(tile((1, 1), nl.int32), _scalar(i))


def _i32_store_into_int64(i):
    nisa.scalar_store(tile((1, 1), nl.int64), _scalar(i))


def _i64_mixed(i, j):
    _ = _scalar(i) + _scalar(j)


def _i64_div(i):
    _ = _scalar(i) // 2


def _i64_tensor_copy(x):
    nisa.tensor_copy(dst=tile(x.shape, nl.int64), src=load(x))


def _i64_memset(x):
    nisa.memset(dst=tile((1, 1), nl.int64), value=0)


def _i64_tensor_scalar(x):
    t = load(x)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1)


def _i64_dma_cast(x):
    nisa.dma_copy(dst=tile(x.shape, nl.int32), src=x)


def _i64_numpy_dtype(x):
    nl.ndarray((1, 1), dtype=np.int64, buffer=nl.sbuf)


def _i64_runtime_index(x, i):
    load(x)[:, nl.ds(load(i), 2)]


def _i64_tensor_offset(x, i):
    x.ap([[x.shape[1], 1], [1, x.shape[1]]], offset=0, scalar_offset=load(i), indirect_dim=0)


def _i64_select_sbuf(x, i):
    load(x).select(1, _scalar(i))


def _i64_ds_sbuf(x, i):
    load(x)[:, nl.ds(_scalar(i), 2)]


def _i64_register(i):
    nisa.register_load(nisa.register_alloc(0), load(i))


ILLEGAL_INT64: list[Illegal] = [
    Illegal("nisa.scalar_load", _i64_compare, (I64,), "dtype", id="int64-compare"),
    Illegal("nisa.scalar_load", _i64_equal, (I64,), "dtype", id="int64-equal"),
    Illegal("nisa.scalar_load", _i64_div, (I64,), "argument", id="int64-floordiv"),
    Illegal("nisa.scalar_load", _i64_mixed, (I64, I32), "dtype", id="int64-plus-int32"),
    Illegal("nl.fori_loop", _i64_fori, (I64,), "dtype", id="int64-bound"),
    Illegal("tensor.ap", _i64_offset_sbuf, (X, I64), "dtype", id="int64-offset-sbuf"),
    Illegal("tensor.ap", _i64_tensor_offset, (ROWS, I64), "dtype", id="int64-tensor-offset"),
    Illegal("nl.ds", _i64_runtime_index, (X, I64), "dtype", id="int64-runtime-start"),
    Illegal("nl.ds", _i64_ds_sbuf, (X, I64), "dtype", id="int64-scalar-sbuf"),
    Illegal("tensor.select", _i64_select_sbuf, (X, I64), "dtype", id="int64-scalar-sbuf"),
    Illegal("nisa.scalar_store", _i64_store_into_int32, (I64,), "dtype", id="int64-into-int32"),
    Illegal("nisa.scalar_store", _i32_store_into_int64, (I32,), "dtype", id="int32-into-int64"),
    Illegal("nisa.tensor_copy", _i64_tensor_copy, (WIDE,), "dtype", id="int64"),
    Illegal("nisa.memset", _i64_memset, (WIDE,), "dtype", id="int64"),
    Illegal("nisa.tensor_scalar", _i64_tensor_scalar, (WIDE,), "dtype", id="int64"),
    Illegal("nisa.register_load", _i64_register, (I64,), "dtype", id="int64"),
    Illegal("nisa.dma_copy", _i64_dma_cast, (WIDE,), "dtype", id="int64-cast"),
    Illegal("nl.ndarray", _i64_numpy_dtype, (WIDE,), "dtype", id="numpy-int64"),
]

# ---- tile / block grids (NKI 0.7+: nl.tiles, nl.blocks, nl.alloc_tiles, nl.alloc_blocks) ---------------
G = randn(70, 90)  # a 3 x 4 grid of (32, 24) tiles; the last row and column are clamped remainders


def k_tiles_copy(x):  # every tile through SBUF, in tile coordinates
    src = nl.tiles(x, tile_shape=(32, 24))
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    dst = nl.tiles(out, tile_shape=(32, 24))
    for i in range(src.shape[0]):
        for j in range(src.shape[1]):
            t = tile(src[i, j].element_shape)
            nisa.dma_copy(dst=t, src=src[i, j].data)
            nisa.dma_copy(dst=dst[i, j].data, src=t)
    return out


def k_tiles_queries(x):
    g = nl.tiles(x, tile_shape=(32, 24))
    row = g[1, :]
    last = g[-1, -1]
    return (g.shape, g[1, 2].element_shape, row.shape, row.element_shape, last.element_shape, last.is_remainder,
            g[0, 0].is_remainder, g.index_step_elements, g[0, 1:3].data.shape)


def k_tiles_3d(x):  # a leading untiled dim is indexed one slab at a time
    g = nl.tiles(x, tile_shape=(4, 5))
    t = tile(g[1, 0, 1].element_shape)
    nisa.dma_copy(dst=t, src=g[1, 0, 1].data)
    return g.shape, ret(t)


def k_blocks_copy(x):  # blocks of 2 x 2 tiles, then the tiles inside each block
    src = nl.blocks(x, tile_shape=(32, 24), block_shape=(2, 2))
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    dst = nl.blocks(out, tile_shape=(32, 24), block_shape=(2, 2))
    for i in range(src.shape[0]):
        for j in range(src.shape[1]):
            st, dt_ = nl.tiles(src[i, j]), nl.tiles(dst[i, j])
            for a in range(st.shape[0]):
                for b in range(st.shape[1]):
                    t = tile(st[a, b].element_shape)
                    nisa.dma_copy(dst=t, src=st[a, b].data)
                    nisa.dma_copy(dst=dt_[a, b].data, src=t)
    return out


def k_blocks_queries(x):
    g = nl.blocks(x, tile_shape=(32, 24), block_shape=(2, 2))
    return g.shape, g.block_shape, g.index_step_elements, g[1, 1].element_shape, g[1, 1].is_remainder


def k_alloc_tiles(x):  # HBM: compact logical extent; SBUF: one row of tiles along the partitions
    sb = nl.alloc_tiles(tile_shape=(32, 24), element_shape=(32, 90), buffer=nl.sbuf, dtype=nl.float32)
    nisa.dma_copy(dst=sb.data, src=x[0:32, :])
    out = nl.alloc_tiles(tile_shape=(32, 24), element_shape=(32, 90), buffer=nl.shared_hbm, dtype=nl.float32)
    for j in range(sb.shape[1]):
        nisa.dma_copy(dst=out[0, j].data, src=sb[0, j].data)
    return out.data


def k_alloc_blocks(x):
    sb = nl.alloc_blocks(tile_shape=(32, 24), block_shape=(1, 2), element_shape=(32, 90), buffer=nl.sbuf,
                         dtype=nl.float32)
    for j in range(sb.shape[1]):
        nisa.dma_copy(dst=sb[0, j].data, src=nl.blocks(x[0:32, :], tile_shape=(32, 24), block_shape=(1, 2))[0, j].data)
    return ret(sb.data), sb.shape


CASES += [
    Case("nl.tiles", k_tiles_copy, (G,), lambda x: x),
    Case("nl.tiles", k_tiles_queries, (G,), lambda x: ((3, 4), (32, 24), (4,), (32, 90), (6, 18), True, False,
                                                        (32, 24), (32, 48)), id="queries"),
    Case("nl.tiles", k_tiles_3d, (randn(3, 8, 10),), lambda x: ((3, 2, 2), x[1, 0:4, 5:10]), id="slab"),
    Case("nl.blocks", k_blocks_copy, (G,), lambda x: x),
    Case("nl.blocks", k_blocks_queries, (G,), lambda x: ((2, 2), (2, 2), (64, 48), (6, 42), True), id="queries"),
    Case("nl.alloc_tiles", k_alloc_tiles, (G,), lambda x: x[0:32]),
    Case("nl.alloc_blocks", k_alloc_blocks, (G,), lambda x: (x[0:32], (1, 2))),
]


def _grid(make: Any) -> Any:
    def kernel(x):
        make(x)

    return kernel


ILLEGAL_GRID: list[Illegal] = [
    Illegal("nl.tiles", _grid(lambda x: nl.tiles(x, tile_shape=(32,))), (G,), "argument", id="rank-1-tile"),
    Illegal("nl.tiles", _grid(lambda x: nl.tiles(x, tile_shape=[32, 24])), (G,), "argument", id="list-shape"),
    Illegal("nl.tiles", _grid(lambda x: nl.tiles(x, tile_shape=(2, 32, 24))), (G,), "argument", id="rank"),
    Illegal("nl.tiles", _grid(lambda x: nl.tiles(x, tile_shape=(0, 24))), (G,), "argument", id="zero"),
    Illegal("nl.tiles", _grid(lambda x: nl.tiles(x, tile_shape=(32, 24))[3, 0]), (G,), "out-of-bounds"),
    Illegal("nl.tiles", _grid(lambda x: nl.tiles(x, tile_shape=(32, 24))[0, 0, 0]), (G,), "indexing",
            id="too-many-indices"),
    Illegal("nl.tiles", _grid(lambda x: nl.tiles(x)), (G,), "argument", id="no-tile-shape"),
    Illegal("nl.blocks", _grid(lambda x: nl.blocks(x, tile_shape=(32, 24), block_shape=(2,))), (G,), "argument",
            id="block-rank"),
    Illegal("nl.alloc_tiles", _grid(lambda x: nl.alloc_tiles(tile_shape=(128, 64), element_shape=(256, 64),
                                                             buffer=nl.sbuf, dtype=nl.float32)), (G,),
            "unsupported", id="multi-row-sbuf"),
    Illegal("nl.alloc_blocks", _grid(lambda x: nl.alloc_blocks(tile_shape=(16, 8), block_shape=(1, 1),
                                                               element_shape=(2, 16, 8), buffer=nl.psum,
                                                               dtype=nl.float32)), (G,), "unsupported",
            id="untiled-on-chip"),
]

# ---- static view methods: a view of an SBUF tile, copied out by the Vector engine ----------------------
def _view_kernel(make: Any) -> Any:
    def kernel(x):
        v = make(load(x))
        t = tile(v.shape, v.dtype)
        nisa.tensor_copy(dst=t, src=v)
        return ret(t)

    return kernel


def _hbm_view_kernel(make: Any) -> Any:
    def kernel(x):
        v = make(x)
        t = tile(v.shape, v.dtype)
        nisa.dma_copy(dst=t, src=v)
        return ret(t)

    return kernel


X3 = randn(P, 4, 6)
VIEWS = [
    ("slice", lambda t: t.slice(1, 2, 8, 2), X, lambda x: x[:, 2:8:2]),
    ("permute", lambda t: t.permute((0, 2, 1)), X3, lambda x: x.transpose(0, 2, 1)),
    ("broadcast", lambda t: t[:, 3:4].broadcast(1, 5), X, lambda x: np.repeat(x[:, 3:4], 5, 1)),
    ("broadcast_to", lambda t: t[:, 3:4].broadcast_to((P, 5)), X, lambda x: np.repeat(x[:, 3:4], 5, 1)),
    ("expand_dim", lambda t: t.expand_dim(1), X, lambda x: x[:, None, :]),
    ("expand_dims", lambda t: t.expand_dims(2), X, lambda x: x[:, :, None]),
    ("squeeze_dim", lambda t: t[:, 1:2, :].squeeze_dim(1), X3, lambda x: x[:, 1]),
    ("reshape", lambda t: t.reshape((P, 2, 5)), X, lambda x: x.reshape(P, 2, 5)),
    ("reshape_dim", lambda t: t.reshape_dim(1, (5, 2)), X, lambda x: x.reshape(P, 5, 2)),
    ("flatten_dims", lambda t: t.flatten_dims(1, 2), X3, lambda x: x.reshape(P, 24)),
    ("rearrange", lambda t: t.rearrange("p (a b) -> p b a", a=2), X, lambda x: x.reshape(P, 2, 5).transpose(0, 2, 1)),
    ("view", lambda t: t.view(nl.int32), X, lambda x: x.view(np.int32)),
    ("reinterpret_cast", lambda t: t.reinterpret_cast(nl.uint32), X, lambda x: x.view(np.uint32)),
    ("ap", lambda t: t.ap([[F, P], [1, 3]], offset=4), X, lambda x: x[:, 4:7]),
]


def k_is_contiguous(x):
    t = load(x)
    return t.is_contiguous(), t[:, 0:4].is_contiguous(), x.is_contiguous(), x[1:3].is_contiguous()


CASES += [Case(f"tensor.{n}", _view_kernel(make), (arr,), ref) for n, make, arr, ref in VIEWS] + [
    Case("tensor.ap", _hbm_view_kernel(lambda x: x.ap([[12, 3], [2, 3]], offset=1)), (ROWS,),
         lambda x: x.reshape(-1)[1:].reshape(-1)[:36].reshape(3, 12)[:, 0:6:2], id="hbm"),
    Case("tensor.is_contiguous", k_is_contiguous, (ROWS,), lambda x: (True, False, True, True)),
]


# ---- illegal uses -----------------------------------------------------------------------------------
def _vs_on_chip(x, idx):
    nisa.dma_copy(dst=tile((4, F)), src=load(x).vector_select(0, load(idx)))


def _vs_dim1(x, idx):
    nisa.dma_copy(dst=tile((4, F)), src=x.vector_select(1, load(idx)))


def _vs_float_offsets(x, idx):
    nisa.dma_copy(dst=tile((4, F)), src=x.vector_select(0, load(idx, nl.float32)))


def _vs_in_compute(x, idx):
    t = tile((4, F))
    nisa.tensor_copy(dst=t, src=x.vector_select(0, load(idx)))


def _sel_partition(x, i):
    load(x).select(0, load(i))


def _sel_twice(x, i):
    ii = load(i)
    load(x).select(1, ii).select(1, ii)


def _sel_oob(x, i):
    load(x).select(1, load(i))


def _sel_float_index(x, i):
    load(x).select(1, load(i, nl.float32))


def _ti_gen(x, idx):
    return k_ti_gather(x, idx)


def _ti_hbm(x, idx):
    x.indirect(load(idx))


def _ti_index_dtype(x, idx):
    load(x).indirect(load(idx, nl.int32))


def _ti_in_dma(x, idx):
    nisa.dma_copy(dst=tile((x.shape[0], idx.shape[1])), src=load(x).indirect(load(idx)))


def _ti_num_elem(x, idx):
    load(x).indirect(load(idx), num_elem=99)


def _ti_matmul_tile_position(a, b, idx):
    sa, sb, ix = load(a), load(b), load(idx)
    acc = nl.ndarray((a.shape[1], idx.shape[1]), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=sa, moving=sb.indirect(ix), tile_position=(32, 0), tile_size=(32, 32))


def _lt_sbuf(x):
    nl.load_transpose2d(load(x))


def _lt_3d(x):
    nl.load_transpose2d(x.reshape((2, 16, F)))


def _rand_hbm(x):
    nl.rand((4, 4), nl.float32, buffer=nl.shared_hbm)


def _rand_int(x):
    nl.rand((4, 4), nl.int32)


def _seed_scalar(x):
    nl.random_seed(7)


def _gather_flattened(x):
    t = load(x)
    nl.gather_flattened(t, t)


def _bad_view(make: Any) -> Any:
    def kernel(x):
        make(load(x))

    return kernel


IDX_BAD_GROUP = IDX.copy()
IDX_BAD_GROUP[3, 0] = 1  # partition 3 disagrees with the rest of group 0-15
IDX_OOB = np.tile(np.array([7, 10], np.uint16), (P, 1))

ILLEGAL: list[Illegal] = [
    Illegal("tensor.vector_select", _vs_on_chip, (ROWS[:4], VIDX), "indexing", id="on-chip"),
    Illegal("tensor.vector_select", _vs_dim1, (ROWS, VIDX), "indexing", id="dim1"),
    Illegal("tensor.vector_select", _vs_float_offsets, (ROWS, VIDX), "dtype"),
    Illegal("tensor.vector_select", k_vector_select_gather, (ROWS, np.array([[6]], np.int32)), "out-of-bounds"),
    Illegal("tensor.vector_select", _vs_in_compute, (ROWS, VIDX), "indexing", id="compute-operand"),
    Illegal("tensor.select", _sel_partition, (X, np.array([[1]], np.int32)), "indexing", id="partition"),
    Illegal("tensor.select", _sel_twice, (randn(P, 4, 5), np.array([[1]], np.int32)), "indexing", id="twice"),
    Illegal("tensor.select", _sel_oob, (X, np.array([[F]], np.int32)), "out-of-bounds"),
    Illegal("tensor.select", _sel_float_index, (X, np.array([[1]], np.int32)), "dtype"),
    Illegal("tensor.indirect", _ti_gen, (X, IDX), "generation"),
    Illegal("tensor.indirect", k_ti_gather, (X, IDX_BAD_GROUP), "argument", target="trn3", id="group-offsets"),
    Illegal("tensor.indirect", k_ti_matmul, (A_MM, B_MM, np.tile(np.array([3, 0, 11], np.uint16), (32, 1))
                                            * np.r_[np.ones(16), np.zeros(16)].astype(np.uint16)[:, None]),
            "argument", target="trn3", id="tensor-engine-group-of-32"),
    Illegal("tensor.indirect", k_ti_gather, (X, IDX_OOB), "out-of-bounds", target="trn3"),
    Illegal("tensor.indirect", _ti_hbm, (X, IDX), "buffer", target="trn3"),
    Illegal("tensor.indirect", _ti_index_dtype, (X, IDX), "dtype", target="trn3"),
    Illegal("tensor.indirect", _ti_in_dma, (X, IDX), "indexing", target="trn3", id="dma-operand"),
    Illegal("tensor.indirect", _ti_num_elem, (X, IDX), "argument", target="trn3", id="num_elem"),
    Illegal("tensor.indirect", _ti_matmul_tile_position,
            (A_MM, B_MM, np.tile(np.array([3, 0, 11], np.uint16), (32, 1))), "argument", target="trn3",
            id="tile_position"),
    Illegal("tensor.permute", _bad_view(lambda t: t.permute((1, 0))), (X,), "indexing", id="partition"),
    Illegal("tensor.reshape", _bad_view(lambda t: t.reshape((16, 20))), (X,), "indexing", id="partition"),
    Illegal("tensor.reshape", _bad_view(lambda t: t.permute((0, 2, 1)).reshape((P, 24))), (X3,), "indexing",
            id="needs-copy"),
    Illegal("tensor.broadcast", _bad_view(lambda t: t[0:1].broadcast(0, 4)), (X,), "indexing", id="partition"),
    Illegal("tensor.flatten_dims", _bad_view(lambda t: t.flatten_dims(0, 1)), (X,), "indexing", id="partition"),
    Illegal("tensor.slice", _bad_view(lambda t: t.slice(1, 4, 12)), (X,), "out-of-bounds"),
    Illegal("tensor.ap", _bad_view(lambda t: t.ap([[3, P], [1, 3]])), (X,), "indexing", id="partition-stride"),
    # (making a view past its tensor is legal, as public kernels do for a last tile a condition leaves unused; using
    # it is not)
    Illegal("tensor.ap", _bad_view(lambda t: nisa.tensor_copy(dst=nl.ndarray((P, 11), dtype=t.dtype, buffer=nl.sbuf),
                                                              src=t.ap([[F, P], [1, 11]]))), (X,), "out-of-bounds"),
    Illegal("nl.load_transpose2d", _lt_sbuf, (X,), "buffer"),
    Illegal("nl.load_transpose2d", _lt_3d, (randn(32, F),), "argument", id="3d"),
    Illegal("nl.rand", _rand_hbm, (X,), "buffer"),
    Illegal("nl.rand", _rand_int, (X,), "dtype"),
    Illegal("nl.random_seed", _seed_scalar, (X,), "argument"),
    Illegal("nl.gather_flattened", _gather_flattened, (X,), "argument"),
]
ILLEGAL += ILLEGAL_SCALAR
ILLEGAL += ILLEGAL_INT64
ILLEGAL += ILLEGAL_GRID
