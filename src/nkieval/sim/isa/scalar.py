"""Scalar engine (ACT): activation, activation_reduce."""

from __future__ import annotations

from typing import Any

import numpy as np

from nkieval.sim import dtypes as dt
from nkieval.sim.errors import NkiValidationError
from nkieval.sim.fpstate import IGNORE_INVALID
from nkieval.sim.isa.core import (
    accumulate,
    check_elementwise_operands,
    check_reduce_res,
    enum_value,
    instruction,
    read,
    record,
    scalar_or_vector,
    tensor_arg,
    write,
)
from nkieval.sim.isa.enums import reduce_cmd as ReduceCmd
from nkieval.sim.ops import ACTIVATION_RANGES, UNARY, Op, as_op


def activation_function(op: Any, instruction_name: str) -> Op:
    o = as_op(op, instruction_name)
    if o.name not in ACTIVATION_RANGES or o.name not in UNARY:
        raise NkiValidationError(f"op {o.name} is not a Scalar-engine activation function", operand="op",
                                 rule="argument")
    return o


def check_range(ctx: Any, o: Op, x: np.ndarray, instruction_name: str) -> None:
    rng = ACTIVATION_RANGES.get(o.name)
    if rng is None:
        return
    lo, hi = rng
    mag = np.abs(x) if o.name in ("log", "sqrt", "rsqrt", "reciprocal") else x
    with IGNORE_INVALID():
        bad = np.count_nonzero((mag < lo) | (mag > hi)) if o.name not in ("log", "sqrt", "rsqrt") else \
            np.count_nonzero((x < lo) | (x > hi))
    if bad:
        ctx.warn(f"{bad} input value(s) outside the documented valid range [{lo:.6g}, {hi:.6g}] of activation "
                 f"{o.name}; hardware output there is invalid", rule="argument", instruction=instruction_name)


#: the dtypes an activation's bias vector may have
_BIAS_DTYPES = (dt.float32, dt.float16, dt.bfloat16)


def _activate(ctx: Any, name: str, dst: Any, op: Any, data: Any, bias: Any, scale: Any, reduce_op: Any,
              reduce_res: Any, cmd: int) -> None:
    dst = tensor_arg(dst, "dst")
    data = tensor_arg(data, "data")
    o = activation_function(op, name)
    pairs = [("dst", dst), ("data", data)]
    check_elementwise_operands(ctx, pairs, engine="scalar")
    p = data.shape[0]
    operands = [(dst, "dst", "w"), (data, "data", "r")]
    if hasattr(scale, "dtype") and scale.dtype != dt.float32:
        raise NkiValidationError(f"scale must be float32, got {scale.dtype}", operand="scale", rule="dtype")
    s = scalar_or_vector(ctx, scale, "scale", p)
    if hasattr(scale, "access"):
        operands.append((scale, "scale", "r"))
    x = read(data).reshape(p, -1).astype(np.float32) * s
    if bias is not None:
        if not hasattr(bias, "access") and not ctx.target.has("scalar_bias_scalar"):
            raise NkiValidationError("bias must be a [P, 1] vector on trn1 (scalar bias needs trn2+)", operand="bias",
                                     rule="generation")
        if hasattr(bias, "dtype") and (bias.dtype not in _BIAS_DTYPES or getattr(bias.dtype, "tf32", False)):
            # (NKI's error activation-bias-invalid-type; tfloat32 shares float32's storage, hence its own test)
            raise NkiValidationError(f"bias must be float32, float16 or bfloat16, got {bias.dtype}", operand="bias",
                                     rule="dtype")
        if o.name == "reciprocal" and not ctx.target.has("reciprocal_bias"):
            raise NkiValidationError("activation(op=reciprocal) cannot take a bias on trn1", operand="bias",
                                     rule="generation")
        b = scalar_or_vector(ctx, bias, "bias", p)
        if hasattr(bias, "access"):
            operands.append((bias, "bias", "r"))
        x = x + b
    check_range(ctx, o, x, name)
    y = o.unary(x)
    write(ctx, dst, y)
    if reduce_op is not None and as_op(reduce_op, name, "reduce_op").name != "add":
        raise NkiValidationError(f"reduce_op must be nl.add, got {as_op(reduce_op, name, 'reduce_op').name}",
                                 operand="reduce_op", rule="argument")
    if cmd not in (ReduceCmd.idle, ReduceCmd.reset, ReduceCmd.reduce, ReduceCmd.reset_reduce):
        raise NkiValidationError(f"reduce_cmd {ReduceCmd(cmd).name} is not supported by {name}", operand="reduce_cmd",
                                 rule="argument")
    accumulate(ctx.scalar_acc, p, cmd, y, "add")
    if reduce_res is not None:
        rr = check_reduce_res(reduce_res, p)
        write(ctx, rr, ctx.scalar_acc[:p].reshape(rr.shape))
        operands.append((rr, "reduce_res", "w"))
    record(ctx, name, "scalar", operands, op=o.name, reduce_cmd=int(cmd), has_bias=bias is not None,
           reduce=reduce_res is not None)


@instruction("activation", "scalar")
def activation(ctx: Any, dst: Any, op: Any, data: Any, bias: Any = None, scale: Any = 1.0, reduce_op: Any = None,
               reduce_res: Any = None, reduce_cmd: Any = ReduceCmd.idle, name: str | None = None) -> None:
    """``dst = op(data * scale + bias)``, optionally accumulating a free-dim sum in the Scalar registers."""
    _activate(ctx, "activation", dst, op, data, bias, scale, reduce_op, reduce_res,
              enum_value(reduce_cmd, ReduceCmd, "reduce_cmd"))


@instruction("activation_reduce", "scalar")
def activation_reduce(ctx: Any, dst: Any, op: Any, data: Any, reduce_op: Any, reduce_res: Any, bias: Any = None,
                      scale: Any = 1.0, name: str | None = None) -> None:
    """activation with reset+reduce of the output over all free dims into ``reduce_res`` [P, 1]."""
    if reduce_res is None:
        raise NkiValidationError("reduce_res is required", operand="reduce_res", rule="argument")
    _activate(ctx, "activation_reduce", dst, op, data, bias, scale, reduce_op, reduce_res, int(ReduceCmd.reset_reduce))
