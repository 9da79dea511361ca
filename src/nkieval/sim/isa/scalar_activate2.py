"""activate2 (NeuronCore-v4 Scalar engine): ``op((data op0 imm0) op1 imm1)`` with an optional reduction.

The tensor-scalar stage allows only the six documented (op0, op1) pairs; the reduction
uses the Scalar engine's accumulators shared with ``activation`` (``ctx.scalar_acc``),
reset to the reduce operator's identity. ``nl.prelu`` uses ``relu_param`` as its slope.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nkieval.sim.errors import NkiValidationError
from nkieval.sim.fpstate import IGNORE_ALL
from nkieval.sim.isa.core import (
    check_elementwise_operands,
    instruction,
    read,
    record,
    scalar_or_vector,
    tensor_arg,
    write,
)
from nkieval.sim.isa.enums import reduce_cmd as ReduceCmd
from nkieval.sim.isa.scalar import activation_function, check_range
from nkieval.sim.isa.vector_accumulate import reduce_cmd_of, write_reduce_res
from nkieval.sim.ops import REDUCE_IDENTITY, as_op

_PAIRS = {("multiply", "add"), ("multiply", "subtract"), ("multiply", "bypass"), ("add", "bypass"),
          ("subtract", "bypass"), ("bypass", "bypass")}
_REDUCE = {"add": np.add, "maximum": np.maximum, "minimum": np.minimum}


def _abs_pick(bigger: bool):
    def pick(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.where((np.abs(a) >= np.abs(b)) if bigger else (np.abs(a) <= np.abs(b)), a, b)

    return pick


def _reduce(name: str, acc: np.ndarray, y: np.ndarray) -> np.ndarray:
    if name in _REDUCE:
        return _REDUCE[name](acc, _REDUCE[name].reduce(y, axis=1))
    pick = _abs_pick(name == "abs_max")
    out = acc.copy()
    for j in range(y.shape[1]):
        out = pick(out, y[:, j])
    return out


@instruction("activate2", "scalar", min_generation=4)
def activate2(ctx: Any, dst: Any, op: Any, data: Any, imm0: Any, imm1: Any, op0: Any, op1: Any,
              relu_param: Any = 0.0, reverse0: bool = False, reverse1: bool = False, reduce_op: Any = None,
              reduce_res: Any = None, reduce_cmd: Any = ReduceCmd.idle, name: str | None = None) -> None:
    """``dst = op((data op0 imm0) op1 imm1)`` (reverse flags swap operands), then an optional free-dim
    reduction (add/max/min/abs_max/abs_min) into the Scalar engine accumulators."""
    dst = tensor_arg(dst, "dst")
    data = tensor_arg(data, "data")
    pairs = [("dst", dst), ("data", data)]
    check_elementwise_operands(ctx, pairs, engine="scalar")
    fn = as_op(op, "activate2")
    if fn.name != "prelu":
        fn = activation_function(op, "activate2")
    o0, o1 = as_op(op0, "activate2", "op0"), as_op(op1, "activate2", "op1")
    if (o0.name, o1.name) not in _PAIRS:
        raise NkiValidationError(f"(op0, op1) = ({o0.name}, {o1.name}) is not supported; use one of "
                                 f"{sorted(_PAIRS)}", operand="op0", rule="argument")
    if reverse0 and o0.name == "bypass":
        raise NkiValidationError("reverse0 requires op0 to be set", operand="reverse0", rule="argument")
    if reverse1 and o1.name == "bypass":
        raise NkiValidationError("reverse1 requires op1 to be set", operand="reverse1", rule="argument")
    if hasattr(imm0, "dtype") and hasattr(imm1, "dtype") and imm0.dtype != imm1.dtype:
        raise NkiValidationError(f"imm0 ({imm0.dtype}) and imm1 ({imm1.dtype}) must have the same dtype",
                                 operand="imm1", rule="dtype")
    cmd = reduce_cmd_of(reduce_cmd, tuple(int(c) for c in ReduceCmd if c != ReduceCmd.load_reduce), "activate2")
    rname = None
    if reduce_op is not None:
        rname = as_op(reduce_op, "activate2", "reduce_op").name
        if rname not in ("add", "maximum", "minimum", "abs_max", "abs_min"):
            raise NkiValidationError(f"reduce_op {rname} is not supported; use add, maximum, minimum, abs_max or "
                                     "abs_min", operand="reduce_op", rule="argument")
    elif cmd in (ReduceCmd.reduce, ReduceCmd.reset_reduce):
        raise NkiValidationError("reduce_cmd reduce/reset_reduce needs a reduce_op", operand="reduce_op",
                                 rule="argument")
    p = data.shape[0]
    operands = [(dst, "dst", "w"), (data, "data", "r")]
    x = read(data).reshape(p, -1).astype(np.float32)
    with IGNORE_ALL():
        for o, imm, rev, role in ((o0, imm0, reverse0, "imm0"), (o1, imm1, reverse1, "imm1")):
            if o.name == "bypass":
                continue
            s = scalar_or_vector(ctx, imm, role, p)
            if hasattr(imm, "access"):
                operands.append((imm, role, "r"))
            x = o.binary(s, x) if rev else o.binary(x, s)
        x = np.asarray(x, dtype=np.float32)
        if fn.name == "prelu":
            alpha = scalar_or_vector(ctx, relu_param, "relu_param", p)
            y = np.where(x >= 0, x, x * alpha).astype(np.float32)
        else:
            check_range(ctx, fn, x, "activate2")
            y = np.asarray(fn.unary(x), dtype=np.float32)
    write(ctx, dst, y.reshape(dst.shape))
    acc = ctx.scalar_acc
    if cmd in (ReduceCmd.reset, ReduceCmd.reset_reduce):
        acc[:p] = REDUCE_IDENTITY.get(rname or "add", 0.0)
    if cmd in (ReduceCmd.reduce, ReduceCmd.reset_reduce) and rname is not None:
        with IGNORE_ALL():
            acc[:p] = _reduce(rname, acc[:p], y)
    if reduce_res is not None:
        write_reduce_res(ctx, reduce_res, acc, p, operands)
    record(ctx, "activate2", "scalar", operands, op=fn.name, op0=o0.name, op1=o1.name, reduce_cmd=int(cmd))
