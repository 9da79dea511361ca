"""Microscaling (OCP MX) on NeuronCore-v4: quantize_mx (Vector) and nc_matmul_mx (Tensor).

Packed layout (our model of the documented x4 types): a ``float8_*_x4`` element is a 32-bit
word holding four fp8 codes, a ``float4_e2m1fn_x4`` element a 16-bit word holding four fp4
codes; code ``i`` of the element at free index ``j`` is source element ``4j + i`` and sits
in the ``i``-th least significant byte (nibble). A scaling group is 8 partitions × 4 packed
codes (32 values); its e8m0 scale lives in the same 32-partition quadrant as the data, in
row ``32·q + g`` for group ``g`` (0..3) of quadrant ``q`` of the scale tile's view, at the
same free index as the packed data element. The scale tile may be a partition-offset view
(offsets 0/4/8/12 pack several tensors' scales into one allocation).
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from nkieval.sim import dtypes as dt
from nkieval.sim.errors import NkiValidationError
from nkieval.sim.isa.core import (
    check_buffer,
    check_dtype,
    check_partitions,
    flag_view,
    free_size,
    instruction,
    read,
    record,
    settle,
    tensor_arg,
    write,
)
from nkieval.sim.tensor import NkiTensor

_FP8_X4 = {dt.float8_e4m3fn_x4.name: (dt.float8_e4m3fn, ml_dtypes.float8_e4m3fn, 8),
           dt.float8_e5m2_x4.name: (dt.float8_e5m2, ml_dtypes.float8_e5m2, 15)}
_SCALE_DTYPES = (dt.float8_e8m0fnu, dt.uint8)
_MX_INPUT = (dt.float8_e4m3fn_x4, dt.float8_e5m2_x4, dt.float4_e2m1fn_x4)
_E8M0_NAN = 255
_E8M0_BIAS = 127


def scale_rows(ctx: Any, partitions: int) -> np.ndarray:
    """Scale-tile row of each 8-partition scaling group of a ``partitions``-row data tile."""
    gp = ctx.target.mx_group_partitions
    per_q = ctx.target.mx_scale_rows_per_quadrant
    k = np.arange(partitions // gp)
    return (k // per_q) * (gp * per_q) + k % per_q


def unpack(t: NkiTensor) -> np.ndarray:
    """The fp32 values of an x4-packed tensor as [P, F, 4] (F = packed elements per partition)."""
    p = t.shape[0]
    raw = np.ascontiguousarray(t.data).reshape(p, -1)
    if t.dtype == dt.float4_e2m1fn_x4:
        shifts = np.array([0, 4, 8, 12], dtype=np.uint16)
        nib = ((raw[..., None] >> shifts) & np.uint16(0xF)).astype(np.uint8)
        return nib.view(ml_dtypes.float4_e2m1fn).astype(np.float32)
    _, ml, _ = _FP8_X4[t.dtype.name]
    return raw.astype("<u4").view(np.uint8).reshape(p, -1, 4).view(ml).astype(np.float32)


def _scale_codes(t: NkiTensor) -> np.ndarray:
    return np.asarray(t.data).view(np.uint8) if t.data.dtype.itemsize == 1 else np.asarray(t.data).astype(np.uint8)


def decode_scales(ctx: Any, scale: NkiTensor, partitions: int, free: int, role: str) -> np.ndarray:
    """fp32 scale per (group, free index): [partitions // 8, free], read from the documented rows."""
    rows = scale_rows(ctx, partitions)
    _check_scale_shape(scale, rows, free, role)
    codes = _scale_codes(scale).reshape(scale.shape[0], -1)[rows].astype(np.int32)
    with np.errstate(over="ignore"):
        vals = np.ldexp(np.float32(1.0), codes - _E8M0_BIAS).astype(np.float32)
    return np.where(codes == _E8M0_NAN, np.float32(np.nan), vals)


def _check_scale_shape(scale: NkiTensor, rows: np.ndarray, free: int, role: str) -> None:
    need = int(rows.max()) + 1 if rows.size else 1
    if scale.shape[0] < need or free_size(scale) != free:
        raise NkiValidationError(
            f"{role}{list(scale.shape)} must have at least {need} partitions (scales sit in the first rows of each "
            f"32-partition quadrant) and {free} elements per partition", operand=role, rule="shape-mismatch")


def _mx_partitions(ctx: Any, t: NkiTensor, role: str) -> int:
    p = check_partitions(ctx, t, role)
    if p % 32:
        raise NkiValidationError(f"{role} partition dimension {p} must be a multiple of 32", operand=role,
                                 rule="shape-mismatch")
    return p


@instruction("quantize_mx", "vector", min_generation=4)
def quantize_mx(ctx: Any, dst: Any, src: Any, dst_scale: Any, name: str | None = None) -> None:
    """fp16/bf16 → MXFP8 (x4-packed) data plus one e8m0 scale per 8-partition × 4-element group."""
    dst = tensor_arg(dst, "dst")
    src = tensor_arg(src, "src")
    dst_scale = tensor_arg(dst_scale, "dst_scale")
    for role, t in (("dst", dst), ("src", src), ("dst_scale", dst_scale)):
        check_buffer(t, role, ("sbuf",), "quantize_mx reads and writes SBUF only")
    check_dtype(src, "src", (dt.float16, dt.bfloat16))
    check_dtype(dst, "dst", (dt.float8_e4m3fn_x4, dt.float8_e5m2_x4), " (quantize_mx writes MXFP8)")
    check_dtype(dst_scale, "dst_scale", _SCALE_DTYPES)
    check_partitions(ctx, dst_scale, "dst_scale")
    p = _mx_partitions(ctx, src, "src")
    ge = ctx.target.mx_group_elems
    f = free_size(src)
    if f % ge:
        raise NkiValidationError(f"src free size {f} must be a multiple of {ge}", operand="src", rule="shape-mismatch")
    if dst.shape[0] != p or free_size(dst) != f // ge:
        raise NkiValidationError(f"dst{list(dst.shape)} must be [{p}, {f // ge}] (one x4 element per 4 src values)",
                                 operand="dst", rule="shape-mismatch")
    rows = scale_rows(ctx, p)
    _check_scale_shape(dst_scale, rows, f // ge, "dst_scale")
    elem_dt, _ml, emax = _FP8_X4[dst.dtype.name]
    gp = ctx.target.mx_group_partitions
    x = read(src).reshape(p // gp, gp, f // ge, ge).astype(np.float32)
    with np.errstate(all="ignore"):
        amax = np.abs(x).max(axis=(1, 3))
        finite = np.isfinite(amax)
        e = np.where(amax > 0, np.floor(np.log2(np.where(amax > 0, amax, 1.0))) - (emax - 1), -_E8M0_BIAS)
        e = np.clip(np.where(finite, e, 0), -_E8M0_BIAS, _E8M0_BIAS).astype(np.int32)
        q = x / np.ldexp(np.float32(1.0), e)[:, None, :, None]
    codes = dt.cast(q, elem_dt, fp8_overflow=ctx.options.fp8_overflow).view(np.uint8)
    packed = np.ascontiguousarray(codes.reshape(p, f // ge, ge)).view("<u4").reshape(p, f // ge)
    write(ctx, dst, packed.astype(np.uint32).reshape(dst.shape))
    scale_codes = np.where(finite, e + _E8M0_BIAS, _E8M0_NAN).astype(np.uint8)
    cur = _scale_codes(dst_scale).reshape(dst_scale.shape[0], -1).copy()
    cur[rows] = scale_codes
    if dst_scale.dtype == dt.uint8:
        write(ctx, dst_scale, cur.reshape(dst_scale.shape))
    else:
        write(ctx, dst_scale, cur.view(ml_dtypes.float8_e8m0fnu).reshape(dst_scale.shape))
    record(ctx, "quantize_mx", "vector", [(dst, "dst", "w"), (dst_scale, "dst_scale", "w"),
                                          (src, "src", "r")])


def _check_mx_tiling(ctx: Any, tile_position: Any, tile_size: Any, k: int) -> None:
    if (tile_position is None) != (tile_size is None):
        raise NkiValidationError("tile_position and tile_size must be set together", operand="tile_size",
                                 rule="argument")
    if tile_size is None:
        return
    try:
        (r, c), (pr, pc) = (int(v) for v in tile_size), (int(v) for v in tile_position)
    except (TypeError, ValueError):
        raise NkiValidationError("tile_position and tile_size must be (row, column) pairs of ints",
                                 operand="tile_size", rule="argument") from None
    if c != ctx.target.pe_array_cols or r not in ctx.target.matmul_tile_sizes:
        raise NkiValidationError(f"nc_matmul_mx supports row tiling only: tile_size must be (r, 128) with r in "
                                 f"{ctx.target.matmul_tile_sizes}, got {(r, c)}", operand="tile_size", rule="argument")
    if pc != 0 or pr % r or pr + r > ctx.target.pe_array_rows:
        raise NkiValidationError(f"tile_position {(pr, pc)} must be (multiple of {r}, 0) inside the 128-row array",
                                 operand="tile_position", rule="argument")
    if k > r:
        raise NkiValidationError(f"stationary partition size {k} does not fit a {r}-row tile", operand="stationary",
                                 rule="matmul-limit")


@instruction("nc_matmul_mx", "tensor", min_generation=4)
def nc_matmul_mx(ctx: Any, dst: Any, stationary: Any, moving: Any, stationary_scale: Any, moving_scale: Any,
                 tile_position: Any = None, tile_size: Any = None, accumulate: bool | None = None,
                 name: str | None = None) -> None:
    """``dst[M, N] (+)= Σ_k Σ_i (st[k, M, i]·s_st) (mv[k, N, i]·s_mv)`` over partitions k and packed slots i."""
    dst = tensor_arg(dst, "dst")
    st = tensor_arg(stationary, "stationary")
    mv = tensor_arg(moving, "moving")
    sst = tensor_arg(stationary_scale, "stationary_scale")
    smv = tensor_arg(moving_scale, "moving_scale")
    for role, t in (("stationary", st), ("moving", mv), ("stationary_scale", sst), ("moving_scale", smv)):
        check_buffer(t, role, ("sbuf",), "the Tensor engine reads SBUF")
        check_partitions(ctx, t, role)
    check_buffer(dst, "dst", ("psum",), "the Tensor engine writes PSUM")
    check_partitions(ctx, dst, "dst")
    check_dtype(st, "stationary", _MX_INPUT, " (nc_matmul_mx takes x4-packed MX data)")
    check_dtype(mv, "moving", _MX_INPUT, " (nc_matmul_mx takes x4-packed MX data)")
    check_dtype(sst, "stationary_scale", _SCALE_DTYPES)
    check_dtype(smv, "moving_scale", _SCALE_DTYPES)
    check_dtype(dst, "dst", (dt.float32, dt.bfloat16), " (PSUM output)")
    T = ctx.target
    k = _mx_partitions(ctx, st, "stationary")
    if mv.shape[0] != k:
        raise NkiValidationError(f"contraction (partition) sizes differ: stationary has {k}, moving has "
                                 f"{mv.shape[0]}", operand="moving", rule="partition-mismatch")
    m, n = free_size(st), free_size(mv)
    if m % 2 or m > T.gemm_stationary_fmax:
        raise NkiValidationError(f"stationary free size {m} must be even and at most {T.gemm_stationary_fmax}",
                                 operand="stationary", rule="matmul-limit")
    nmax = T.gemm_moving_fmax_bf16_dst if dst.dtype == dt.bfloat16 else T.gemm_moving_fmax
    if n > nmax:
        raise NkiValidationError(f"moving free size {n} exceeds maximum {nmax} for a {dst.dtype} dst",
                                 operand="moving", rule="matmul-limit")
    if dst.shape[0] != m or free_size(dst) != n:
        raise NkiValidationError(f"dst{list(dst.shape)} must be [{m}, {n}]", operand="dst", rule="shape-mismatch")
    _check_mx_tiling(ctx, tile_position, tile_size, k)
    gp = T.mx_group_partitions
    a = unpack(st) * np.repeat(decode_scales(ctx, sst, k, m, "stationary_scale"), gp, axis=0)[:, :, None]
    b = unpack(mv) * np.repeat(decode_scales(ctx, smv, k, n, "moving_scale"), gp, axis=0)[:, :, None]
    with np.errstate(all="ignore"):
        res = np.einsum("kmi,kni->mn", a, b, dtype=np.float32).reshape(dst.shape)
    if dst.alloc.slot is not None:  # (a tile placed over others: its storage must hold its own state)
        settle(dst, reading=accumulate is not False)
    mm = flag_view(dst, dst.alloc.mm_written)
    if accumulate is None:
        add = mm.copy()
    elif accumulate:
        if not mm.all():
            ctx.warn("accumulate=True onto PSUM that no matmul has written (uninitialised accumulator)",
                     rule="psum-accumulate", instruction="nc_matmul_mx")
        add = np.ones(dst.shape, dtype=bool)
    else:
        add = np.zeros(dst.shape, dtype=bool)
    if add.any():
        with np.errstate(all="ignore"):
            res = np.where(add, read(dst).astype(np.float32) + res, res)
    write(ctx, dst, res, matmul=True)
    record(ctx, "nc_matmul_mx", "tensor",
           [(dst, "dst", "rw" if add.any() else "w"), (st, "stationary", "r"), (mv, "moving", "r"),
            (sst, "stationary_scale", "r"), (smv, "moving_scale", "r")],
           K=int(k * 4), M=int(m), N=int(n), accumulated=bool(add.any()),
           tile_position=list(tile_position or ()), tile_size=list(tile_size or ()))
