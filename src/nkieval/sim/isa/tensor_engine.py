"""Tensor engine (PE array): nc_matmul, nc_transpose."""

from __future__ import annotations

from typing import Any

import numpy as np

from nkieval.sim import dtypes as dt
from nkieval.sim.errors import NkiValidationError
from nkieval.sim.fpstate import IGNORE_ALL, IGNORE_INVALID
from nkieval.sim.isa.core import (
    check_buffer,
    check_partitions,
    enum_value,
    flag_view,
    free_size,
    instruction,
    mark_written,
    note_write,
    read_exact,
    read_f32,
    record,
    resolve_engine,
    settle,
    tensor_arg,
    write,
)
from nkieval.sim.isa.enums import matmul_perf_mode
from nkieval.sim.tensor import NkiTensor

MATMUL_INPUT_DTYPES = (dt.float8_e4m3, dt.float8_e5m2, dt.bfloat16, dt.float16, dt.tfloat32, dt.float32)
_FP32_CLASS = (dt.float32, dt.tfloat32)


def _check_psum_bank(ctx: Any, dst: NkiTensor, role: str = "dst") -> None:
    """On v2/v3 one matmul writes one 2 KiB PSUM bank per partition."""
    if ctx.target.has("matmul_multi_bank"):
        return
    acc = dst.access(role, "w")
    bank = ctx.target.psum_bank_bytes
    if acc.addr_lo // bank != (acc.addr_hi - 1) // bank:
        raise NkiValidationError(
            f"{role} bytes [{acc.addr_lo}, {acc.addr_hi}) per partition cross a {bank}-byte PSUM bank boundary; "
            f"one matmul output must stay in one bank ({bank // 4} fp32 elements)", operand=role, rule="psum-bank")


_DTYPES_OK: set[tuple[str, ...]] = set()  # dtype combinations already accepted, per target


def _matmul_dtypes(ctx: Any, stationary: NkiTensor, moving: NkiTensor, dst: NkiTensor,
                   transpose_mode: bool = False) -> None:
    key = (ctx.target.name, stationary.dtype.name, moving.dtype.name, dst.dtype.name, str(transpose_mode))
    if key in _DTYPES_OK:
        return
    _check_matmul_dtypes(ctx, stationary, moving, dst, transpose_mode)
    _DTYPES_OK.add(key)


def _check_matmul_dtypes(ctx: Any, stationary: NkiTensor, moving: NkiTensor, dst: NkiTensor,
                         transpose_mode: bool) -> None:
    allowed = list(MATMUL_INPUT_DTYPES)
    if ctx.target.has("float8_e4m3fn_matmul"):
        allowed.append(dt.float8_e4m3fn)
    for role, t in (("stationary", stationary), ("moving", moving)):
        if t.dtype not in allowed:
            raise NkiValidationError(f"{role} dtype {t.dtype} is not a Tensor-engine input type "
                                     f"({', '.join(d.name for d in allowed)})", operand=role, rule="dtype")
    s32, m32 = stationary.dtype in _FP32_CLASS, moving.dtype in _FP32_CLASS
    if s32 != m32:
        raise NkiValidationError(f"fp32/tf32 matmul inputs must pair with fp32/tf32: stationary is {stationary.dtype}, "
                                 f"moving is {moving.dtype}", operand="moving", rule="dtype")
    names = {stationary.dtype.name, moving.dtype.name}
    if "float8_e4m3fn" in names and "float8_e4m3" in names:
        raise NkiValidationError("float8_e4m3fn cannot be mixed with legacy float8_e4m3 in one matmul",
                                 operand="moving", rule="dtype")
    dst_ok = (dt.float32, dt.bfloat16) if ctx.target.has("bf16_psum") else (dt.float32,)
    if transpose_mode:  # transpose mode writes the stationary dtype (16-bit PSUM output on v3)
        dst_ok = (*dst_ok, stationary.dtype)
    if dst.dtype not in dst_ok:
        raise NkiValidationError(f"dst dtype {dst.dtype} is not supported for matmul output (PSUM "
                                 f"{'/'.join(d.name for d in dst_ok)} on {ctx.target.name})", operand="dst", rule="dtype")


