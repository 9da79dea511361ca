"""Conformance table for ``nki.isa``: one or more legal uses per instruction and its illegal uses.

Expectations are NumPy, written from the ISA reference semantics (nki-api.md §4), not from
the simulator's code. Kernels use the current (0.3+) destination-passing API.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import ml_dtypes
import nki.isa as nisa
import nki.language as nl
import numpy as np
from conf_kit import Case, Illegal, load, randint, randn, ret, tile

P, F = 32, 64
X = randn(P, F)
Y = randn(P, F)
POS = (np.abs(randn(P, F)) + 0.5).astype(np.float32)
A16 = randn(16, 32)
FP32_MIN = float(np.finfo(np.float32).min)


def k1(build: Callable[..., Any], shape: Any = None, dtype: Any = None, buffer: Any = None,
       in_dtype: Any = None) -> Callable[..., Any]:
    """Kernel: load x, ``build(dst, a)``, return dst."""

    def kernel(x):
        a = load(x, in_dtype)
        d = tile(shape or x.shape, dtype or nl.float32, buffer)
        build(d, a)
        return ret(d)

    return kernel


def k2(build: Callable[..., Any], shape: Any = None, dtype: Any = None, buffer: Any = None,
       in_dtypes: tuple[Any, Any] = (None, None)) -> Callable[..., Any]:
    def kernel(x, y):
        a, b = load(x, in_dtypes[0]), load(y, in_dtypes[1])
        d = tile(shape or x.shape, dtype or nl.float32, buffer)
        build(d, a, b)
        return ret(d)

    return kernel


def hbm_data(build: Callable[..., Any], shape: Any = None) -> Callable[..., Any]:
    """Kernel that (illegally) hands the HBM argument straight to a compute instruction."""

    def kernel(x):
        d = tile(shape or x.shape)
        build(d, x)
        return ret(d)

    return kernel


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


# ---- references for the less obvious instructions -------------------------------------------------
def ref_scan(d0: np.ndarray, d1: np.ndarray, init: float) -> np.ndarray:
    out = np.empty_like(d0)
    r = np.full(d0.shape[0], init, dtype=np.float32)
    for i in range(d0.shape[1]):
        r = d0[:, i] * r + d1[:, i]
        out[:, i] = r
    return out


def ref_seq_bounds(s: np.ndarray) -> np.ndarray:
    n = s.size
    lo, hi = np.zeros(n), np.zeros(n)
    for i in range(n):
        if s[i] == 0:
            lo[i], hi[i] = n, -1
            continue
        j = i
        while j > 0 and s[j - 1] == s[i]:
            j -= 1
        k = i
        while k + 1 < n and s[k + 1] == s[i]:
            k += 1
        lo[i], hi[i] = j, k + 1
    return np.stack([lo, hi]).reshape(1, 2, n).astype(np.float32)


def ref_match_replace8(x: np.ndarray, v: np.ndarray, imm: float) -> tuple[np.ndarray, np.ndarray]:
    out, idx = x.copy(), np.zeros(v.shape, dtype=np.uint32)
    for p in range(x.shape[0]):
        used: set[int] = set()
        for i in range(7, -1, -1):
            for j in range(x.shape[1]):
                if j not in used and x[p, j] == v[p, i]:
                    used.add(j)
                    out[p, j] = imm
                    idx[p, i] = j
                    break
    return out, idx


def ref_quantize_mx(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(dequantized values, e8m0 codes per group [P/8, F/4], packed uint32) for float8_e4m3fn."""
    p, f = x.shape
    g = x.reshape(p // 8, 8, f // 4, 4)
    amax = np.abs(g).max(axis=(1, 3))
    e = np.where(amax > 0, np.floor(np.log2(np.where(amax > 0, amax, 1))) - 7, -127).astype(np.int32)
    q = (g / np.exp2(e)[:, None, :, None]).astype(ml_dtypes.float8_e4m3fn)
    deq = q.astype(np.float32) * np.exp2(e)[:, None, :, None]
    packed = np.ascontiguousarray(q.reshape(p, f)).view(np.uint8).reshape(p, f // 4, 4).view("<u4")[..., 0]
    return deq.reshape(p, f), (e + 127).astype(np.uint8), packed


def ref_scale_tile(x: np.ndarray) -> np.ndarray:
    """A [32, F/4] uint8 scale tile (zeroed first): group g's codes in row g (rows 0..3 of the quadrant)."""
    codes = ref_quantize_mx(x)[1]
    return np.concatenate([codes, np.zeros((32 - codes.shape[0], codes.shape[1]), np.uint8)])


def ref_local_gather(src: np.ndarray, idx: np.ndarray, ne: int) -> np.ndarray:
    p = src.shape[0]
    out = []
    for c in range(p // 16):
        offs = idx[c * 16:(c + 1) * 16].reshape(-1, order="F")
        rows = src[c * 16:(c + 1) * 16]
        out.append(np.concatenate([rows[:, o:o + ne] for o in offs], axis=1))
    return np.concatenate(out, axis=0)


def ref_topk(src: np.ndarray, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    p = src.shape[0]
    vals = np.zeros((p, k), np.float32)
    idxs = np.zeros((p, k), np.uint32)
    for g in range(p // 16):
        snake = [float(src[g * 16 + e % 16, e // 16]) for e in range(n)]
        order = sorted(range(n), key=lambda e: (snake[e], -e))[-k:]
        vals[g * 16:(g + 1) * 16] = [snake[e] for e in order]
        idxs[g * 16:(g + 1) * 16] = order
    return vals, idxs


# ---- kernels needing more than one instruction -------------------------------------------------------
def k_activation_reduce(x):
    a = load(x)
    d, r = tile(x.shape), tile((x.shape[0], 1))
    nisa.activation_reduce(dst=d, op=nl.exp, data=a, reduce_op=nl.add, reduce_res=r, scale=0.5)
    return ret(d), ret(r)


def k_activate2_reduce(x):
    a = load(x)
    d, r = tile(x.shape), tile((x.shape[0], 1))
    nisa.activate2(dst=d, op=nl.relu, data=a, imm0=2.0, imm1=0.5, op0=nl.multiply, op1=nl.add,
                   reduce_op=nl.maximum, reduce_res=r, reduce_cmd=nisa.reduce_cmd.reset_reduce)
    return ret(d), ret(r)


def k_activate2_prelu(x):
    a = load(x)
    d = tile(x.shape)
    nisa.activate2(dst=d, op=nl.prelu, data=a, imm0=1.0, imm1=0.0, op0=nl.bypass, op1=nl.bypass, relu_param=0.1)
    return ret(d)


def k_bn(x):
    a = load(x)
    st = tile((x.shape[0], 6))
    nisa.bn_stats(dst=st, data=a)
    mv = tile((x.shape[0], 2))
    nisa.bn_aggr(dst=mv, data=st)
    return ret(mv)


def k_matmul(s, m):
    a, b = load(s), load(m)
    d = tile((s.shape[1], m.shape[1]), nl.float32, nl.psum)
    nisa.nc_matmul(dst=d, stationary=a, moving=b)
    return ret(d)


def k_transpose(x):
    a = load(x)
    d = tile((x.shape[1], x.shape[0]), nl.float32, nl.psum)
    nisa.nc_transpose(dst=d, data=a)
    return ret(d)


def k_dma_transpose(x):
    a = tile((x.shape[1], x.shape[0]), nl.bfloat16)
    nisa.dma_transpose(dst=a, src=x)
    return ret(a)


def k_copy_predicated(x, y):
    a, b = load(x), load(y)
    pred = tile(x.shape, nl.uint8)
    nisa.tensor_tensor(dst=pred, data1=a, data2=b, op=nl.greater)
    nisa.tensor_copy_predicated(dst=b, src=a, predicate=pred)
    return ret(b)


def k_select_reduce(x, y):
    a, b = load(x), load(y)
    pred = tile(x.shape, nl.uint8)
    nisa.tensor_tensor(dst=pred, data1=a, data2=b, op=nl.greater)
    d, r = tile(x.shape), tile((x.shape[0], 1))
    nisa.select_reduce(dst=d, predicate=pred, on_true=a, on_false=-1.0, reduce_res=r,
                       reduce_cmd=nisa.reduce_cmd.reset_reduce, reduce_op=nl.maximum)
    return ret(d), ret(r)


def k_find_index8(x):
    a = load(x)
    v = tile((x.shape[0], 8))
    nisa.max8(dst=v, src=a)
    d = tile((x.shape[0], 8), nl.uint32)
    nisa.nc_find_index8(dst=d, data=a, vals=v)
    return ret(d)


def k_match_replace8(x):
    a = load(x)
    v = tile((x.shape[0], 8))
    nisa.max8(dst=v, src=a)
    d, i = tile(x.shape), tile((x.shape[0], 8), nl.uint32)
    nisa.nc_match_replace8(dst=d, data=a, vals=v, imm=-1.0, dst_idx=i)
    return ret(d), ret(i)


def k_rng_stats(x):
    d = tile((128, 256), nl.uint16)
    nisa.rng(dst=d)
    return ret(d)


def k_rng_gpsimd(x):
    d = tile((128, 64), nl.uint32)
    nisa.rng(dst=d, engine=nisa.engine.gpsimd)
    return ret(d)


def k_rand2(x):
    d = tile((128, 256))
    nisa.rand2(dst=d, min=-2.0, max=3.0)
    return ret(d)


def k_dropout(x):
    a = load(x)
    d = tile(x.shape)
    nisa.dropout(dst=d, data=a, prob=0.25)
    return ret(d)


def k_dropout_extremes(x):
    a = load(x)
    d0, d1 = tile(x.shape), tile(x.shape)
    nisa.dropout(dst=d0, data=a, prob=0.0)
    nisa.dropout(dst=d1, data=a, prob=1.0)
    return ret(d0), ret(d1)


def k_seeded_rng_repeats(x):
    seed = tile((1, 1), nl.int32)
    nisa.memset(dst=seed, value=42)
    a, b = tile((32, 16), nl.uint32), tile((32, 16), nl.uint32)
    nisa.set_rng_seed(src_seeds=seed)
    nisa.rng(dst=a)
    nisa.set_rng_seed(src_seeds=seed)
    nisa.rng(dst=b)
    return ret(a), ret(b)


def k_rand_state_roundtrip(x):
    st = tile((32, 6), nl.uint32)
    nisa.rand_get_state(dst=st)
    a, b = tile((32, 16), nl.uint32), tile((32, 16), nl.uint32)
    nisa.rng(dst=a, engine=nisa.engine.gpsimd)
    nisa.rand_set_state(src_seeds=st)
    nisa.rng(dst=b, engine=nisa.engine.gpsimd)
    st2 = tile((32, 6), nl.uint32)
    nisa.rand_get_state(dst=st2)
    return ret(a), ret(b), ret(st), ret(st2)


def k_exponential(x):
    a = load(x)
    d, r = tile(x.shape), tile((x.shape[0], 1))
    nisa.exponential(dst=d, src=a, max_value=1.5, reduce_res=r, reduce_cmd=nisa.reduce_cmd.reset_reduce)
    return ret(d), ret(r)


def k_exponential_split(x):
    """A row sum split over two instructions: reset_reduce then reduce accumulates the whole row."""
    a = load(x)
    h = x.shape[1] // 2
    d, r = tile(x.shape), tile((x.shape[0], 1))
    nisa.exponential(dst=d[:, 0:h], src=a[:, 0:h], reduce_cmd=nisa.reduce_cmd.reset_reduce)
    nisa.exponential(dst=d[:, h:], src=a[:, h:], reduce_res=r, reduce_cmd=nisa.reduce_cmd.reduce)
    return ret(r)


def k_tsr(x):
    a = load(x)
    d, r = tile(x.shape), tile((x.shape[0], 1))
    nisa.tensor_scalar_reduce(dst=d, data=a, op0=nl.multiply, operand0=2.0, reduce_op=nl.add, reduce_res=r)
    return ret(d), ret(r)


def k_tsr_load(x):
    a = load(x)
    d, r = tile(x.shape), tile((x.shape[0], 1))
    nisa.tensor_scalar_reduce(dst=d, data=a, op0=nl.add, operand0=1.0, reduce_op=nl.maximum, reduce_res=r,
                              reduce_cmd=nisa.reduce_cmd.load_reduce, reduce_init=100.0, reduce_res_negate=True)
    return ret(r)


def k_cumulative(x):
    a = load(x)
    d = tile(x.shape)
    nisa.tensor_scalar_cumulative(dst=d, src=a, op0=nl.multiply, op1=nl.add, imm0=2.0)
    return ret(d)


def k_cumulative_max_load(x):
    a = load(x)
    d = tile(x.shape)
    nisa.tensor_scalar_cumulative(dst=d, src=a, op0=nl.add, op1=nl.maximum, imm0=0.0, imm1=0.5,
                                  reduce_cmd=nisa.reduce_cmd.load_reduce)
    return ret(d)


def k_range_select(x, b):
    a = load(x)
    lo, hi = load(b[:, 0:1]), load(b[:, 1:2])
    d, r = tile(x.shape), tile((x.shape[0], 1))
    nisa.range_select(dst=d, on_true_tile=a, comp_op0=nl.greater_equal, comp_op1=nl.less, bound0=lo, bound1=hi,
                      reduce_res=r, range_start=4)
    return ret(d), ret(r)


def k_dma_compute(x, y):
    d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    a = load(y)
    nisa.dma_compute(dst=d, srcs=[x, a, x], reduce_op=nl.add)
    return d


def k_dma_compute_scatter(data, idx, upd):
    out = nl.ndarray(data.shape, dtype=data.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=data)
    i = load(idx)
    u = load(upd)
    rows, f = upd.shape
    view = out.ap(pattern=[[data.shape[1], rows], [1, f]], vector_offset=i, indirect_dim=0)
    nisa.dma_compute(dst=view, srcs=[view, u], reduce_op=nl.add)
    return out


def k_quantize(x):
    a = load(x, nl.bfloat16)
    q = tile((x.shape[0], x.shape[1] // 4), nl.float8_e4m3fn_x4)
    s = tile((x.shape[0], x.shape[1] // 4), nl.uint8)
    nisa.memset(dst=s, value=0)
    nisa.quantize_mx(dst=q, src=a, dst_scale=s)
    return ret(q), ret(s)


def k_matmul_mx(x, y):
    a, b = load(x, nl.bfloat16), load(y, nl.bfloat16)
    k, m4 = x.shape
    n4 = y.shape[1]
    qa, qb = tile((k, m4 // 4), nl.float8_e4m3fn_x4), tile((k, n4 // 4), nl.float8_e4m3fn_x4)
    sa, sb = tile((k, m4 // 4), nl.float8_e8m0fnu), tile((k, n4 // 4), nl.float8_e8m0fnu)
    nisa.quantize_mx(dst=qa, src=a, dst_scale=sa)
    nisa.quantize_mx(dst=qb, src=b, dst_scale=sb)
    d = tile((m4 // 4, n4 // 4), nl.float32, nl.psum)
    nisa.nc_matmul_mx(dst=d, stationary=qa, moving=qb, stationary_scale=sa, moving_scale=sb)
    return ret(d)


def ref_matmul_mx(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    dx = ref_quantize_mx(x.astype(ml_dtypes.bfloat16).astype(np.float32))[0]
    dy = ref_quantize_mx(y.astype(ml_dtypes.bfloat16).astype(np.float32))[0]
    k = x.shape[0]
    return np.einsum("kmi,kni->mn", dx.reshape(k, -1, 4), dy.reshape(k, -1, 4))


def k_local_gather(x, i):
    a, idx = load(x), load(i)
    d = tile((x.shape[0], i.shape[1] * 16 * 2))
    nisa.local_gather(dst=d, src_buffer=a, index=idx, num_elem_per_idx=2)
    return ret(d)


def k_n_gather(x, i):
    a, idx = load(x), load(i)
    d = tile(i.shape)
    nisa.nc_n_gather(dst=d, data=a, indices=idx)
    return ret(d)


def k_shuffle(x):
    a = load(x)
    d = tile(x.shape)
    nisa.memset(dst=d, value=7.0)
    mask = [(i + 1) % 32 for i in range(32)]
    mask[5] = 255
    nisa.nc_stream_shuffle(dst=d, src=a, shuffle_mask=mask)
    return ret(d)


def ref_shuffle(x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        q, j = divmod(i, 32)
        out[i] = 7.0 if j == 5 else x[q * 32 + (j + 1) % 32]
    return out


def k_seq_bounds(s):
    a = load(s)
    d = tile((1, 2, s.shape[1]))
    nisa.sequence_bounds(dst=d, segment_ids=a)
    return ret(d)


def k_nonzero(x):
    a = load(x)
    d = tile((x.shape[0], x.shape[1] + 1), nl.int32)
    nisa.memset(dst=d, value=9)
    nisa.nonzero_with_count(dst=d, src=a, index_offset=16, padding_val=-1)
    return ret(d)


def ref_nonzero(x: np.ndarray) -> np.ndarray:
    out = np.full((x.shape[0], x.shape[1] + 1), 9, np.int32)
    for p in range(0, x.shape[0], 16):
        nz = np.nonzero(x[p])[0]
        out[p] = -1
        out[p, :nz.size] = nz + 16
        out[p, -1] = nz.size
    return out


def k_topk(x):
    a = load(x, nl.bfloat16)
    v, i = tile((x.shape[0], 8), nl.bfloat16), tile((x.shape[0], 8), nl.uint32)
    nisa.topk(val_dst=v, idx_dst=i, src=a, n=42)
    return ret(v), ret(i)


def k_registers(x):
    t = load(x, nl.int32)  # [1, 1] holding 5
    r = nisa.register_alloc()
    nisa.register_load(r, t)
    r2 = nisa.register_alloc(0)
    nisa.register_move(r2, r)
    out = tile((1, 1), nl.int32)
    nisa.register_store(out, r2)
    return ret(out)


def k_register_alloc_tensor(x):  # register_alloc(t): initialised from a one-element tensor (library MoE TKG)
    t = load(x, nl.int32)
    r = nisa.register_alloc(t[0, 0])
    out = tile((1, 1), nl.int32)
    nisa.register_store(out, r)
    return ret(out)


def _register_alloc_2x2(x):
    nisa.register_alloc(load(x, nl.int32))


def k_sendrecv(x):
    me = nl.program_id(0)
    a = tile((4, 8))
    nisa.memset(dst=a, value=float(me + 1))
    b = tile((4, 8))
    nisa.sendrecv(src=a, dst=b, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=0)
    out = nl.ndarray((2, 4, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out[me], src=b)
    return out


def k_core_barrier(x):
    me = nl.program_id(0)
    out = nl.ndarray((2, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    a = tile((1, 8))
    nisa.memset(dst=a, value=float(me + 1))
    nisa.dma_copy(dst=out[me:me + 1, :], src=a)
    nisa.core_barrier(data=out, cores=(0, 1))
    b = tile((1, 8))
    nisa.dma_copy(dst=b, src=out[1 - me:2 - me, :])  # the peer's half, written before the barrier
    check = nl.ndarray((2, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=check[me:me + 1, :], src=b)
    return check


def k_tensor_partition_reduce(x):
    a = load(x)
    d = tile((1, x.shape[1]))
    nisa.tensor_partition_reduce(dst=d, op=nl.add, data=a)
    return ret(d)


def k_nc_version(x):
    return int(nisa.get_nc_version()), int(nisa.get_nc_sub_version())


MX_X = randint(-3, 4, 32, 16).astype(np.float32)
MX_Y = randint(-3, 4, 32, 32).astype(np.float32)
SEG = np.array([[0, 3, 3, 3, 5, 5, 0, 0, 7, 2, 2, 2, 2, 0, 9, 9]], np.float32)
NZ = (randint(0, 3, 32, 12) * (randint(0, 2, 32, 12))).astype(np.float32)
LG_SRC = randn(32, 40)
LG_IDX = randint(0, 19, 32, 2, dtype=np.uint16) * np.uint16(2)
NG_IDX = randint(0, F, P, 24, dtype=np.uint32)
TOPK_SRC = np.round(randn(32, 3) * 8)  # distinct-ish integers, exact in bf16
BOUNDS = np.stack([np.full(P, 10.0), np.arange(P) + 12.0], axis=1).astype(np.float32)
SCATTER_DATA = randn(16, 8)
SCATTER_IDX = np.array([[3], [0], [7]], np.int32)
SCATTER_UPD = randn(3, 8)


def _scatter_ref(d: np.ndarray, i: np.ndarray, u: np.ndarray) -> np.ndarray:
    out = d.copy()
    out[i[:, 0]] += u
    return out


def _rng_check(out: np.ndarray) -> None:
    # 16-bit truncation of uniform random words: mean ≈ 32767.5, all values in range, not constant
    o = np.asarray(out).astype(np.float64)
    assert o.min() >= 0 and o.max() <= 65535 and abs(o.mean() / 32767.5 - 1) < 0.02 and len(np.unique(o)) > 1000


def _rand2_check(out: np.ndarray) -> None:
    o = np.asarray(out)
    assert o.min() >= -2.0 and o.max() <= 3.0 and abs(o.mean() - 0.5) < 0.05 and abs(o.var() - 25 / 12) < 0.1


def _dropout_check(out: np.ndarray, x: np.ndarray) -> None:
    o = np.asarray(out)
    kept = o != 0
    assert np.array_equal(o[kept], x[kept])  # survivors are unscaled copies
    assert abs((~kept).mean() - 0.25) < 0.06


def _same(out: Any) -> None:
    assert np.array_equal(out[0], out[1])


def _state_roundtrip(out: Any) -> None:
    a, b, st, st2 = out
    assert np.array_equal(a, b) and not np.array_equal(st, st2)


CASES: list[Case] = [
    Case("nisa.activation", k1(lambda d, a: nisa.activation(dst=d, op=nl.exp, data=a, scale=2.0, bias=0.5)), (X,),
         lambda x: np.exp(x * 2 + 0.5), rtol=1e-5),
    Case("nisa.activation", k1(lambda d, a: nisa.activation(dst=d, op=nl.relu, data=a)), (X,), _relu, id="relu"),
    # No range reduction on the Scalar engine: the documented value sin(9.0) = 27.65 (nki-api.md §4.8);
    # inside [-pi, pi] it is sin.
    Case("nisa.activation", k1(lambda d, a: nisa.activation(dst=d, op=nl.sin, data=a)),
         (np.array([[9.0, -9.0, 1.0, -3.0]], np.float32),), lambda x: np.array([[27.65, -27.65, math.sin(1.0),
                                                                                   math.sin(-3.0)]]),
         rtol=0, atol=5e-3, id="sin-no-range-reduction"),
    Case("nisa.activation_reduce", k_activation_reduce, (X,),
         lambda x: (np.exp(x * 0.5), np.exp(x * 0.5).sum(1, keepdims=True)), rtol=1e-5),
    Case("nisa.activate2", k_activate2_reduce, (X,),
         lambda x: (_relu(2 * x + 0.5), _relu(2 * x + 0.5).max(1, keepdims=True)), target="trn3"),
    Case("nisa.activate2", k_activate2_prelu, (X,), lambda x: np.where(x >= 0, x, 0.1 * x), target="trn3",
         id="prelu"),
    Case("nl.prelu", k_activate2_prelu, (X,), lambda x: np.where(x >= 0, x, 0.1 * x), target="trn3"),
    Case("nl.bypass", k_activate2_prelu, (X,), lambda x: np.where(x >= 0, x, 0.1 * x), target="trn3"),
    Case("nl.identity", k1(lambda d, a: nisa.activation(dst=d, op=nl.identity, data=a, bias=1.0)), (X,),
         lambda x: x + 1),
    Case("nisa.affine_select", k1(lambda d, a: nisa.affine_select(
        dst=d, pattern=[[-1, F]], channel_multiplier=1, on_true_tile=a, on_false_value=-1e4,
        cmp_op=nl.greater_equal)), (X,),
        lambda x: np.where(np.arange(P)[:, None] - np.arange(F)[None, :] >= 0, x, -1e4)),
    Case("nisa.bn_stats", k_bn, (X,), lambda x: np.stack([x.mean(1), x.var(1)], 1), rtol=1e-4, atol=1e-5),
    Case("nisa.bn_aggr", k_bn, (POS,), lambda x: np.stack([x.mean(1), x.var(1)], 1), rtol=1e-4, atol=1e-5),
    Case("nisa.dma_copy", k1(lambda d, a: nisa.dma_copy(dst=d, src=a), dtype=nl.bfloat16), (X,),
         lambda x: x.astype(ml_dtypes.bfloat16)),
    Case("nisa.dma_transpose", k_dma_transpose, (A16.astype(ml_dtypes.bfloat16),), lambda x: x.T),
    Case("nisa.iota", k1(lambda d, a: nisa.iota(dst=d, pattern=[[1, F]], offset=3, channel_multiplier=10),
                         dtype=nl.int32), (X,),
         lambda x: (3 + 10 * np.arange(P)[:, None] + np.arange(F)[None, :]).astype(np.int32)),
    Case("nisa.max8", k1(lambda d, a: nisa.max8(dst=d, src=a), shape=(P, 8)), (X,),
         lambda x: -np.sort(-x, axis=1)[:, :8]),
    Case("nisa.memset", k1(lambda d, a: nisa.memset(dst=d, value=2.5)), (X,), lambda x: np.full_like(x, 2.5)),
    Case("nisa.nc_find_index8", k_find_index8, (X,), lambda x: np.argsort(-x, axis=1)[:, :8].astype(np.uint32)),
    Case("nisa.nc_matmul", k_matmul, (randn(64, 32), randn(64, 48)), lambda s, m: s.T @ m, rtol=1e-5, atol=1e-5),
    Case("nisa.nc_transpose", k_transpose, (X,), lambda x: x.T),
    Case("nisa.reciprocal", k1(lambda d, a: nisa.reciprocal(dst=d, data=a)), (POS,), lambda x: 1 / x, rtol=1e-6),
    Case("nisa.scalar_tensor_tensor", k2(lambda d, a, b: nisa.scalar_tensor_tensor(
        dst=d, data=a, op0=nl.multiply, operand0=2.0, op1=nl.add, operand1=b)), (X, Y), lambda x, y: 2 * x + y),
    Case("nisa.select_reduce", k_select_reduce, (X, Y),
         lambda x, y: (np.where(x > y, x, -1.0), np.where(x > y, x, -1.0).max(1, keepdims=True))),
    Case("nisa.tensor_copy", k1(lambda d, a: nisa.tensor_copy(dst=d, src=a), dtype=nl.bfloat16), (X,),
         lambda x: x.astype(ml_dtypes.bfloat16)),
    Case("nisa.tensor_copy_predicated", k_copy_predicated, (X, Y), lambda x, y: np.where(x > y, x, y)),
    Case("nisa.tensor_partition_reduce", k_tensor_partition_reduce, (X,), lambda x: x.sum(0, keepdims=True),
         rtol=1e-5, atol=1e-5),
    Case("nisa.tensor_reduce", k1(lambda d, a: nisa.tensor_reduce(dst=d, op=nl.add, data=a, axis=1), shape=(P, 1)),
         (X,), lambda x: x.sum(1, keepdims=True), rtol=1e-5, atol=1e-5),
    Case("nisa.tensor_scalar", k1(lambda d, a: nisa.tensor_scalar(dst=d, data=a, op0=nl.multiply, operand0=2.0,
                                                                  op1=nl.add, operand1=1.0)), (X,),
         lambda x: 2 * x + 1),
    Case("nisa.tensor_tensor", k2(lambda d, a, b: nisa.tensor_tensor(dst=d, data1=a, data2=b, op=nl.subtract)),
         (X, Y), lambda x, y: x - y),
    Case("nisa.tensor_tensor_scan", k2(lambda d, a, b: nisa.tensor_tensor_scan(
        dst=d, data0=a, data1=b, initial=0.5, op0=nl.multiply, op1=nl.add)), (X * 0.5, Y),
        lambda x, y: ref_scan(x, y, 0.5), rtol=1e-5, atol=1e-5),
    # --- random: statistical / reproducibility properties (bit patterns are not specified on v2/v3) ---
    Case("nisa.rng", k_rng_stats, (X,), check=_rng_check),
    Case("nisa.rng", k_rng_gpsimd, (X,), check=lambda o: len(np.unique(o)) > 8000, id="gpsimd"),
    Case("nisa.rand2", k_rand2, (X,), check=_rand2_check, target="trn3"),
    Case("nisa.dropout", k_dropout, (randn(128, 64),), check=lambda o, x: _dropout_check(o, x)),
    Case("nisa.dropout", k_dropout_extremes, (X,), lambda x: (x, np.zeros_like(x)), id="extremes"),
    Case("nisa.set_rng_seed", k_seeded_rng_repeats, (X,), check=_same),
    Case("nisa.rand_get_state", k_rand_state_roundtrip, (X,), check=_state_roundtrip),
    Case("nisa.rand_set_state", k_rand_state_roundtrip, (X,), check=_state_roundtrip, target="trn3", id="trn3"),
    # --- vector-engine accumulators ---
    Case("nisa.exponential", k_exponential, (X,),
         lambda x: (np.exp(x - 1.5), np.exp(x - 1.5).sum(1, keepdims=True)), target="trn3", rtol=1e-5),
    Case("nisa.exponential", k_exponential_split, (X,), lambda x: np.exp(x).sum(1, keepdims=True), target="trn3",
         rtol=1e-5, id="split-reduction"),
    Case("nisa.tensor_scalar_reduce", k_tsr, (X,), lambda x: (2 * x, (2 * x).sum(1, keepdims=True)), rtol=1e-5,
         atol=1e-5),
    Case("nisa.tensor_scalar_reduce", k_tsr_load, (X,), lambda x: -np.maximum(100.0, (x + 1).max(1, keepdims=True)),
         id="load_reduce-negate"),
    Case("nisa.tensor_scalar_cumulative", k_cumulative, (X,), lambda x: np.cumsum(2 * x, axis=1), rtol=1e-5,
         atol=1e-5),
    Case("nisa.tensor_scalar_cumulative", k_cumulative_max_load, (X,),
         lambda x: np.maximum.accumulate(np.concatenate([np.full((P, 1), 0.5), x], 1), axis=1)[:, 1:],
         id="max-load"),
    Case("nisa.range_select", k_range_select, (X, BOUNDS), lambda x, b: (
        np.where((np.arange(F) + 4 >= b[:, :1]) & (np.arange(F) + 4 < b[:, 1:]), x, FP32_MIN),
        np.where((np.arange(F) + 4 >= b[:, :1]) & (np.arange(F) + 4 < b[:, 1:]), x, FP32_MIN).max(1, keepdims=True))),
    Case("nisa.dma_compute", k_dma_compute, (X, Y), lambda x, y: 2 * x + y, rtol=1e-6),
    Case("nisa.dma_compute", k_dma_compute_scatter, (SCATTER_DATA, SCATTER_IDX, SCATTER_UPD), _scatter_ref,
         id="scatter-rmw"),
    # --- MX (v4) ---
    Case("nisa.quantize_mx", k_quantize, (MX_X,),
         lambda x: (ref_quantize_mx(x)[2], ref_scale_tile(x)),
         target="trn3"),
    Case("nisa.nc_matmul_mx", k_matmul_mx, (MX_X, MX_Y), ref_matmul_mx, target="trn3"),
    # --- gathers & searches ---
    Case("nisa.local_gather", k_local_gather, (LG_SRC, LG_IDX), lambda s, i: ref_local_gather(s, i, 2)),
    Case("nisa.nc_n_gather", k_n_gather, (X, NG_IDX), lambda x, i: np.take_along_axis(x, i.astype(np.int64), 1)),
    Case("nisa.nc_stream_shuffle", k_shuffle, (randn(64, 8),), ref_shuffle),
    Case("nisa.nc_match_replace8", k_match_replace8, (X,), lambda x: ref_match_replace8(x, -np.sort(-x, 1)[:, :8],
                                                                                        -1.0)),
    Case("nisa.sequence_bounds", k_seq_bounds, (SEG,), lambda s: ref_seq_bounds(s[0])),
    Case("nisa.nonzero_with_count", k_nonzero, (NZ,), ref_nonzero),
    Case("nisa.topk", k_topk, (TOPK_SRC,), lambda s: ref_topk(s, 42, 8)),
    # --- registers & collectives ---
    Case("nisa.register_alloc", k_registers, (np.array([[5]], np.int32),), lambda x: x),
    Case("nisa.register_alloc", k_register_alloc_tensor, (np.array([[7, 1]], np.int32),), lambda x: x[:, :1],
         id="from-tensor"),
    Case("nisa.register_move", k_registers, (np.array([[-7]], np.int32),), lambda x: x),
    Case("nisa.register_load", k_registers, (np.array([[123456]], np.int32),), lambda x: x),
    Case("nisa.register_store", k_registers, (np.array([[0]], np.int32),), lambda x: x),
    Case("nisa.sendrecv", k_sendrecv, (X,), lambda x: np.stack([np.full((4, 8), 2.0), np.full((4, 8), 1.0)]),
         lnc=2),
    Case("nisa.get_nc_version", k_nc_version, (X,), lambda x: (3, 0)),
    Case("nisa.get_nc_version", k_nc_version, (X,), lambda x: (4, 0), target="trn3", id="trn3"),
    Case("nisa.get_nc_sub_version", k_nc_version, (X,), lambda x: (2, 0), target="trn1"),
    Case("nisa.core_barrier", k_core_barrier, (X,), lambda x: np.stack([np.full(8, 2.0), np.full(8, 1.0)]), lnc=2),
]


def _mx_gen2(x):
    a = load(x, nl.bfloat16)
    q, s = tile((32, 4), nl.float8_e4m3fn_x4), tile((32, 4), nl.uint8)
    nisa.quantize_mx(dst=q, src=a, dst_scale=s)
    return ret(s)


def _mx_bad_partitions(x):
    a = load(x, nl.bfloat16)
    q, s = tile((16, 4), nl.float8_e4m3fn_x4), tile((16, 4), nl.uint8)
    nisa.quantize_mx(dst=q, src=a, dst_scale=s)
    return ret(s)


def _rng_float(x):
    d = tile((4, 4))
    nisa.rng(dst=d)
    return ret(d)


def _rng_gpsimd_psum(x):
    d = tile((4, 4), nl.uint32, nl.psum)
    nisa.rng(dst=d, engine=nisa.engine.gpsimd)
    return x


def _rand2_bad_range(x):
    d = tile((4, 4))
    nisa.rand2(dst=d, min=1.0, max=1.0)
    return ret(d)


def _state_wrong_words(x):
    d = tile((4, 5), nl.uint32)
    nisa.rand_get_state(dst=d)
    return ret(d)


def _sendrecv_lnc1(x):
    a, b = tile((4, 8)), tile((4, 8))
    nisa.memset(dst=a, value=0.0)
    nisa.sendrecv(src=a, dst=b, send_to_rank=0, recv_from_rank=0, pipe_id=0)
    return ret(b)


def _barrier_bad_cores(x):
    t = nl.ndarray((2, 2), dtype=nl.float32, buffer=nl.hbm)
    nisa.core_barrier(data=t, cores=(0, 2))
    return x


def _register_int(x):
    r = nisa.register_alloc(3)
    return [x for _ in range(r)]


def _register_uninit(x):
    r = nisa.register_alloc()
    t = tile((1, 1), nl.int32)
    nisa.register_store(t, r)
    return ret(t)


def _local_gather_oob(x, i):
    a, idx = load(x), load(i)
    d = tile((x.shape[0], i.shape[1] * 16 * 2))
    nisa.local_gather(dst=d, src_buffer=a, index=idx, num_elem_per_idx=2)
    return ret(d)


def _shuffle_bad_start(x):
    a = load(x)
    d = tile(x.shape)
    nisa.nc_stream_shuffle(dst=d[16:48, :], src=a[16:48, :], shuffle_mask=list(range(32)))
    return ret(d)


def _seq_bounds_two_partitions(s):
    a = load(s)
    d = tile((2, 2, s.shape[1]))
    nisa.sequence_bounds(dst=d, segment_ids=a)
    return ret(d)


def _topk_small_n(x):
    a = load(x, nl.bfloat16)
    v, i = tile((x.shape[0], 4), nl.bfloat16), tile((x.shape[0], 4), nl.uint32)
    nisa.topk(val_dst=v, idx_dst=i, src=a, n=4)
    return ret(v)


def _range_select_bad_false(x, b):
    a = load(x)
    lo, hi = load(b[:, 0:1]), load(b[:, 1:2])
    d = tile(x.shape)
    nisa.range_select(dst=d, on_true_tile=a, comp_op0=nl.greater_equal, comp_op1=nl.less, bound0=lo, bound1=hi,
                      on_false_value=0.0)
    return ret(d)


def _dma_compute_mul(x, y):
    d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_compute(dst=d, srcs=[x, y], reduce_op=nl.multiply)
    return d


def _fori_in_no_reorder(x):
    with nl.no_reorder():
        nl.fori_loop(0, 2, lambda i: None)
    return x


def _matmul_mx_bad_scale(x, y):
    a = load(x, nl.bfloat16)
    qa, qb = tile((32, 4), nl.float8_e4m3fn_x4), tile((32, 8), nl.float8_e4m3fn_x4)
    sa, sb = tile((32, 4), nl.float8_e8m0fnu), tile((2, 8), nl.float8_e8m0fnu)
    nisa.quantize_mx(dst=qa, src=a, dst_scale=sa)
    d = tile((4, 8), nl.float32, nl.psum)
    nisa.nc_matmul_mx(dst=d, stationary=qa, moving=qb, stationary_scale=sa, moving_scale=sb)
    return ret(d)


ILLEGAL: list[Illegal] = [
    Illegal("nisa.activation", hbm_data(lambda d, x: nisa.activation(dst=d, op=nl.exp, data=x)), (X,), "buffer"),
    Illegal("nisa.activate2", k_activate2_prelu, (X,), "generation", target="trn2"),
    Illegal("nisa.tensor_scalar", k1(lambda d, a: nisa.tensor_scalar(dst=d, data=a, op0=nl.prelu, operand0=2.5)), (X,),
            id="activation-as-alu-op"),
    Illegal("nisa.tensor_tensor", k1(lambda d, a: nisa.tensor_tensor(dst=d, data1=a, data2=a, op=nl.prelu)), (X,),
            id="activation-as-alu-op"),
    Illegal("nisa.activate2", k1(lambda d, a: nisa.activate2(dst=d, op=nl.exp, data=a, imm0=1.0, imm1=1.0, op0=nl.add,
                                                              op1=nl.add)), (X,), "argument", target="trn3",
            id="op-pair"),
    Illegal("nisa.memset", k1(lambda d, a: nisa.memset(dst=d, value=2.5), dtype=nl.int32), (X,), "dtype"),
    Illegal("nisa.nc_matmul", k_matmul, (randn(16, 8), randn(16, 520)), "matmul-limit"),
    Illegal("nisa.tensor_tensor", k2(lambda d, a, b: nisa.tensor_tensor(dst=d, data1=a, data2=b, op=nl.add),
                                     shape=(P, F)), (X, randn(16, F)), "partition-mismatch"),
    Illegal("nisa.rng", _rng_float, (X,), "dtype"),
    Illegal("nisa.rng", _rng_gpsimd_psum, (X,), "generation", target="trn1", id="gpsimd-trn1"),
    Illegal("nisa.rng", _rng_gpsimd_psum, (X,), "buffer", id="gpsimd-psum"),
    Illegal("nisa.rand2", _rand2_bad_range, (X,), "argument", target="trn3"),
    Illegal("nisa.rand2", _rand2_bad_range, (X,), "generation", target="trn2", id="trn2"),
    Illegal("nisa.rand_get_state", _state_wrong_words, (X,), "shape-mismatch"),
    Illegal("nisa.rand_get_state", _state_wrong_words, (X,), "generation", target="trn1", id="trn1"),
    Illegal("nisa.dropout", k1(lambda d, a: nisa.dropout(dst=d, data=a, prob=1.5)), (X,), "argument"),
    Illegal("nisa.dropout", k1(lambda d, a: nisa.dropout(dst=d, data=a, prob=0.5), dtype=nl.bfloat16), (X,), "dtype",
            id="dtype"),
    Illegal("nisa.exponential", k1(lambda d, a: nisa.exponential(dst=d, src=a)), (X,), "generation"),
    Illegal("nisa.exponential", k1(lambda d, a: nisa.exponential(dst=d, src=a, reduce_init=1.0)), (X,), "argument",
            target="trn3", id="reduce_init"),
    Illegal("nisa.tensor_scalar_reduce", k1(lambda d, a: nisa.tensor_scalar_reduce(
        dst=d, data=a, op0=nl.bitwise_and, operand0=1, reduce_op=nl.add)), (X,), "argument"),
    Illegal("nisa.tensor_scalar_cumulative", k1(lambda d, a: nisa.tensor_scalar_cumulative(
        dst=d, src=a, op0=nl.add, op1=nl.add, imm0=1.0), dtype=nl.int32, in_dtype=nl.int32), (X,), "dtype"),
    Illegal("nisa.range_select", k_range_select, (X, BOUNDS), "generation", target="trn1"),
    Illegal("nisa.range_select", _range_select_bad_false, (X, BOUNDS), "argument", id="on_false"),
    Illegal("nisa.dma_compute", _dma_compute_mul, (X, Y), "argument"),
    Illegal("nisa.quantize_mx", _mx_gen2, (MX_X,), "generation", target="trn2"),
    Illegal("nisa.quantize_mx", _mx_bad_partitions, (MX_X[:16],), "shape-mismatch", target="trn3", id="partitions"),
    Illegal("nisa.nc_matmul_mx", _matmul_mx_bad_scale, (MX_X, MX_Y), "shape-mismatch", target="trn3"),
    Illegal("nisa.local_gather", _local_gather_oob, (LG_SRC, (LG_IDX + 40).astype(np.uint16)), "out-of-bounds"),
    Illegal("nisa.nc_n_gather", k_n_gather, (X, (NG_IDX + F).astype(np.uint32)), "out-of-bounds"),
    Illegal("nisa.nc_stream_shuffle", _shuffle_bad_start, (randn(64, 8),), "argument"),
    Illegal("nisa.nonzero_with_count", k_nonzero, (NZ,), "generation", target="trn1"),
    Illegal("nisa.sequence_bounds", _seq_bounds_two_partitions, (np.concatenate([SEG, SEG]),), "shape-mismatch"),
    Illegal("nisa.topk", _topk_small_n, (TOPK_SRC,), "instruction-limit"),
    Illegal("nisa.register_alloc", _register_int, (X,), "argument"),
    Illegal("nisa.register_alloc", _register_alloc_2x2, (np.ones((2, 2), np.int32),), "shape-mismatch",
            id="tensor-not-one-element"),
    Illegal("nisa.register_store", _register_uninit, (X,), "uninitialized"),
    Illegal("nisa.sendrecv", _sendrecv_lnc1, (X,), "kernel"),
    Illegal("nisa.sendrecv", _sendrecv_lnc1, (X,), "generation", target="trn1", id="trn1"),
    Illegal("nisa.core_barrier", _barrier_bad_cores, (X,), "argument", lnc=2),
    Illegal("nl.fori_loop", _fori_in_no_reorder, (X,), "kernel"),
]

assert math.isfinite(FP32_MIN)
