"""Fused two-operator Vector-engine instructions: scalar_tensor_tensor, tensor_tensor_scan.

Both take arithmetic operators only, compute in fp32 and round once on output; their two
tensor inputs may not both be in PSUM.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nkieval.sim.isa.core import (
    check_arith_op,
    check_engine_operands,
    check_free_limit,
    check_not_both_psum,
    check_op_available,
    check_same_free,
    instruction,
    read,
    record,
    scalar_or_vector,
    tensor_arg,
    write,
)
from nkieval.sim.ops import as_op
from nkieval.sim.tensor import NkiTensor


def _two_input_checks(ctx: Any, name: str, dst: NkiTensor, inputs: tuple[tuple[str, NkiTensor], ...],
                      op0: Any, op1: Any) -> tuple[Any, Any]:
    """The shared validation of the two-tensor-input Vector instructions; returns (op0, op1) as Ops."""
    o0 = as_op(op0, name, "op0")
    o1 = as_op(op1, name, "op1")
    for o, role in ((o0, "op0"), (o1, "op1")):
        check_arith_op(o, role)
        check_op_available(ctx, o, name, role, dst=dst)
    pairs = [("dst", dst), *inputs]
    check_engine_operands(ctx, pairs)
    check_not_both_psum(*inputs)
    check_same_free(pairs)
    check_free_limit(ctx, inputs[0][1], inputs[0][0])
    return o0, o1


@instruction("scalar_tensor_tensor", "vector")
def scalar_tensor_tensor(ctx: Any, dst: Any, data: Any, op0: Any, operand0: Any, op1: Any, operand1: Any,
                         reverse0: bool = False, reverse1: bool = False, name: str | None = None) -> None:
    """``dst = (data op0 operand0) op1 operand1``: operand0 a scalar or [P, 1], operand1 a full tile."""
    dst = tensor_arg(dst, "dst")
    data = tensor_arg(data, "data")
    operand1 = tensor_arg(operand1, "operand1")
    o0, o1 = _two_input_checks(ctx, "scalar_tensor_tensor", dst, (("data", data), ("operand1", operand1)), op0, op1)
    p = data.shape[0]
    s = scalar_or_vector(ctx, operand0, "operand0", p)
    x = read(data).reshape(p, -1)
    t = o0.binary(s, x) if reverse0 else o0.binary(x, s)
    y = read(operand1).reshape(p, -1)
    write(ctx, dst, (o1.binary(y, t) if reverse1 else o1.binary(t, y)).reshape(dst.shape))
    operands = [(dst, "dst", "w"), (data, "data", "r"), (operand1, "operand1", "r")]
    if hasattr(operand0, "access"):
        operands.append((operand0, "operand0", "r"))
    record(ctx, "scalar_tensor_tensor", "vector", operands, op0=o0.name, op1=o1.name)


@instruction("tensor_tensor_scan", "vector")
def tensor_tensor_scan(ctx: Any, dst: Any, data0: Any, data1: Any, initial: Any, op0: Any, op1: Any,
                       reverse0: bool = False, reverse1: bool = False, name: str | None = None) -> None:
    """Per-partition scan along the (flattened) free dim, carried in fp32.

    ``r[i] = op1(op0(data0[i], r[i-1]), data1[i])`` with ``r[-1] = initial`` (scalar or [P, 1]);
    ``reverse0`` / ``reverse1`` swap the operands of op0 / op1.
    """
    dst = tensor_arg(dst, "dst")
    data0 = tensor_arg(data0, "data0")
    data1 = tensor_arg(data1, "data1")
    o0, o1 = _two_input_checks(ctx, "tensor_tensor_scan", dst, (("data0", data0), ("data1", data1)), op0, op1)
    p = data0.shape[0]
    a = read(data0).reshape(p, -1)
    b = read(data1).reshape(p, -1)
    carry = np.broadcast_to(np.asarray(scalar_or_vector(ctx, initial, "initial", p), dtype=np.float32),
                            (p, 1)).reshape(p).copy()
    out = np.empty_like(a, dtype=np.float32)
    f0, f1 = o0.binary, o1.binary
    for i in range(0 if ctx.dry else a.shape[1]):  # (a record-only run computes no values)
        t = f0(carry, a[:, i]) if reverse0 else f0(a[:, i], carry)
        carry = np.asarray(f1(b[:, i], t) if reverse1 else f1(t, b[:, i]), dtype=np.float32)
        out[:, i] = carry
    write(ctx, dst, out.reshape(dst.shape))
    operands = [(dst, "dst", "w"), (data0, "data0", "r"), (data1, "data1", "r")]
    if hasattr(initial, "access"):
        operands.append((initial, "initial", "r"))
    record(ctx, "tensor_tensor_scan", "vector", operands, op0=o0.name, op1=o1.name)