@instruction("nc_matmul", "tensor")
def nc_matmul(ctx: Any, dst: Any, stationary: Any, moving: Any, is_stationary_onezero: bool = False,
              is_moving_onezero: bool = False, is_transpose: bool = False, accumulate: bool | None = None,
              tile_position: Any = (), tile_size: Any = (), perf_mode: Any = matmul_perf_mode.none,
              name: str | None = None) -> None:
    """``dst[M, N] (+)= stationary[K, M].T @ moving[K, N]`` with fp32 accumulation in PSUM."""
    dst = tensor_arg(dst, "dst")
    stationary = tensor_arg(stationary, "stationary")
    moving = tensor_arg(moving, "moving")
    check_buffer(stationary, "stationary", ("sbuf",), "the Tensor engine reads SBUF")
    check_buffer(moving, "moving", ("sbuf",), "the Tensor engine reads SBUF")
    check_buffer(dst, "dst", ("psum",), "the Tensor engine writes PSUM")
    for role, t in (("stationary", stationary), ("moving", moving), ("dst", dst)):
        check_partitions(ctx, t, role)
    pm = enum_value(perf_mode or 0, matmul_perf_mode, "perf_mode")
    T = ctx.target
    if pm == matmul_perf_mode.double_row:
        if not T.has("double_row"):
            raise NkiValidationError("perf_mode=double_row needs trn2 or later", operand="perf_mode", rule="generation")
        if stationary.dtype not in dt.FP8_DTYPES or moving.dtype not in dt.FP8_DTYPES:
            raise NkiValidationError("perf_mode=double_row needs fp8 inputs", operand="perf_mode", rule="dtype")
        if tile_size or is_transpose:
            raise NkiValidationError("perf_mode=double_row cannot be combined with tiling or transpose",
                                     operand="perf_mode", rule="argument")
        for role, t in (("stationary", stationary), ("moving", moving)):
            if t.ndim != 3 or t.shape[1] != 2:
                raise NkiValidationError(f"double_row {role} must be [K, 2, F] (second dim exactly 2), got "
                                         f"{list(t.shape)}", operand=role, rule="shape-mismatch")
        st = read_f32(stationary).transpose(1, 0, 2).reshape(2 * stationary.shape[0], -1)
        mv = read_f32(moving).transpose(1, 0, 2).reshape(2 * moving.shape[0], -1)
    else:  # read_f32: SBUF operands read again and again are converted to fp32 once (read-only views)
        st = read_f32(stationary).reshape(stationary.shape[0], -1)
        mv = read_f32(moving).reshape(moving.shape[0], -1)
    K, M = stationary.shape[0], st.shape[1]
    N = mv.shape[1]
    if moving.shape[0] != K:
        raise NkiValidationError(f"contraction (partition) sizes differ: stationary{list(stationary.shape)} has {K}, "
                                 f"moving{list(moving.shape)} has {moving.shape[0]}", operand="moving",
                                 rule="partition-mismatch")
    if M > T.gemm_stationary_fmax:
        raise NkiValidationError(f"stationary free size {M} exceeds maximum {T.gemm_stationary_fmax}",
                                 operand="stationary", rule="matmul-limit")
    nmax = T.gemm_moving_fmax_bf16_dst if dst.dtype == dt.bfloat16 else T.gemm_moving_fmax
    if N > nmax:
        raise NkiValidationError(f"moving free size {N} exceeds maximum {nmax} on {T.name}", operand="moving",
                                 rule="matmul-limit")
    if dst.shape[0] != M or free_size(dst) != N:
        raise NkiValidationError(f"dst{list(dst.shape)} must be [{M}, {N}] for stationary{list(stationary.shape)} and "
                                 f"moving{list(moving.shape)}", operand="dst", rule="shape-mismatch")
    transpose_mode = bool(is_transpose) and T.has("pe_transpose_bitexact")
    _matmul_dtypes(ctx, stationary, moving, dst, transpose_mode)
    if tile_size or tile_position:
        _check_tiling(ctx, tile_position, tile_size, K, M)
    _check_psum_bank(ctx, dst)
    if not ctx.dry:  # (a record-only run has no values: the replay with them checks the hints)
        _check_onezero_hint(is_stationary_onezero, stationary, st, "stationary")
        _check_onezero_hint(is_moving_onezero, moving, mv, "moving")
    res: np.ndarray | None = None  # (a record-only run: no values, none stored)
    if ctx.dry:
        pass
    elif transpose_mode and mv.shape[0] == mv.shape[1] and np.array_equal(mv, np.eye(mv.shape[0], dtype=mv.dtype)):
        # v3+ transpose mode: the PE array passes stationary through bit-accurately (NaN/Inf kept).
        res = st.T.reshape(dst.shape)
    else:
        with IGNORE_ALL():
            wide = np.float64 if "matmul" in ctx.options.exact else np.float32  # (SimOptions.exact)
            res = (st.astype(wide, copy=False).T @ mv.astype(wide, copy=False)).astype(np.float32, copy=False) \
                .reshape(dst.shape)
    if dst.alloc.slot is not None:  # (a tile placed over others: its storage must hold its own state)
        settle(dst, reading=accumulate is not False)
    mm = flag_view(dst, dst.alloc.mm_written)
    # Which elements accumulate: all (add_mask None, accumulated), none, or those in add_mask.
    add_mask = None
    if accumulate is None:
        accumulated = bool(mm.all())
        if not accumulated and mm.any():
            add_mask = mm.copy()
            accumulated = True
    elif accumulate:
        if not mm.all():
            other = flag_view(dst, dst.alloc.other_written)
            if other.any() and not T.has("psum_accumulate_any_write"):
                ctx.warn("accumulate=True onto PSUM written by a non-matmul instruction (memset/copy) is undefined "
                         "on NeuronCore-v2/v3", rule="psum-accumulate", instruction="nc_matmul")
            else:
                ctx.warn("accumulate=True onto PSUM that no matmul has written (uninitialised accumulator)",
                         rule="psum-accumulate", instruction="nc_matmul")
        accumulated = True
    else:
        accumulated = False
    cur = dst.data  # PSUM accumulator state (already warned if never matmul-written)
    if res is None:  # (a record-only run: only which elements were written, and how)
        write(ctx, dst, None, matmul=True)
    elif accumulated and add_mask is None and cur.dtype == np.float32 and not dst.dtype.tf32 \
            and res.dtype == np.float32 and 0 not in cur.strides:
        # The common case: the whole fp32 tile accumulates; add in place (what write() would store).
        with IGNORE_ALL():
            np.add(cur, res, out=cur)
        if accumulate is None:
            note_write(dst.alloc)  # every element was already matmul-written: the PSUM flags stand
        else:
            mark_written(dst, matmul=True)
    else:
        if accumulated:
            with IGNORE_ALL():  # the whole tile accumulates in the common case: skip the select
                res = cur + res if add_mask is None else np.where(add_mask, cur.astype(np.float32) + res, res)
        write(ctx, dst, res, matmul=True)
    record(ctx, "nc_matmul", "tensor",
           [(dst, "dst", "rw" if accumulated else "w"), (stationary, "stationary", "r"),
            (moving, "moving", "r")],
           K=int(st.shape[0]), M=int(M), N=int(N), accumulate=None if accumulate is None else bool(accumulate),
           accumulated=accumulated, perf_mode="double_row" if pm else "none", is_transpose=bool(is_transpose),
           tile_position=list(tile_position or ()), tile_size=list(tile_size or ()),
           stationary_onezero=bool(is_stationary_onezero), moving_onezero=bool(is_moving_onezero))


