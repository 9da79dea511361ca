"""Vector-engine (and engine-selectable) elementwise instructions."""

from __future__ import annotations

from typing import Any

import numpy as np

from nkieval.sim import dtypes as dt
from nkieval.sim.errors import NkiValidationError
from nkieval.sim.isa.core import (
    check_engine_operands,
    check_free_limit,
    check_not_both_psum,
    check_same_free,
    instruction,
    read,
    record,
    resolve_engine,
    scalar_or_vector,
    tensor_arg,
    write,
)
from nkieval.sim.ops import ARITH, BITVEC, GEN4_ONLY, REDUCIBLE, SIMULATOR_ONLY, Op, as_op


def check_op_available(ctx: Any, op: Op, instruction_name: str) -> None:
    if op.name in GEN4_ONLY and ctx.target.generation < 4:
        raise NkiValidationError(f"op {op.name} needs trn3 (NeuronCore-v4)", operand="op", rule="generation")
    if op.name in SIMULATOR_ONLY:
        mode = ctx.options.simulator_only
        msg = f"nl.{op.name} is not a hardware instruction: it runs in simulation but fails on device"
        if mode == "error":
            raise NkiValidationError(msg, operand="op", rule="simulator-only")
        if mode == "warn":
            ctx.warn(msg, rule="simulator-only", instruction=instruction_name)


def apply_binary(op: Op, a: np.ndarray, b: Any) -> np.ndarray:
    return op.binary(a, b)


@instruction("tensor_copy", "vector")
def tensor_copy(ctx: Any, dst: Any, src: Any, engine: Any = None, name: str | None = None) -> None:
    """Copy/cast ``src`` into ``dst``; bit-exact on Vector/GpSimd when dtypes match."""
    dst = tensor_arg(dst, "dst")
    src = tensor_arg(src, "src")
    eng = resolve_engine(engine, "vector", ("vector", "scalar", "gpsimd"), "tensor_copy")
    if eng == "scalar" and not ctx.target.has("scalar_tensor_copy"):
        raise NkiValidationError("tensor_copy on the Scalar engine needs trn2 or later", operand="engine",
                                 rule="generation")
    pairs = [("dst", dst), ("src", src)]
    check_engine_operands(ctx, pairs, allow_psum=eng != "gpsimd", engine=eng)
    check_same_free(pairs)
    check_free_limit(ctx, src, "src")
    if src.dtype == dst.dtype and eng != "scalar":
        vals = src.data.reshape(dst.shape) if src.shape != dst.shape else src.data
        dst.data[...] = vals
        write_state(dst)
    else:
        write(ctx, dst, read(src))
    record(ctx, "tensor_copy", eng, [dst.access("dst", "w"), src.access("src", "r")])


def write_state(dst: Any) -> None:
    from nkieval.sim.isa.core import flag_view

    a = dst.alloc
    a.written = True
    if a.mm_written is not None:
        flag_view(dst, a.mm_written)[...] = False
        flag_view(dst, a.other_written)[...] = True


_INT32 = (dt.int32, dt.uint32)


@instruction("tensor_tensor", "vector")
def tensor_tensor(ctx: Any, dst: Any, data1: Any, data2: Any, op: Any, engine: Any = None,
                  name: str | None = None) -> None:
    """Elementwise ``dst = op(data1, data2)``; same partitions and elements per partition, no broadcast."""
    dst = tensor_arg(dst, "dst")
    data1 = tensor_arg(data1, "data1")
    data2 = tensor_arg(data2, "data2")
    op = as_op(op, "tensor_tensor")
    check_op_available(ctx, op, "tensor_tensor")
    if op.name not in ARITH and op.name not in BITVEC:
        raise NkiValidationError(f"op {op.name} is not a binary ALU operator", operand="op", rule="argument")
    all_int32 = all(t.dtype in _INT32 for t in (dst, data1, data2))
    any_psum = any(t.alloc.buffer.kind == "psum" for t in (dst, data1, data2))
    default = "gpsimd" if (op.name == "power" or all_int32) and not any_psum else "vector"
    eng = resolve_engine(engine, default, ("vector", "gpsimd"), "tensor_tensor")
    if op.name == "power" and any_psum:
        raise NkiValidationError("op=power runs on GpSimd, which cannot access PSUM", operand="op", rule="buffer")
    pairs = [("dst", dst), ("data1", data1), ("data2", data2)]
    check_engine_operands(ctx, pairs, allow_psum=eng != "gpsimd", engine=eng)
    check_not_both_psum(("data1", data1), ("data2", data2))
    check_same_free(pairs)
    check_free_limit(ctx, data1, "data1")
    if op.name in BITVEC:
        for role, t in pairs:
            if not t.dtype.is_int:
                raise NkiValidationError(f"bitvec op {op.name} needs integer operands; {role} is {t.dtype}",
                                         operand=role, rule="dtype")
    if eng == "gpsimd" and all_int32:
        a = data1.data.astype(np.int64).reshape(dst.shape)
        b = data2.data.astype(np.int64).reshape(dst.shape)
        with np.errstate(all="ignore"):
            vals = op.binary(a.astype(np.float64), b.astype(np.float64)) if op.name not in ("add", "subtract",
                                                                                             "multiply") else \
                {"add": np.add, "subtract": np.subtract, "multiply": np.multiply}[op.name](a, b)
        if op.name in ("add", "subtract", "multiply"):
            vals = (vals & 0xFFFFFFFF).astype(np.uint32).view(np.int32) if dst.dtype == dt.int32 else \
                (vals & 0xFFFFFFFF).astype(np.uint32)
            dst.data[...] = vals.astype(dst.data.dtype)
            write_state(dst)
        else:
            write(ctx, dst, vals)
    else:
        a = read(data1).reshape(dst.shape)
        b = read(data2).reshape(dst.shape)
        write(ctx, dst, op.binary(a, b))
    record(ctx, "tensor_tensor", eng, [dst.access("dst", "w"), data1.access("data1", "r"),
                                       data2.access("data2", "r")], op=op.name)


