"""GpSimd engine (POOL) instructions: iota, affine_select, tensor_partition_reduce.

GpSimd never touches PSUM. iota and affine_select evaluate the affine expression
``offset + p*channel_multiplier + Σ step_k * i_k`` over a pattern of up to 4 [step, count]
pairs in int32 arithmetic.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nkieval.sim.errors import NkiValidationError
from nkieval.sim.fpstate import IGNORE_ALL
from nkieval.sim.isa.core import (
    check_engine_operands,
    check_max_free_dims,
    check_same_free,
    free_size,
    instruction,
    int_value,
    read,
    read_bits,
    record,
    scalar_or_vector,
    tensor_arg,
    write,
    write_bits,
)
from nkieval.sim.ops import COMPARE, Op, as_op


def pattern_values(pattern: Any, offset: int, channel_multiplier: int, p: int, role: str = "pattern") -> np.ndarray:
    """``offset + p*channel_multiplier + Σ stride_k * i_k`` over a [[stride, count], ...] pattern, int64 [P, F]."""
    try:
        pat = [(int(s), int(n)) for s, n in pattern]
    except (TypeError, ValueError):
        raise NkiValidationError(f"{role} must be a list of [step, count] pairs, got {pattern!r}", operand=role,
                                 rule="argument") from None
    if not pat or len(pat) > 4:
        raise NkiValidationError(f"{role} needs 1 to 4 [step, count] pairs, got {len(pat)}", operand=role,
                                 rule="argument")
    if any(n <= 0 for _, n in pat):
        raise NkiValidationError(f"{role} counts must be positive, got {pat}", operand=role, rule="argument")
    free = np.zeros([n for _, n in pat], dtype=np.int64)
    for k, (s, n) in enumerate(pat):
        shape = [1] * len(pat)
        shape[k] = n
        free = free + (np.arange(n, dtype=np.int64) * s).reshape(shape)
    vals = int_value(offset, "offset") + np.arange(p, dtype=np.int64)[:, None] * \
        int_value(channel_multiplier, "channel_multiplier") + free.reshape(1, -1)
    return (vals + 2**31) % 2**32 - 2**31  # int32 wrap-around


def _pattern_for(dst: Any, pattern: Any, offset: int, channel_multiplier: int) -> np.ndarray:
    vals = pattern_values(pattern, offset, channel_multiplier, dst.shape[0])
    if vals.shape[1] != free_size(dst):
        raise NkiValidationError(f"pattern covers {vals.shape[1]} elements per partition but dst{list(dst.shape)} has "
                                 f"{free_size(dst)}", operand="pattern", rule="shape-mismatch")
    return vals


@instruction("iota", "gpsimd")
def iota(ctx: Any, dst: Any, pattern: Any, offset: int = 0, channel_multiplier: int = 0, name: str | None = None) -> None:
    """``dst[p, ...] = offset + p*channel_multiplier + Σ step_k * i_k`` (int32 math, cast to dst)."""
    dst = tensor_arg(dst, "dst")
    check_engine_operands(ctx, [("dst", dst)], allow_psum=False, engine="gpsimd")
    vals = _pattern_for(dst, pattern, offset, channel_multiplier)
    write(ctx, dst, vals.astype(np.float64).reshape(dst.shape))
    record(ctx, "iota", "gpsimd", [(dst, "dst", "w")], offset=int(offset),
           channel_multiplier=int(channel_multiplier))


_PREDICATES: dict[Any, np.ndarray] = {}  # affine_select's predicate by its exact arguments (_affine_predicate)
_PREDICATES_MAX_BYTES = 16 << 20  # all kept predicates together; the cache starts afresh past it
_PREDICATE_BYTES = [0]  # bytes kept now (an upper bound: a key stored twice by two threads counts twice)


def _affine_predicate(dst: Any, pattern: Any, offset: Any, channel_multiplier: Any, o: Op) -> np.ndarray:
    """``cmp_op(affine_value, 0)`` as a read-only bool [P, F] array.

    Causal and sliding-window masks issue the same affine_select on every tile of a loop, so the predicate is
    kept by the arguments it is made of: the pattern as ``pattern_values`` reads it, and ``offset`` and
    ``channel_multiplier`` with their types (``True`` and ``1`` are equal keys but not equally valid), so a
    hit stands only for arguments that were checked and accepted before."""
    try:
        key: Any = (tuple((int(s), int(n)) for s, n in pattern), offset, type(offset), channel_multiplier,
                    type(channel_multiplier), dst.shape[0], free_size(dst), o.name)
        hit = _PREDICATES.get(key)
    except (TypeError, ValueError):  # a malformed or unhashable argument: the checks below say which
        key = hit = None
    if hit is not None:
        return hit
    aff = _pattern_for(dst, pattern, offset, channel_multiplier)
    pred = o.binary(aff.astype(np.float64), np.float64(0)).astype(bool)
    pred.flags.writeable = False
    if key is not None and pred.nbytes <= _PREDICATES_MAX_BYTES:
        if _PREDICATE_BYTES[0] + pred.nbytes > _PREDICATES_MAX_BYTES:
            _PREDICATES.clear()
            _PREDICATE_BYTES[0] = 0
        _PREDICATES[key] = pred
        _PREDICATE_BYTES[0] += pred.nbytes
    return pred


@instruction("affine_select", "gpsimd")
def affine_select(ctx: Any, dst: Any, pattern: Any, channel_multiplier: int, on_true_tile: Any, on_false_value: Any,
                  cmp_op: Any = None, offset: int = 0, name: str | None = None) -> None:
    """``dst = where(cmp_op(affine_value, 0), on_true_tile, on_false_value)``; causal masks."""
    dst = tensor_arg(dst, "dst")
    on_true_tile = tensor_arg(on_true_tile, "on_true_tile")
    o = as_op(cmp_op, "affine_select", "cmp_op") if cmp_op is not None else as_op(np.equal, "affine_select")
    if o.name not in COMPARE:
        raise NkiValidationError(f"cmp_op {o.name} is not a comparison operator ({', '.join(sorted(COMPARE))})",
                                 operand="cmp_op", rule="argument")
    pairs = [("dst", dst), ("on_true_tile", on_true_tile)]
    check_engine_operands(ctx, pairs, allow_psum=False, engine="gpsimd")
    check_same_free(pairs)
    if not isinstance(on_false_value, bool | int | float | np.number):
        raise NkiValidationError(f"on_false_value must be an fp32 scalar, got {type(on_false_value).__name__}",
                                 operand="on_false_value", rule="argument")
    p = dst.shape[0]
    pred = _affine_predicate(dst, pattern, offset, channel_multiplier, o)
    f = scalar_or_vector(ctx, on_false_value, "on_false_value", p)
    res = np.where(pred, read(on_true_tile).reshape(p, -1), f)
    write(ctx, dst, res.reshape(dst.shape))
    record(ctx, "affine_select", "gpsimd", [(dst, "dst", "w"), (on_true_tile, "on_true_tile", "r")],
           cmp_op=o.name, offset=int(offset), channel_multiplier=int(channel_multiplier))


_PARTITION_REDUCE = ("add", "maximum", "mean", "bitwise_or", "bitwise_and", "bitwise_xor")


def _partition_reduce_op(op: Any) -> str:
    """The operator name; ``nl.mean`` (a function, not an ALU operator) means the average."""
    if isinstance(op, Op):
        nm = op.name
    elif getattr(op, "__name__", "") in ("mean", "average"):
        nm = "mean"
    else:
        nm = as_op(op, "tensor_partition_reduce").name
    if nm not in _PARTITION_REDUCE:
        raise NkiValidationError(f"op {nm} is not supported; use one of add, mean, maximum, bitwise_or, bitwise_and, "
                                 "bitwise_xor", operand="op", rule="argument")
    return nm


@instruction("tensor_partition_reduce", "gpsimd")
def tensor_partition_reduce(ctx: Any, dst: Any, op: Any, data: Any, name: str | None = None) -> None:
    """Reduce ``data`` across its partitions: dst[0, ...] = op over p of data[p, ...] (SBUF only)."""
    dst = tensor_arg(dst, "dst")
    data = tensor_arg(data, "data")
    nm = _partition_reduce_op(op)
    check_engine_operands(ctx, [("data", data)], allow_psum=False, engine="gpsimd")
    check_engine_operands(ctx, [("dst", dst)], allow_psum=False, engine="gpsimd")
    check_max_free_dims(data, "data", 4)
    if dst.shape[0] != 1:
        raise NkiValidationError(f"dst{list(dst.shape)} must have 1 partition (the reduction across "
                                 f"{data.shape[0]} partitions)", operand="dst", rule="shape-mismatch")
    check_same_free([("dst", dst), ("data", data)])
    if nm.startswith("bitwise"):
        for role, t in (("dst", dst), ("data", data)):
            if not t.dtype.is_int:
                raise NkiValidationError(f"bitvec op {nm} needs integer operands; {role} is {t.dtype}", operand=role,
                                         rule="dtype")
        red = {"bitwise_or": np.bitwise_or, "bitwise_and": np.bitwise_and, "bitwise_xor": np.bitwise_xor}[nm]
        write_bits(dst, red.reduce(read_bits(data).reshape(data.shape[0], -1), axis=0).reshape(dst.shape))
    else:
        x = read(data).reshape(data.shape[0], -1)
        with IGNORE_ALL():
            if nm == "add":
                v = x.sum(axis=0, dtype=np.float32)
            elif nm == "maximum":
                v = x.max(axis=0)
            else:
                v = x.sum(axis=0, dtype=np.float32) / np.float32(x.shape[0])
        write(ctx, dst, np.asarray(v, dtype=np.float32).reshape(dst.shape))
    record(ctx, "tensor_partition_reduce", "gpsimd", [(dst, "dst", "w"), (data, "data", "r")], op=nm)
