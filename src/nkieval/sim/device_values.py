"""Values only the device knows, as the simulator holds them: a 32-bit engine register (``VirtualRegister``)
and an ``NkiScalar`` (one int32 or int64 read from a 1x1 tile). The instructions that make and use them are in
:mod:`nkieval.sim.isa.registers` and :mod:`nkieval.sim.isa.scalars`; the classes live below the tensor and the
instruction framework, which take them as run-time indices and offsets.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from nkieval.sim import dtypes as dt
from nkieval.sim.context import kernel_recorder
from nkieval.sim.errors import NkiValidationError


class VirtualRegister:
    """A 32-bit engine register. ``frozen`` registers (loop induction variables) cannot be written."""

    __slots__ = ("_value", "frozen", "name")

    def __init__(self, state: int | None = None, frozen: bool = False, name: str = "") -> None:
        self._value: int | float | None = _wrap32(state) if state is not None else None
        self.frozen = frozen
        self.name = name

    @property
    def value(self) -> int | float:
        """The current value (the simulator's view of the device register)."""
        return self.get()

    @value.setter
    def value(self, v: int | float) -> None:
        self._value = v

    def get(self, role: str = "register") -> int:
        """The value as an int, for the simulator's own use (loop bounds, scalar offsets)."""
        if self._value is None:
            raise NkiValidationError(f"{role} is read before any value was moved or loaded into it", operand=role,
                                     rule="uninitialized")
        return int(self._value)

    def __index__(self) -> int:
        raise NkiValidationError(
            "a VirtualRegister's value is only known on device; it cannot be used as a Python int (range(), "
            "indexing, int()); use nl.dynamic_range / nl.fori_loop or .ap(scalar_offset=reg)",
            operand="register", rule="argument")

    __int__ = __index__

    def __bool__(self) -> bool:
        # `while reg:` (NKI 0.2-0.6): the loop test reads the register on device each iteration.
        if kernel_recorder() is not None:
            raise NkiValidationError(
                "`if reg:` / `while reg:` reads a register's value in Python; a kernel is traced without device "
                "values, so write the loop as nl.while_loop(init, body_fun)", operand="register",
                rule="trace-time-value")
        return self.get() != 0

    def __repr__(self) -> str:
        return f"VirtualRegister({self.name or '?'}={self._value})"


def _wrap32(x: Any) -> int:
    v = int(x) & 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


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