@instruction("tensor_scalar", "vector")
def tensor_scalar(ctx: Any, dst: Any, data: Any, op0: Any, operand0: Any, reverse0: bool = False, op1: Any = None,
                  operand1: Any = None, reverse1: bool = False, engine: Any = None, name: str | None = None) -> None:
    """``dst = (data op0 operand0) op1 operand1`` with scalar or [P, 1] operands."""
    dst = tensor_arg(dst, "dst")
    data = tensor_arg(data, "data")
    o0 = as_op(op0, "tensor_scalar", "op0")
    o1 = as_op(op1, "tensor_scalar", "op1") if op1 is not None else None
    for o in (o0, o1):
        if o is not None:
            check_op_available(ctx, o, "tensor_scalar")
    if o1 is not None and ((o0.name in BITVEC) != (o1.name in BITVEC)):
        raise NkiValidationError("op0 and op1 must both be bitvec or both arithmetic", operand="op1", rule="argument")
    eng = resolve_engine(engine, "vector", ("vector", "scalar", "gpsimd"), "tensor_scalar")
    if eng == "scalar" and ctx.target.generation == 3:
        combo = (o0.name, o1.name if o1 else None)
        if combo not in (("multiply", "add"), ("multiply", None), ("add", None)):
            raise NkiValidationError(f"the trn2 Scalar engine supports tensor_scalar (multiply, add), (multiply,) and "
                                     f"(add,) only, got {combo}", operand="op0", rule="argument")
    if eng == "gpsimd" and o0.name != "rsqrt":
        raise NkiValidationError("tensor_scalar on GpSimd supports only rsqrt", operand="engine", rule="argument")
    pairs = [("dst", dst), ("data", data)]
    check_engine_operands(ctx, pairs, allow_psum=eng != "gpsimd", engine=eng)
    check_same_free(pairs)
    check_free_limit(ctx, data, "data")
    p = data.shape[0]
    x = read(data).reshape(p, -1)
    accesses = [dst.access("dst", "w"), data.access("data", "r")]

    def step(o: Op, val: np.ndarray, operand: Any, rev: bool, role: str) -> np.ndarray:
        if o.is_unary:
            if operand not in (None, 0, 0.0):
                raise NkiValidationError(f"unary {role}={o.name} takes no operand", operand=role, rule="argument")
            return o.unary(val)
        s = scalar_or_vector(ctx, operand, f"operand{role[-1]}", p)
        if hasattr(operand, "access"):
            accesses.append(operand.access(f"operand{role[-1]}", "r"))
        return o.binary(s, val) if rev else o.binary(val, s)

    v = step(o0, x, operand0, reverse0, "op0")
    if o1 is not None:
        v = step(o1, v, operand1, reverse1, "op1")
    write(ctx, dst, v)
    record(ctx, "tensor_scalar", eng, accesses, op0=o0.name, op1=o1.name if o1 else None)


