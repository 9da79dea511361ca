"""Vector-engine (and engine-selectable) elementwise instructions.

tensor_copy, tensor_tensor, tensor_scalar, memset, tensor_reduce, reciprocal. Arithmetic
operators compute in fp32 and round on output; bitvec operators treat integer elements as
bit patterns (exact, truncated to the destination width); GpSimd int32 arithmetic is exact.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nkieval.sim import dtypes as dt
from nkieval.sim.errors import NkiValidationError
from nkieval.sim.fpstate import IGNORE_ALL
from nkieval.sim.isa.core import (
    check_elementwise_operands,
    check_engine_operands,
    check_free_limit,
    check_not_both_psum,
    check_op_available,
    check_same_free,
    free_size,
    instruction,
    int_value,
    read,
    read_bits,
    read_exact,
    record,
    resolve_engine,
    scalar_or_vector,
    tensor_arg,
    write,
    write_bits,
    write_exact,
)
from nkieval.sim.ops import ARITH, BITVEC, REDUCIBLE, Op, as_op

__all__ = ["check_op_available"]

_INT32 = (dt.int32, dt.uint32)
_INT32_NAMES = frozenset(d.name for d in _INT32)
_BITVEC_BINARY = BITVEC - {"invert"}


def _check_int_operands(op: Op, pairs: list[tuple[str, Any]]) -> None:
    for role, t in pairs:
        if not t.dtype.is_int:
            raise NkiValidationError(f"bitvec op {op.name} needs integer operands; {role} is {t.dtype}",
                                     operand=role, rule="dtype")


@instruction("tensor_copy", "vector")
def tensor_copy(ctx: Any, dst: Any, src: Any, engine: Any = None, name: str | None = None,
                dtype: Any = None) -> None:
    """Copy/cast ``src`` into ``dst``: bit-exact when dtypes match, else through fp32.

    The Scalar engine has no tensor_copy on NeuronCore-v2 (use activation(op=nl.copy)).
    ``dtype=`` is NKI 0.2's output dtype (``tensor_copy(src, dtype=...)`` returned a new tile);
    NKI 0.3+ dropped it, as the output dtype is ``dst``'s. AWS's own current tutorials still pass
    it with ``dst=`` (sometimes naming another dtype than dst's, e.g. the HBM result's, which the
    DMA that follows casts to): it is accepted and the copy writes ``dst``'s dtype; a dtype that
    differs from dst's is reported as a warning (it changes nothing).
    """
    dst = tensor_arg(dst, "dst")
    src = tensor_arg(src, "src")
    if dtype is not None and dt.to_dtype(dtype) != dst.dtype:
        ctx.warn(f"dtype={dt.to_dtype(dtype)} is ignored: since NKI 0.3 tensor_copy writes dst's dtype "
                 f"({dst.dtype}); dtype= was NKI 0.2's output dtype", rule="dtype", instruction="tensor_copy")
    eng = resolve_engine(engine, "vector", ("vector", "scalar", "gpsimd"), "tensor_copy")
    if eng == "scalar" and not ctx.target.has("scalar_tensor_copy"):
        raise NkiValidationError(f"tensor_copy on the Scalar engine needs trn2 or later (target {ctx.target.name}); "
                                 "use activation(op=nl.copy)", operand="engine", rule="generation")
    pairs = [("dst", dst), ("src", src)]
    check_elementwise_operands(ctx, pairs, allow_psum=eng != "gpsimd", engine=eng)
    if src.dtype == dst.dtype and src.data.dtype == dst.data.dtype:
        write_exact(dst, read_exact(src))
    else:
        write(ctx, dst, read(src).reshape(dst.shape))
    record(ctx, "tensor_copy", eng, [(dst, "dst", "w"), (src, "src", "r")])


@instruction("tensor_tensor", "vector")
def tensor_tensor(ctx: Any, dst: Any, data1: Any, data2: Any, op: Any, engine: Any = None,
                  name: str | None = None) -> None:
    """Elementwise ``dst = op(data1, data2)``; same partitions and elements per partition, no broadcast.

    ``op=nl.power`` runs on GpSimd; all-int32/uint32 operands default to GpSimd's exact integer
    math unless an operand is in PSUM (then Vector, through fp32).
    """
    dst = tensor_arg(dst, "dst")
    data1 = tensor_arg(data1, "data1")
    data2 = tensor_arg(data2, "data2")
    op = as_op(op, "tensor_tensor")
    if op.name not in ARITH and op.name not in _BITVEC_BINARY:
        raise NkiValidationError(f"op {op.name} is not a binary ALU operator", operand="op", rule="argument")
    check_op_available(ctx, op, "tensor_tensor", dst=dst)
    all_int32 = dst.dtype.name in _INT32_NAMES and data1.dtype.name in _INT32_NAMES \
        and data2.dtype.name in _INT32_NAMES
    any_psum = dst.alloc.buffer.kind == "psum" or data1.alloc.buffer.kind == "psum" \
        or data2.alloc.buffer.kind == "psum"
    if op.name == "power":
        if any_psum:
            raise NkiValidationError("op=power runs on GpSimd, which cannot access PSUM", operand="op", rule="buffer")
        default = "gpsimd"
    else:
        default = "gpsimd" if all_int32 and not any_psum and op.name not in BITVEC else "vector"
    eng = resolve_engine(engine, default, ("vector", "gpsimd"), "tensor_tensor")
    pairs = [("dst", dst), ("data1", data1), ("data2", data2)]
    check_engine_operands(ctx, pairs, allow_psum=eng != "gpsimd", engine=eng)
    check_not_both_psum(("data1", data1), ("data2", data2))
    check_same_free(pairs)
    check_free_limit(ctx, data1, "data1")
    if op.name in BITVEC:
        _check_int_operands(op, pairs)
        a = read_bits(data1).reshape(dst.shape)
        b = read_bits(data2).reshape(dst.shape)
        write_bits(dst, op.binary(a, b).astype(np.int64))
    elif eng == "gpsimd" and all_int32:
        a = read_bits(data1).reshape(dst.shape)
        b = read_bits(data2).reshape(dst.shape)
        exact = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply}.get(op.name)
        if exact is not None:  # native 32-bit integer ALU: wraps around
            write_bits(dst, exact(a, b))
        else:
            with IGNORE_ALL():
                vals = op.binary(a.astype(np.float64), b.astype(np.float64))
            write(ctx, dst, vals)
    else:
        a = read(data1).reshape(dst.shape)
        b = read(data2).reshape(dst.shape)
        write(ctx, dst, op.binary(a, b))
    record(ctx, "tensor_tensor", eng, [(dst, "dst", "w"), (data1, "data1", "r"),
                                       (data2, "data2", "r")], op=op.name)


def _int_operand(x: Any, role: str, p: int) -> np.ndarray | int:
    """A bitvec scalar operand: an integer, or an integer [P, 1] tensor (bit pattern)."""
    if hasattr(x, "alloc"):
        if not x.dtype.is_int:
            raise NkiValidationError(f"bitvec {role} must be an integer tensor, got {x.dtype}", operand=role,
                                     rule="dtype")
        if x.shape[0] != p or free_size(x) != 1:
            raise NkiValidationError(f"{role} must be a scalar or a [{p}, 1] vector, got {list(x.shape)}",
                                     operand=role, rule="shape-mismatch")
        return read_bits(x).reshape(p, 1)
    if isinstance(x, bool | int | np.integer):
        return int(x)
    raise NkiValidationError(f"bitvec {role} must be an integer, got {x!r}", operand=role, rule="dtype")


@instruction("tensor_scalar", "vector")
def tensor_scalar(ctx: Any, dst: Any, data: Any, op0: Any, operand0: Any, reverse0: bool = False, op1: Any = None,
                  operand1: Any = None, reverse1: bool = False, engine: Any = None, name: str | None = None) -> None:
    """``dst = (data op0 operand0) op1 operand1`` with scalar or [P, 1] operands (fp32, or bits for bitvec)."""
    dst = tensor_arg(dst, "dst")
    data = tensor_arg(data, "data")
    o0 = as_op(op0, "tensor_scalar", "op0")
    o1 = as_op(op1, "tensor_scalar", "op1") if op1 is not None else None
    for o, role in ((o0, "op0"), (o1, "op1")):
        if o is not None:
            check_op_available(ctx, o, "tensor_scalar", role, dst=dst)
    bitvec = o0.name in BITVEC
    if o1 is not None and ((o1.name in BITVEC) != bitvec):
        raise NkiValidationError(f"op0 ({o0.name}) and op1 ({o1.name}) must both be bitvec or both arithmetic",
                                 operand="op1", rule="argument")
    if o1 is None and operand1 is not None:
        raise NkiValidationError("operand1 must be None when op1 is None", operand="operand1", rule="argument")
    eng = resolve_engine(engine, "vector", ("vector", "scalar", "gpsimd"), "tensor_scalar")
    if bitvec and eng != "vector":
        raise NkiValidationError(f"bitvec tensor_scalar runs only on the Vector engine, not {eng}", operand="engine",
                                 rule="argument")
    if eng == "scalar":
        if not ctx.target.has("scalar_tensor_copy"):
            raise NkiValidationError("tensor_scalar on the Scalar engine needs trn2 or later", operand="engine",
                                     rule="generation")
        combo = (o0.name, o1.name if o1 else None)
        if not ctx.target.has("scalar_tensor_scalar_any_ops") and combo not in (("multiply", "add"), ("multiply", None), ("add", None)):
            raise NkiValidationError(f"the trn2 Scalar engine supports tensor_scalar (multiply, add), (multiply,) and "
                                     f"(add,) only, got {combo}", operand="op0", rule="argument")
    if eng == "gpsimd" and o0.name != "rsqrt":
        raise NkiValidationError(f"tensor_scalar on GpSimd supports only op0=rsqrt, got {o0.name}", operand="engine",
                                 rule="argument")
    pairs = [("dst", dst), ("data", data)]
    check_elementwise_operands(ctx, pairs, allow_psum=eng != "gpsimd", engine=eng)
    p = data.shape[0]
    operands = [(dst, "dst", "w"), (data, "data", "r")]
    for role, operand in (("operand0", operand0), ("operand1", operand1)):
        if hasattr(operand, "access"):
            operands.append((operand, role, "r"))

    if bitvec:
        _check_int_operands(o0, pairs)
        v = read_bits(data).reshape(p, -1)
        for o, operand, rev, role in ((o0, operand0, reverse0, "operand0"), (o1, operand1, reverse1, "operand1")):
            if o is None:
                continue
            if o.is_unary:
                v = o.unary(v).astype(np.int64)
                continue
            s = _int_operand(operand, role, p)
            v = (o.binary(s, v) if rev else o.binary(v, s)).astype(np.int64)
        write_bits(dst, v)
    else:
        v = read(data).reshape(p, -1)
        for o, operand, rev, role in ((o0, operand0, reverse0, "operand0"), (o1, operand1, reverse1, "operand1")):
            if o is None:
                continue
            if o.is_unary:
                if operand not in (None, 0, 0.0):
                    raise NkiValidationError(f"unary {o.name} takes no operand; {role} must be None or 0",
                                             operand=role, rule="argument")
                v = o.unary(v)
                continue
            if operand is None:
                raise NkiValidationError(f"{role} is required for binary operator {o.name}", operand=role,
                                         rule="argument")
            s = scalar_or_vector(ctx, operand, role, p)
            v = o.binary(s, v) if rev else o.binary(v, s)
        write(ctx, dst, v)
    record(ctx, "tensor_scalar", eng, operands, op0=o0.name, op1=o1.name if o1 else None)


@instruction("memset", "vector")
def memset(ctx: Any, dst: Any, value: Any, engine: Any = None, name: str | None = None) -> None:
    """Fill ``dst`` with a constant; an integer tensor takes an integer literal (NKI 0.3+)."""
    dst = tensor_arg(dst, "dst")
    eng = resolve_engine(engine, "vector", ("vector", "gpsimd"), "memset")
    check_engine_operands(ctx, [("dst", dst)], allow_psum=eng != "gpsimd", engine=eng)
    if not isinstance(value, bool | int | float | np.number):
        raise NkiValidationError(f"value must be a number, got {type(value).__name__}", operand="value", rule="argument")
    if dst.dtype.is_int and isinstance(value, float | np.floating):
        raise NkiValidationError(f"value {value!r} is a float but dst dtype is {dst.dtype}; use an integer literal",
                                 operand="value", rule="dtype")
    if dst.dtype.name.endswith("_x4") and value != 0:
        raise NkiValidationError("packed x4 dtypes can only be memset to 0", operand="value", rule="dtype")
    write(ctx, dst, np.full((1,) * dst.ndim, value, dtype=np.float64 if dst.dtype.is_int else np.float32))
    record(ctx, "memset", eng, [(dst, "dst", "w")], value=float(value))


def _trailing_axes(axis: Any, nd: int) -> tuple[int, ...]:
    axes = (int_value(axis, "axis"),) if not isinstance(axis, tuple | list) else \
        tuple(int_value(a, "axis") for a in axis)
    axes = tuple(sorted(a + nd if a < 0 else a for a in axes))
    if 0 in axes:
        raise NkiValidationError("cannot reduce along the partition dimension (axis 0); use nc_transpose, a ones "
                                 "matmul or tensor_partition_reduce", operand="axis", rule="argument")
    if not axes or axes != tuple(range(nd - len(axes), nd)):
        raise NkiValidationError(f"axis {axes} must be the trailing contiguous free axes of a {nd}-D tensor "
                                 f"(e.g. {(nd - 1,)} or {tuple(range(1, nd))})", operand="axis", rule="argument")
    return axes


@instruction("tensor_reduce", "vector")
def tensor_reduce(ctx: Any, dst: Any, op: Any, data: Any, axis: Any, negate: bool = False, keepdims: bool = False,
                  name: str | None = None) -> None:
    """Reduce the trailing contiguous free axes of ``data`` (never axis 0); ``negate`` multiplies by -1."""
    dst = tensor_arg(dst, "dst")
    data = tensor_arg(data, "data")
    o = as_op(op, "tensor_reduce")
    if o.name not in REDUCIBLE:
        raise NkiValidationError(f"op {o.name} cannot be used as a reduction", operand="op", rule="argument")
    check_op_available(ctx, o, "tensor_reduce", dst=dst)
    axes = _trailing_axes(axis, data.ndim)
    if negate and o.name in BITVEC:
        raise NkiValidationError("negate is only valid for arithmetic ops", operand="negate", rule="argument")
    pairs = [("dst", dst), ("data", data)]
    check_engine_operands(ctx, pairs)
    check_free_limit(ctx, data, "data")
    p = data.shape[0]
    kept = int(np.prod(data.shape[1:data.ndim - len(axes)], dtype=np.int64))
    if free_size(dst) != kept:
        raise NkiValidationError(f"dst{list(dst.shape)} must hold {kept} element(s) per partition for a reduction "
                                 f"of data{list(data.shape)} over axis {axes}", operand="dst", rule="shape-mismatch")
    if o.name in BITVEC:
        _check_int_operands(o, pairs)
        red = {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor}[o.name]
        write_bits(dst, red.reduce(read_bits(data).reshape(p, kept, -1), axis=2))
    else:
        x = read(data).reshape(p, kept, -1)
        ufunc = {"add": np.add, "multiply": np.multiply, "maximum": np.maximum, "minimum": np.minimum}.get(o.name)
        with IGNORE_ALL():
            if ufunc is np.add and "reduce" in ctx.options.exact:  # (SimOptions.exact: one rounding)
                vals = np.add.reduce(x.astype(np.float64), axis=2).astype(np.float32)
            elif ufunc is not None:
                vals = ufunc.reduce(x, axis=2)
            elif o.name == "subtract":  # a - b - c ... = first - sum(rest)
                vals = x[:, :, 0] - x[:, :, 1:].sum(axis=2, dtype=np.float32)
            else:  # sequential fold for the remaining reducible operators
                vals = x[:, :, 0]
                for j in range(1, x.shape[2]):
                    vals = o.binary(vals, x[:, :, j])
            if negate:
                vals = -np.asarray(vals, dtype=np.float32)
        write(ctx, dst, np.asarray(vals).reshape(dst.shape))
    record(ctx, "tensor_reduce", "vector", [(dst, "dst", "w"), (data, "data", "r")], op=o.name,
           axis=list(axes), negate=bool(negate))


@instruction("reciprocal", "vector")
def reciprocal(ctx: Any, dst: Any, data: Any, name: str | None = None) -> None:
    """``dst = 1 / data`` in fp32 on the Vector engine (more precise than Scalar's activation)."""
    dst = tensor_arg(dst, "dst")
    data = tensor_arg(data, "data")
    pairs = [("dst", dst), ("data", data)]
    check_elementwise_operands(ctx, pairs)
    with np.errstate(divide="ignore", invalid="ignore"):
        write(ctx, dst, (np.float32(1.0) / read(data)).reshape(dst.shape))
    record(ctx, "reciprocal", "vector", [(dst, "dst", "w"), (data, "data", "r")])
