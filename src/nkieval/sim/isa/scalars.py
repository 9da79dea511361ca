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

import functools
from typing import Any

import numpy as np

from nkieval.sim import dtypes as dt
from nkieval.sim.context import kernel_recorder
from nkieval.sim.errors import NkiValidationError
from nkieval.sim.isa.core import check_buffer, instruction, read_bits, record, tensor_arg, write_bits
from nkieval.sim.tensor import NkiTensor

_WIDTH = {"int32": 32, "int64": 64}


def _wrap(v: int, bits: int) -> int:
    m = (1 << bits) - 1
    v = int(v) & m
    return v - (1 << bits) if v >= 1 << (bits - 1) else v


class NkiScalar:
    """A device integer of fixed width (``dtype`` is ``nl.int32`` or ``nl.int64``)."""

    __slots__ = ("_value", "dtype", "is_comparison")

    def __init__(self, state: Any, dtype: Any = None, is_comparison: bool = False) -> None:
        d = dt.int32 if dtype is None else dt.to_dtype(dtype)
        if d.name not in _WIDTH:
            raise NkiValidationError(f"an NkiScalar is int32 or int64, not {d}", instruction="NkiScalar",
                                     operand="dtype", rule="dtype")
        self.dtype = d
        self.is_comparison = bool(is_comparison)
        self._value = _wrap(int(state), _WIDTH[d.name])

    @property
    def bits(self) -> int:
        return _WIDTH[self.dtype.name]

    def get(self, role: str = "scalar") -> int:
        """The value, for the simulator's own use (offsets, loop bounds, stores)."""
        if self.is_comparison:
            raise NkiValidationError(f"{role} is the result of an NkiScalar comparison; comparisons are traced but "
                                     "their result cannot be used (no branch or select on a scalar condition)",
                                     operand=role, rule="argument")
        return self._value

    # -- arithmetic ------------------------------------------------------------------------
    def _other(self, other: Any, op: str) -> int | None:
        self.get("left operand")
        if isinstance(other, NkiScalar):
            if other.dtype != self.dtype:
                raise NkiValidationError(f"NkiScalar {op}: operand dtypes differ ({self.dtype} and {other.dtype}); "
                                         "a scalar's width is fixed at scalar_load", operand="right operand",
                                         rule="dtype")
            return other.get("right operand")
        if isinstance(other, int | np.integer) and not isinstance(other, bool):
            return int(other)
        return None

    def _arith(self, other: Any, op: str, fn: Any, reflected: bool = False) -> Any:
        o = self._other(other, op)
        if o is None:
            return NotImplemented
        a, b = (o, self._value) if reflected else (self._value, o)
        return NkiScalar(fn(a, b), self.dtype)

    def __add__(self, o: Any) -> Any:
        return self._arith(o, "+", lambda a, b: a + b)

    def __radd__(self, o: Any) -> Any:
        return self._arith(o, "+", lambda a, b: a + b, True)

    def __sub__(self, o: Any) -> Any:
        return self._arith(o, "-", lambda a, b: a - b)

    def __rsub__(self, o: Any) -> Any:
        return self._arith(o, "-", lambda a, b: a - b, True)

    def __mul__(self, o: Any) -> Any:
        return self._arith(o, "*", lambda a, b: a * b)

    def __rmul__(self, o: Any) -> Any:
        return self._arith(o, "*", lambda a, b: a * b, True)

    def __neg__(self) -> NkiScalar:
        return NkiScalar(-self.get("operand"), self.dtype)

    def __pos__(self) -> NkiScalar:
        return NkiScalar(self.get("operand"), self.dtype)

    def _unsupported(self, op: str) -> Any:
        raise NkiValidationError(f"NkiScalar supports +, - and * (and traced comparisons on int32); {op!r} is not "
                                 "an NkiScalar operation", operand="scalar", rule="argument")

    def __floordiv__(self, o: Any) -> Any:
        return self._unsupported("//")

    __rfloordiv__ = __floordiv__

    def __truediv__(self, o: Any) -> Any:
        return self._unsupported("/")

    __rtruediv__ = __truediv__

    def __mod__(self, o: Any) -> Any:
        return self._unsupported("%")

    __rmod__ = __mod__

    def __lshift__(self, o: Any) -> Any:
        return self._unsupported("<<")

    def __rshift__(self, o: Any) -> Any:
        return self._unsupported(">>")

    def __and__(self, o: Any) -> Any:
        return self._unsupported("&")

    def __or__(self, o: Any) -> Any:
        return self._unsupported("|")

    def __xor__(self, o: Any) -> Any:
        return self._unsupported("^")

    def __pow__(self, o: Any) -> Any:
        return self._unsupported("**")

    # -- comparisons: traced, result unusable (int32); refused (int64) -----------------------
    def _compare(self, other: Any, op: str) -> Any:
        if self.dtype.name == "int64":
            raise NkiValidationError(f"NkiScalar {op}: comparisons of int64 scalars are rejected (only +, - and * "
                                     "exist at 64 bits)", operand="scalar", rule="dtype")
        o = self._other(other, op)
        if o is None:
            return NotImplemented
        return NkiScalar(0, self.dtype, is_comparison=True)

    def __lt__(self, o: Any) -> Any:
        return self._compare(o, "<")

    def __le__(self, o: Any) -> Any:
        return self._compare(o, "<=")

    def __gt__(self, o: Any) -> Any:
        return self._compare(o, ">")

    def __ge__(self, o: Any) -> Any:
        return self._compare(o, ">=")

    def __eq__(self, o: Any) -> Any:  # type: ignore[override]
        return self._compare(o, "==")

    def __ne__(self, o: Any) -> Any:  # type: ignore[override]
        return self._compare(o, "!=")

    __hash__ = object.__hash__

    # -- not a Python int ------------------------------------------------------------------
    def __index__(self) -> int:
        raise NkiValidationError(
            "an NkiScalar's value is only known on device; it cannot be used as a Python int (int(), range(), "
            "indexing, if); use it as .ap(scalar_offset=...), a select() index or an nl.fori_loop bound",
            operand="scalar", rule="argument")

    __int__ = __index__

    def __bool__(self) -> bool:
        raise NkiValidationError("an NkiScalar cannot be a Python condition (if / while / and / or): its value is "
                                 "only known on device", operand="scalar", rule="argument")

    def __repr__(self) -> str:
        return f"NkiScalar({self.dtype}{', comparison' if self.is_comparison else ''})"


def _recorded(name: str) -> None:
    """While a kernel is recorded, NkiScalar arithmetic is kept as program events (the device computes it)."""
    method = getattr(NkiScalar, name)

    @functools.wraps(method)
    def wrapper(self: NkiScalar, *args: Any) -> Any:
        out = method(self, *args)
        rec = kernel_recorder()
        if rec is not None and isinstance(out, NkiScalar):
            rec.scalar_op(name, self, args[0] if args else None, out)
        return out

    setattr(NkiScalar, name, wrapper)


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__neg__", "__pos__",
              "__lshift__", "__rshift__", "__and__", "__or__", "__xor__", "__lt__", "__le__", "__gt__", "__ge__",
              "__eq__", "__ne__"):
    _recorded(_name)


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
    record(ctx, "scalar_load", "sync", [t.access("src", "r")])
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
    record(ctx, "scalar_store", "sync", [t.access("dst", "w")])


__all__ = ["NkiScalar", "scalar_load", "scalar_store"]