def _check_onezero_hint(hint: Any, t: Any, vals: np.ndarray, role: str) -> None:
    """``is_<role>_onezero=True`` promises that an fp32 operand holds only zeros and ones, which lets the PE skip
    the fp32 passes other values need (nki.isa.nc_matmul: "could lead to 2x better performance if [the] tile is in
    float32; the field has no impact for non-float32"). The performance model credits that speed-up, so a promise
    the values break is an error here: its result would be undefined on hardware, and its speed-up unearned."""
    if not hint or t.dtype != dt.float32:
        return
    with IGNORE_ALL():
        bad = (vals != 0) & (vals != 1)
    if not bad.any():
        return
    at = tuple(int(i) for i in np.argwhere(bad)[0])
    raise NkiValidationError(f"is_{role}_onezero=True but {role}{list(t.shape)} holds values other than 0 and 1 "
                             f"({float(vals[at])!r} at {list(at)}): the hint lets the PE skip the fp32 passes such "
                             "values need, so the result would be undefined on hardware; drop the hint or pass an "
                             "operand of zeros and ones", operand=role, rule="onezero-hint")


def _check_tiling(ctx: Any, tile_position: Any, tile_size: Any, K: int, M: int) -> None:
    sizes = ctx.target.matmul_tile_sizes
    if len(tuple(tile_size)) != 2 or len(tuple(tile_position)) != 2:
        raise NkiValidationError("tile_position and tile_size must both be (row, col) pairs", operand="tile_size",
                                 rule="argument")
    (r, c), (pr, pc) = tuple(tile_size), tuple(tile_position)
    for what, v in (("rows", r), ("cols", c)):
        if v not in sizes:
            raise NkiValidationError(f"tile_size {what} {v} not supported on {ctx.target.name} (allowed: {sizes})",
                                     operand="tile_size", rule="generation" if v in (32, 64, 128) else "argument")
    if not ctx.target.has("tile32") and r == 32 and c == 32:
        raise NkiValidationError("32x32 PE tiling is not supported on trn1", operand="tile_size", rule="generation")
    if pr % r or pc % c or pr + r > ctx.target.pe_array_rows or pc + c > ctx.target.pe_array_cols:
        raise NkiValidationError(f"tile_position {(pr, pc)} must be a multiple of tile_size {(r, c)} inside the 128x128 "
                                 "array", operand="tile_position", rule="argument")
    if K > r or M > c:
        raise NkiValidationError(f"stationary [{K}, {M}] does not fit the {r}x{c} tile", operand="stationary",
                                 rule="matmul-limit")


