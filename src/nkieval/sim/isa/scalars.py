"""``NkiScalar``: one device integer, ``nisa.scalar_load`` / ``nisa.scalar_store`` (NKI 0.7+).

An ``NkiScalar`` holds one int32 or int64 value read from a 1x1 tile at run time. On hardware the
arithmetic on it is traced into sequencer instructions; the simulator evaluates it now, at the
scalar's fixed width (int32 wraps, it never widens). What the documentation forbids is refused:

* ``scalar_load`` / ``scalar_store`` take a 1x1 SBUF or HBM tensor of dtype int32 or int64
  (unsigned dtypes refused); ``scalar_store`` needs an ``NkiScalar`` of the tile's width;
* operands of ``+ - *`` are Python ints or scalars of the same dtype; int64 has only ``+ - *``;
* int32 comparisons are traced but their result cannot be used (any use raises); int64
  comparisons are refused when written;
* a scalar is not a Python int (``int()``, ``range()``, ``if``, indexing raise);
* as ``scalar_offset`` an int64 scalar may address HBM only; as a ``fori_loop`` bound only int32.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nkieval.sim.device_values import _WIDTH, NkiScalar
from nkieval.sim.errors import NkiValidationError
from nkieval.sim.isa.core import check_buffer, instruction, read_bits, record, tensor_arg, write_bits
from nkieval.sim.tensor import NkiTensor


def _one_int_tile(t: NkiTensor, role: str) -> None:
    check_buffer(t, role, ("sbuf", "hbm"), "scalars load from and store to a 1x1 SBUF or HBM tile")
    if t.size != 1:
        raise NkiValidationError(f"{role} must be a 1x1 tensor, got {list(t.shape)}", operand=role,
                                 rule="shape-mismatch")
    if t.dtype.name not in _WIDTH:
        hint = " (unsigned dtypes are not accepted; use the signed dtype of the same width)" \
            if t.dtype.name.startswith("uint") else ""
        raise NkiValidationError(f"{role} dtype must be int32 or int64, got {t.dtype}{hint}", operand=role,
                                 rule="dtype")


@instruction("scalar_load", "sync")
def scalar_load(ctx: Any, src: Any) -> NkiScalar:
    """Read the one element of a 1x1 int32/int64 SBUF or HBM tensor into an ``NkiScalar``."""
    t = tensor_arg(src, "src")
    _one_int_tile(t, "src")
    v = int(np.asarray(read_bits(t)).reshape(-1)[0])
    record(ctx, "scalar_load", "sync", [(t, "src", "r")])
    return NkiScalar(v, t.dtype)


@instruction("scalar_store", "sync")
def scalar_store(ctx: Any, dst: Any, value: Any) -> None:
    """Write an ``NkiScalar`` into a 1x1 int32/int64 SBUF or HBM tensor of the same width."""
    t = tensor_arg(dst, "dst")
    _one_int_tile(t, "dst")
    if not isinstance(value, NkiScalar):
        raise NkiValidationError(f"value must be an NkiScalar, got {type(value).__name__} (write a compile-time "
                                 "constant with nisa.memset)", operand="value", rule="argument")
    v = value.get("value")
    if value.dtype != t.dtype:
        raise NkiValidationError(f"value is an {value.dtype} scalar but dst is {t.dtype}; store at the scalar's own "
                                 "width", operand="dst", rule="dtype")
    write_bits(t, np.full(t.shape, v, dtype=np.int64))  # exact at either width
    record(ctx, "scalar_store", "sync", [(t, "dst", "w")])


__all__ = ["NkiScalar", "scalar_load", "scalar_store"]
