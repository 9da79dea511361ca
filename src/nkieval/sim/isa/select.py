"""Predicated Vector-engine instructions: tensor_copy_predicated, select_reduce.

A predicate element is true when its bit pattern is non-zero. ``tensor_copy_predicated``
leaves unselected ``dst`` elements untouched (bit-exact copy of the selected ones);
``select_reduce`` picks between a tile and a scalar/[P, 1] value and can fold the row maximum
into the Vector engine's accumulator registers (``reduce_cmd``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nkieval.sim import dtypes as dt
from nkieval.sim.errors import NkiValidationError
from nkieval.sim.isa.core import (
    accumulate,
    check_dtype,
    check_engine_operands,
    check_free_limit,
    check_not_both_psum,
    check_reduce_res,
    check_same_free,
    instruction,
    mark_written,
    read,
    read_bits,
    read_exact,
    record,
    scalar_or_vector,
    tensor_arg,
    write,
)
from nkieval.sim.isa.enums import reduce_cmd as ReduceCmd
from nkieval.sim.ops import as_op

COPY_PREDICATE_DTYPES = (dt.uint8, dt.uint16, dt.uint32)
SELECT_PREDICATE_DTYPES = (dt.int8, dt.uint8, dt.int16, dt.uint16)


def _bool_as_uint8(predicate: Any) -> Any:
    """A bool predicate (a comparison's result, NumPy ``bool_`` inputs) is a 1-byte 0/1 integer tile: read as uint8."""
    return predicate.view(dt.uint8) if predicate.dtype == dt.bool_ else predicate


def _mask(predicate: Any, shape: tuple[int, ...], reverse: bool) -> np.ndarray:
    m = read_bits(predicate).reshape(shape) != 0
    return ~m if reverse else m


@instruction("tensor_copy_predicated", "vector")
def tensor_copy_predicated(ctx: Any, dst: Any, src: Any, predicate: Any, reverse_pred: bool = False,
                           name: str | None = None) -> None:
    """Where ``predicate != 0`` (inverted by ``reverse_pred``) copy ``src`` (tile or number) into ``dst``."""
    dst = tensor_arg(dst, "dst")
    predicate = _bool_as_uint8(tensor_arg(predicate, "predicate"))
    check_dtype(predicate, "predicate", COPY_PREDICATE_DTYPES)
    pairs = [("dst", dst), ("predicate", predicate)]
    is_tensor = hasattr(src, "alloc")
    if is_tensor:
        src = tensor_arg(src, "src")
        pairs.append(("src", src))
    check_engine_operands(ctx, pairs)
    check_same_free(pairs)
    check_free_limit(ctx, predicate, "predicate")
    mask = _mask(predicate, dst.shape, reverse_pred)
    operands = [(dst, "dst", "rw"), (predicate, "predicate", "r")]
    if is_tensor:
        check_not_both_psum(("src", src), ("predicate", predicate))
        if src.dtype != dst.dtype:
            raise NkiValidationError(f"src dtype {src.dtype} must equal dst dtype {dst.dtype}", operand="src",
                                     rule="dtype")
        vals = read_exact(src).reshape(dst.shape)
        operands.append((src, "src", "r"))
    elif isinstance(src, bool | int | float | np.number):
        is_float = isinstance(src, float | np.floating)
        if is_float != dst.dtype.is_float:
            raise NkiValidationError(f"scalar src {src!r} is {'a float' if is_float else 'an integer'} but dst dtype "
                                     f"is {dst.dtype}", operand="src", rule="dtype")
        vals = np.broadcast_to(dt.cast(np.asarray(src, dtype=np.float64), dst.dtype,
                                       fp8_overflow=ctx.options.fp8_overflow, precise=ctx.options.precise_fp),
                               dst.shape)
    else:
        raise NkiValidationError(f"src must be a tensor or a number, got {type(src).__name__}", operand="src",
                                 rule="argument")
    dst.data[mask] = vals[mask]
    mark_written(dst, matmul=False)
    record(ctx, "tensor_copy_predicated", "vector", operands, reverse_pred=bool(reverse_pred),
           scalar_src=not is_tensor)


@instruction("select_reduce", "vector")
def select_reduce(ctx: Any, dst: Any, predicate: Any, on_true: Any, on_false: Any, reduce_res: Any = None,
                  reduce_cmd: Any = ReduceCmd.idle, reduce_op: Any = None, reverse_pred: bool = False,
                  name: str | None = None) -> None:
    """``dst = where(predicate, on_true, on_false)``; the row max can accumulate in the Vector registers."""
    dst = tensor_arg(dst, "dst")
    predicate = tensor_arg(predicate, "predicate")
    on_true = tensor_arg(on_true, "on_true")
    predicate = _bool_as_uint8(predicate)
    check_dtype(predicate, "predicate", SELECT_PREDICATE_DTYPES)
    if on_true.dtype.tf32 or on_true.dtype in (dt.int32, dt.uint32):
        raise NkiValidationError(f"on_true dtype {on_true.dtype} is not supported (not tfloat32, int32 or uint32)",
                                 operand="on_true", rule="dtype")
    if reduce_op is not None and as_op(reduce_op, "select_reduce", "reduce_op").name != "maximum":
        raise NkiValidationError("reduce_op supports only nl.maximum", operand="reduce_op", rule="argument")
    pairs = [("dst", dst), ("predicate", predicate), ("on_true", on_true)]
    check_engine_operands(ctx, pairs)
    check_not_both_psum(("on_true", on_true), ("predicate", predicate))
    check_same_free(pairs)
    check_free_limit(ctx, on_true, "on_true")
    p = on_true.shape[0]
    cmd = int(reduce_cmd)
    if cmd not in (ReduceCmd.idle, ReduceCmd.reduce, ReduceCmd.reset_reduce, ReduceCmd.reset):
        raise NkiValidationError(f"reduce_cmd {ReduceCmd(cmd).name} is not supported by select_reduce",
                                 operand="reduce_cmd", rule="argument")
    rr = check_reduce_res(reduce_res, p) if reduce_res is not None else None
    if rr is not None and not rr.dtype.is_float:
        raise NkiValidationError(f"reduce_res dtype must be a float type, got {rr.dtype}", operand="reduce_res",
                                 rule="dtype")
    mask = _mask(predicate, (p, on_true.size // p), reverse_pred)
    f = scalar_or_vector(ctx, on_false, "on_false", p)
    res = np.where(mask, read(on_true).reshape(p, -1), f).astype(np.float32)
    write(ctx, dst, res.reshape(dst.shape))
    accumulate(ctx.vector_acc, p, cmd, res, "maximum")
    operands = [(dst, "dst", "w"), (predicate, "predicate", "r"), (on_true, "on_true", "r")]
    if hasattr(on_false, "access"):
        operands.append((on_false, "on_false", "r"))
    if rr is not None:
        if cmd == ReduceCmd.idle:
            ctx.warn("reduce_res with reduce_cmd=idle reads the Vector accumulator registers without reducing this "
                     "instruction's output; use reduce_cmd=reset_reduce", rule="argument",
                     instruction="select_reduce")
        write(ctx, rr, ctx.vector_acc[:p].reshape(rr.shape))
        operands.append((rr, "reduce_res", "w"))
    record(ctx, "select_reduce", "vector", operands, reduce_cmd=cmd, reverse_pred=bool(reverse_pred),
           reduce=rr is not None)