@instruction("nc_transpose", "tensor")
def nc_transpose(ctx: Any, dst: Any, data: Any, engine: Any = None, name: str | None = None) -> None:
    """Partition↔free transpose (free dims flattened); dst dtype must equal data dtype.

    Tensor engine: data ≤ [128, 128], SBUF → PSUM (a matmul against an identity; bit-accurate on
    v3+). Vector engine: ≤ [32, 32], SBUF or PSUM on either side. Without ``engine`` the
    Tensor engine is chosen for SBUF → PSUM, the Vector engine for what fits it, and the Tensor
    engine for a larger SBUF → SBUF transpose (the compiler's choice: kernels with such calls run
    on hardware; its result goes through PSUM).
    """
    dst = tensor_arg(dst, "dst")
    data = tensor_arg(data, "data")
    p, f = data.shape[0], free_size(data)
    vlim = ctx.target.transpose_vector_max
    staged = False
    if dst.alloc.buffer.kind == "psum" and data.alloc.buffer.kind == "sbuf":
        default = "tensor"
    elif (p > vlim or f > vlim) and data.alloc.buffer.kind == "sbuf" and dst.alloc.buffer.kind == "sbuf":
        default, staged = "tensor", True
    else:
        default = "vector"
    eng = resolve_engine(engine, default, ("tensor", "vector"), "nc_transpose")
    staged = staged and eng == "tensor" and _engine_unset(engine)
    if eng == "tensor":
        check_buffer(data, "data", ("sbuf",), "the Tensor engine reads SBUF")
        if not staged:
            check_buffer(dst, "dst", ("psum",), "the Tensor engine writes PSUM")
        lim = ctx.target.transpose_tensor_max
    else:
        check_buffer(data, "data", ("sbuf", "psum"))
        check_buffer(dst, "dst", ("sbuf", "psum"))
        lim = vlim
    check_partitions(ctx, data, "data")
    check_partitions(ctx, dst, "dst")
    if p > lim or f > lim:
        raise NkiValidationError(f"data [{p}, {f}] exceeds the {eng} engine transpose limit [{lim}, {lim}] "
                                 "(nki.isa.nc_transpose: Tensor engine up to [128, 128] SBUF to PSUM, Vector engine "
                                 "up to [32, 32])", operand="data", rule="instruction-limit")
    if dst.shape[0] != f or free_size(dst) != p:
        raise NkiValidationError(f"dst{list(dst.shape)} must be [{f}, {p}] for data{list(data.shape)}", operand="dst",
                                 rule="shape-mismatch")
    if dst.dtype != data.dtype:
        raise NkiValidationError(f"dst dtype {dst.dtype} must equal data dtype {data.dtype}", operand="dst", rule="dtype")
    if eng == "tensor" and not staged:
        _check_psum_bank(ctx, dst)
    vals = read_exact(data).reshape(p, f).T
    if eng == "tensor" and not ctx.target.has("pe_transpose_bitexact") and data.dtype.is_float:
        # v2 transposes through a matmul with an identity: NaN/Inf do not survive bit-accurately.
        with IGNORE_INVALID():
            vals = np.where(np.isfinite(vals.astype(np.float32)), vals, np.float32(np.nan)).astype(vals.dtype)
    write(ctx, dst, vals, matmul=(eng == "tensor" and not staged))
    record(ctx, "nc_transpose", eng, [(dst, "dst", "w"), (data, "data", "r")])


def _engine_unset(engine: Any) -> bool:
    """``engine`` left to the compiler (None / ``engine.unknown``)."""
    return engine is None or getattr(engine, "name", engine) in ("unknown", 0)
