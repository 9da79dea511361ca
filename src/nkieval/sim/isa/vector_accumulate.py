"""Vector-engine instructions with accumulator state.

exponential, tensor_scalar_reduce, tensor_scalar_cumulative and range_select share the
Vector engine's per-lane fp32 accumulator registers (``ctx.vector_acc``); ``reduce_cmd``
decides whether an instruction resets, loads, continues or leaves them, exactly as the
ISA documents, so a reduction split over several instructions gives the whole-row result.
(dma_compute, which sums inside the DMA engines, is in :mod:`nkieval.sim.isa.dma_sum`.)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nkieval.sim import dtypes as dt
from nkieval.sim.errors import NkiValidationError
from nkieval.sim.fpstate import IGNORE_ALL
from nkieval.sim.isa.core import (
    check_buffer,
    check_dtype,
    check_elementwise_operands,
    free_size,
    instruction,
    read,
    record,
    scalar_or_vector,
    tensor_arg,
    write,
)
from nkieval.sim.isa.enums import reduce_cmd as ReduceCmd
from nkieval.sim.ops import ARITH, BITVEC, REDUCE_IDENTITY, Op, as_op
from nkieval.sim.tensor import NkiTensor

FP32_MIN = float(np.finfo(np.float32).min)
_EXP_DST = (dt.float8_e4m3, dt.float8_e5m2, dt.float16, dt.bfloat16, dt.float32, dt.tfloat32, dt.int8, dt.int16,
            dt.int32, dt.uint8, dt.uint16)
_EXP_SRC = (dt.float8_e4m3, dt.float8_e5m2, dt.float16, dt.bfloat16, dt.float32, dt.int8, dt.int16, dt.int32,
            dt.uint8, dt.uint16, dt.uint32)
_CUM_DTYPES = (dt.bfloat16, dt.float16, dt.float32, dt.float8_e4m3, dt.float8_e4m3fn, dt.float8_e5m2, dt.uint8,
               dt.uint16, dt.int8, dt.int16)
_RED_UFUNC = {"add": np.add, "multiply": np.multiply, "maximum": np.maximum, "minimum": np.minimum}
_COMPARE = ("equal", "less", "less_equal", "greater", "greater_equal")


def reduce_cmd_of(x: Any, allowed: tuple[int, ...], instruction_name: str) -> int:
    """Normalise a ``reduce_cmd`` argument and check it is one this instruction supports."""
    try:
        cmd = int(getattr(x, "value", x))
    except (TypeError, ValueError, OverflowError):
        cmd = -1
    if cmd not in allowed:
        names = ", ".join(ReduceCmd(c).name for c in allowed)
        raise NkiValidationError(f"reduce_cmd {x!r} is not supported by {instruction_name}; use one of {names}",
                                 operand="reduce_cmd", rule="argument")
    return cmd


def arith_op(x: Any, role: str, instruction_name: str, allowed: tuple[str, ...] | None = None) -> Op:
    o = as_op(x, instruction_name, role)
    if allowed is not None and o.name not in allowed:
        raise NkiValidationError(f"{role} {o.name} is not supported; use one of {', '.join(allowed)}", operand=role,
                                 rule="argument")
    if o.name in BITVEC:
        raise NkiValidationError(f"{role} must be an arithmetic operator, got bitvec {o.name}", operand=role,
                                 rule="argument")
    return o


def apply_scalar_op(ctx: Any, o: Op, x: np.ndarray, operand: Any, role: str, p: int, reverse: bool = False) -> Any:
    """``x op operand`` (or reversed) with a scalar / [P, 1] operand; unary ops take no operand."""
    if o.is_unary:
        if operand not in (None, 0, 0.0):
            raise NkiValidationError(f"unary {o.name} takes no operand (pass None or 0)", operand=role,
                                     rule="argument")
        return o.unary(x)
    if o.name not in ARITH:
        raise NkiValidationError(f"{o.name} is not an ALU operator", operand=role, rule="argument")
    s = scalar_or_vector(ctx, operand, role, p)
    return o.binary(s, x) if reverse else o.binary(x, s)


def write_reduce_res(ctx: Any, reduce_res: Any, acc: np.ndarray, p: int, operands: list[Any],
                     negate: bool = False) -> None:
    rr = tensor_arg(reduce_res, "reduce_res")
    check_buffer(rr, "reduce_res", ("sbuf", "psum"))
    if rr.shape[0] != p or rr.size != p:
        raise NkiValidationError(f"reduce_res must be [{p}, 1], got {list(rr.shape)}", operand="reduce_res",
                                 rule="shape-mismatch")
    write(ctx, rr, (-acc[:p] if negate else acc[:p]).reshape(rr.shape))
    operands.append((rr, "reduce_res", "w"))


def _load_init(ctx: Any, init: Any, p: int) -> np.ndarray:
    return np.broadcast_to(np.asarray(scalar_or_vector(ctx, init, "reduce_init", p), dtype=np.float32),
                           (p, 1)).reshape(p)


@instruction("exponential", "vector", min_generation=4)
def exponential(ctx: Any, dst: Any, src: Any, max_value: Any = 0.0, reduce_res: Any = None,
                reduce_cmd: Any = ReduceCmd.idle, reduce_init: Any = 0.0, name: str | None = None) -> None:
    """``dst = exp(src - max_value)``; with reduce_cmd, also a running sum in the Vector accumulators."""
    dst = tensor_arg(dst, "dst")
    src = tensor_arg(src, "src")
    pairs = [("dst", dst), ("src", src)]
    check_elementwise_operands(ctx, pairs)
    check_dtype(dst, "dst", _EXP_DST)
    check_dtype(src, "src", _EXP_SRC)
    if src.ndim > 4 or dst.ndim > 4:
        raise NkiValidationError("exponential supports tensors of up to 4 dimensions", operand="src", rule="argument")
    cmd = reduce_cmd_of(reduce_cmd, (ReduceCmd.idle, ReduceCmd.reset_reduce, ReduceCmd.reduce,
                                     ReduceCmd.load_reduce), "exponential")
    if cmd != ReduceCmd.load_reduce and not (isinstance(reduce_init, int | float) and reduce_init == 0):
        raise NkiValidationError("reduce_init must be unset (0.0) unless reduce_cmd is load_reduce",
                                 operand="reduce_init", rule="argument")
    p = src.shape[0]
    operands = [(dst, "dst", "w"), (src, "src", "r")]
    m = scalar_or_vector(ctx, max_value, "max_value", p)
    with IGNORE_ALL():
        y = np.exp(read(src).reshape(p, -1).astype(np.float32) - m).astype(np.float32)
    write(ctx, dst, y.reshape(dst.shape))
    acc = ctx.vector_acc
    if cmd == ReduceCmd.reset_reduce:
        acc[:p] = 0.0
    elif cmd == ReduceCmd.load_reduce:
        acc[:p] = _load_init(ctx, reduce_init, p)
    if cmd != ReduceCmd.idle:
        acc[:p] += y.sum(axis=1, dtype=np.float32)
    if reduce_res is not None:
        write_reduce_res(ctx, reduce_res, acc, p, operands)
    record(ctx, "exponential", "vector", operands, reduce_cmd=int(cmd))


@instruction("tensor_scalar_reduce", "vector")
def tensor_scalar_reduce(ctx: Any, dst: Any, data: Any, op0: Any, operand0: Any, reduce_op: Any,
                         reduce_res: Any = None, reverse0: bool = False, reduce_cmd: Any = ReduceCmd.reset_reduce,
                         reduce_init: Any = None, reduce_res_negate: bool = False, name: str | None = None) -> None:
    """``dst = data op0 operand0`` plus a reduction of dst over all free dims into the Vector accumulators."""
    dst = tensor_arg(dst, "dst")
    data = tensor_arg(data, "data")
    pairs = [("dst", dst), ("data", data)]
    check_elementwise_operands(ctx, pairs)
    o0 = arith_op(op0, "op0", "tensor_scalar_reduce")
    ro = arith_op(reduce_op, "reduce_op", "tensor_scalar_reduce", tuple(_RED_UFUNC))
    if reverse0:
        raise NkiValidationError("reverse0 is not supported by tensor_scalar_reduce", operand="reverse0",
                                 rule="argument")
    cmd = reduce_cmd_of(reduce_cmd, (ReduceCmd.reset_reduce, ReduceCmd.reduce, ReduceCmd.load_reduce),
                        "tensor_scalar_reduce")
    if (cmd == ReduceCmd.load_reduce) != (reduce_init is not None):
        raise NkiValidationError("reduce_init must be given exactly when reduce_cmd is load_reduce",
                                 operand="reduce_init", rule="argument")
    p = data.shape[0]
    operands = [(dst, "dst", "w"), (data, "data", "r")]
    with IGNORE_ALL():
        y = np.asarray(apply_scalar_op(ctx, o0, read(data).reshape(p, -1).astype(np.float32), operand0, "operand0",
                                       p), dtype=np.float32)
    write(ctx, dst, y.reshape(dst.shape))
    acc = ctx.vector_acc
    if cmd == ReduceCmd.reset_reduce:
        acc[:p] = REDUCE_IDENTITY[ro.name]
    elif cmd == ReduceCmd.load_reduce:
        acc[:p] = _load_init(ctx, reduce_init, p)
    with IGNORE_ALL():
        acc[:p] = _RED_UFUNC[ro.name](acc[:p], _RED_UFUNC[ro.name].reduce(y, axis=1))
    if reduce_res is not None:
        write_reduce_res(ctx, reduce_res, acc, p, operands, negate=bool(reduce_res_negate))
    record(ctx, "tensor_scalar_reduce", "vector", operands, op0=o0.name, reduce_op=ro.name, reduce_cmd=int(cmd))


@instruction("tensor_scalar_cumulative", "vector")
def tensor_scalar_cumulative(ctx: Any, dst: Any, src: Any, op0: Any, op1: Any, imm0: Any, imm1: Any = None,
                             reduce_cmd: Any = ReduceCmd.reset_reduce, name: str | None = None) -> None:
    """``reg = op1(op0(src[i], imm0), reg); dst[i] = reg`` along the free elements of each partition."""
    dst = tensor_arg(dst, "dst")
    src = tensor_arg(src, "src")
    pairs = [("dst", dst), ("src", src)]
    check_elementwise_operands(ctx, pairs)
    check_dtype(src, "src", _CUM_DTYPES, " (int32/uint32 are not supported by the ISA)")
    check_dtype(dst, "dst", _CUM_DTYPES, " (int32/uint32 are not supported by the ISA)")
    o0 = arith_op(op0, "op0", "tensor_scalar_cumulative")
    o1 = arith_op(op1, "op1", "tensor_scalar_cumulative", ("add", "subtract", "multiply", "maximum", "minimum"))
    cmd = reduce_cmd_of(reduce_cmd, (ReduceCmd.reset_reduce, ReduceCmd.reduce, ReduceCmd.load_reduce),
                        "tensor_scalar_cumulative")
    p = src.shape[0]
    acc = ctx.vector_acc
    if cmd == ReduceCmd.reset_reduce:
        acc[:p] = REDUCE_IDENTITY[o1.name]
    elif cmd == ReduceCmd.load_reduce:
        if imm1 is None:
            raise NkiValidationError("imm1 (the accumulator's initial value) is required with load_reduce",
                                     operand="imm1", rule="argument")
        acc[:p] = np.broadcast_to(np.asarray(scalar_or_vector(ctx, imm1, "imm1", p), dtype=np.float32),
                                  (p, 1)).reshape(p)
    with IGNORE_ALL():
        a = np.asarray(apply_scalar_op(ctx, o0, read(src).reshape(p, -1).astype(np.float32), imm0, "imm0", p),
                       dtype=np.float32)
        seeded = np.concatenate([acc[:p, None], a], axis=1)
        if o1.name == "subtract":
            out = np.empty_like(a)
            reg = acc[:p].copy()
            for i in range(a.shape[1]):
                reg = a[:, i] - reg
                out[:, i] = reg
        else:
            out = _RED_UFUNC[o1.name].accumulate(seeded, axis=1, dtype=np.float32)[:, 1:]
    acc[:p] = out[:, -1]
    write(ctx, dst, out.reshape(dst.shape))
    operands = [(dst, "dst", "w"), (src, "src", "r")]
    record(ctx, "tensor_scalar_cumulative", "vector", operands, op0=o0.name, op1=o1.name, reduce_cmd=int(cmd))


@instruction("range_select", "vector", min_generation=3)
def range_select(ctx: Any, dst: Any, on_true_tile: Any, comp_op0: Any, comp_op1: Any, bound0: Any, bound1: Any,
                 reduce_cmd: Any = ReduceCmd.reset_reduce, reduce_res: Any = None, reduce_op: Any = None,
                 range_start: int = 0, on_false_value: float = FP32_MIN, name: str | None = None) -> None:
    """Keep ``on_true_tile[p, i]`` where ``comp_op0(range_start+i, bound0[p]) & comp_op1(range_start+i, bound1[p])``,
    else FP32_MIN; max-reduce the result into the Vector accumulators."""
    dst = tensor_arg(dst, "dst")
    src = tensor_arg(on_true_tile, "on_true_tile")
    pairs = [("dst", dst), ("on_true_tile", src)]
    check_elementwise_operands(ctx, pairs)
    if not src.dtype.is_float:
        raise NkiValidationError(f"on_true_tile must have a float dtype, got {src.dtype}", operand="on_true_tile",
                                 rule="dtype")
    c0 = arith_op(comp_op0, "comp_op0", "range_select", _COMPARE)
    c1 = arith_op(comp_op1, "comp_op1", "range_select", _COMPARE)
    ro = arith_op(reduce_op if reduce_op is not None else _max_op(), "reduce_op", "range_select",
                  ("maximum",))
    if not isinstance(on_false_value, int | float | np.number) or np.float32(on_false_value) != np.float32(FP32_MIN):
        raise NkiValidationError(f"on_false_value must be FP32_MIN ({FP32_MIN}) (hardware constraint), got "
                                 f"{on_false_value!r}", operand="on_false_value", rule="argument")
    if isinstance(range_start, bool) or not isinstance(range_start, int | np.integer):
        raise NkiValidationError(f"range_start must be a compile-time int, got {range_start!r}",
                                 operand="range_start", rule="argument")
    cmd = reduce_cmd_of(reduce_cmd, tuple(int(c) for c in ReduceCmd), "range_select")
    p = src.shape[0]
    f = free_size(src)
    if not (0 <= int(range_start) and int(range_start) + f <= 1 << 24):
        raise NkiValidationError(f"range_start + free index must stay within [0, 2^24] for the fp32 comparison, "
                                 f"got up to {int(range_start) + f}", operand="range_start", rule="argument")
    operands = [(dst, "dst", "w"), (src, "on_true_tile", "r")]
    bounds = []
    for role, b in (("bound0", bound0), ("bound1", bound1)):
        if isinstance(b, NkiTensor):
            check_dtype(b, role, (dt.float32,))
            operands.append((b, role, "r"))
        bounds.append(scalar_or_vector(ctx, b, role, p))
    idx = (np.float32(range_start) + np.arange(f, dtype=np.float32))[None, :]
    mask = (c0.binary(idx, bounds[0]) != 0) & (c1.binary(idx, bounds[1]) != 0)
    y = np.where(mask, read(src).reshape(p, -1).astype(np.float32), np.float32(FP32_MIN))
    if dst.dtype.is_float and dst.dtype != dt.float32:
        # documented: a bf16/fp16/fp8 dst gets -inf where the FP32_MIN fill is downcast (not the format's -max)
        write(ctx, dst, np.where(mask, y, np.float32(-np.inf)).reshape(dst.shape))
    else:
        write(ctx, dst, y.reshape(dst.shape))
    acc = ctx.vector_acc
    if cmd in (ReduceCmd.reset, ReduceCmd.reset_reduce):
        acc[:p] = -np.inf
    if cmd in (ReduceCmd.reduce, ReduceCmd.reset_reduce, ReduceCmd.load_reduce):
        acc[:p] = np.maximum(acc[:p], y.max(axis=1))
    if reduce_res is not None:
        write_reduce_res(ctx, reduce_res, acc, p, operands)
    record(ctx, "range_select", "vector", operands, comp_op0=c0.name, comp_op1=c1.name, reduce_op=ro.name,
           reduce_cmd=int(cmd))


def _max_op() -> Op:
    from nkieval.sim.ops import OPS

    return OPS["maximum"]