@instruction("memset", "vector")
def memset(ctx: Any, dst: Any, value: Any, engine: Any = None, name: str | None = None) -> None:
    """Fill ``dst`` with a constant; the value's type must match dst (int literal for int tensors)."""
    dst = tensor_arg(dst, "dst")
    eng = resolve_engine(engine, "vector", ("vector", "gpsimd"), "memset")
    check_engine_operands(ctx, [("dst", dst)], allow_psum=eng != "gpsimd", engine=eng)
    if isinstance(value, bool | int | float | np.number):
        if dst.dtype.is_int and isinstance(value, float | np.floating) and not float(value).is_integer():
            raise NkiValidationError(f"value {value} does not match integer dtype {dst.dtype}", operand="value",
                                     rule="dtype")
        if dst.dtype.name.endswith("_x4") and value != 0:
            raise NkiValidationError("packed x4 dtypes can only be memset to 0", operand="value", rule="dtype")
    else:
        raise NkiValidationError(f"value must be a number, got {type(value).__name__}", operand="value", rule="argument")
    write(ctx, dst, np.full(dst.shape, value, dtype=np.float64 if dst.dtype.is_int else np.float32))
    record(ctx, "memset", eng, [dst.access("dst", "w")], value=float(value))


@instruction("tensor_reduce", "vector")
def tensor_reduce(ctx: Any, dst: Any, op: Any, data: Any, axis: Any, negate: bool = False, keepdims: bool = False,
                  name: str | None = None) -> None:
    """Reduce trailing contiguous free axes of ``data`` (never axis 0); ``negate`` multiplies by -1."""
    dst = tensor_arg(dst, "dst")
    data = tensor_arg(data, "data")
    o = as_op(op, "tensor_reduce")
    if o.name not in REDUCIBLE:
        raise NkiValidationError(f"op {o.name} cannot be used as a reduction", operand="op", rule="argument")
    check_op_available(ctx, o, "tensor_reduce")
    axes = (int(axis),) if isinstance(axis, int | np.integer) else tuple(int(a) for a in axis)
    nd = data.ndim
    axes = tuple(sorted(a + nd if a < 0 else a for a in axes))
    if 0 in axes:
        raise NkiValidationError("cannot reduce along the partition dimension (axis 0); use nc_transpose or "
                                 "tensor_partition_reduce", operand="axis", rule="argument")
    if axes != tuple(range(nd - len(axes), nd)) or any(a >= nd for a in axes):
        raise NkiValidationError(f"axis {axes} must be the trailing contiguous free axes of a {nd}-D tensor "
                                 f"(e.g. {tuple(range(nd - 1, nd))} or {tuple(range(1, nd))})", operand="axis",
                                 rule="argument")
    if negate and o.name in BITVEC:
        raise NkiValidationError("negate is only valid for arithmetic ops", operand="negate", rule="argument")
    pairs = [("dst", dst), ("data", data)]
    check_engine_operands(ctx, pairs)
    check_free_limit(ctx, data, "data")
    x = read(data)
    if o.name in BITVEC:
        acc = x.astype(np.int64)
        red = {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor}[o.name]
        vals = red.reduce(acc, axis=axes).astype(np.float64)
    else:
        ufunc = {"add": np.add, "multiply": np.multiply, "maximum": np.maximum, "minimum": np.minimum,
                 "subtract": np.add}.get(o.name)
        with np.errstate(all="ignore"):
            if ufunc is not None:
                vals = ufunc.reduce(x.astype(np.float32), axis=axes)
                if o.name == "subtract":  # a - b - c ... = first - sum(rest)
                    flat = x.reshape(x.shape[0], -1).astype(np.float32)
                    vals = flat[:, 0] - flat[:, 1:].sum(axis=1)
            else:
                flat = x.reshape(x.shape[0], -1).astype(np.float32)
                vals = flat[:, 0]
                for j in range(1, flat.shape[1]):
                    vals = o.binary(vals, flat[:, j])
        if negate:
            vals = -vals
    vals = np.asarray(vals).reshape(data.shape[0], -1)
    if free_size_of(dst) != vals.shape[1]:
        raise NkiValidationError(f"dst{list(dst.shape)} must hold {vals.shape[1]} element(s) per partition",
                                 operand="dst", rule="shape-mismatch")
    write(ctx, dst, vals)
    record(ctx, "tensor_reduce", "vector", [dst.access("dst", "w"), data.access("data", "r")], op=o.name,
           axis=list(axes), negate=bool(negate))


def free_size_of(t: Any) -> int:
    return t.size // t.shape[0]


@instruction("reciprocal", "vector")
def reciprocal(ctx: Any, dst: Any, data: Any, name: str | None = None) -> None:
    """``dst = 1 / data`` in fp32 on the Vector engine (more precise than Scalar's activation)."""
    dst = tensor_arg(dst, "dst")
    data = tensor_arg(data, "data")
    pairs = [("dst", dst), ("data", data)]
    check_engine_operands(ctx, pairs)
    check_same_free(pairs)
    with np.errstate(divide="ignore", invalid="ignore"):
        write(ctx, dst, np.float32(1.0) / read(data).astype(np.float32))
    record(ctx, "reciprocal", "vector", [dst.access("dst", "w"), data.access("data", "r")])
