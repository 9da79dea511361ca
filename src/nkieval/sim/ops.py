"""The ALU operator and activation-function tables.

One table: name → (NumPy fp32 semantics, properties). Properties are plain sets next to the
table (``ARITH``, ``BITVEC``, ``COMPARE``, ``REDUCIBLE``, ``UNARY`` …), as in tinygrad's
GroupOp. An ``Op`` object is what ``nl.add`` etc. are: it can be passed as ``op=`` to an ISA
instruction, and calling it runs the value-returning ``nl.*`` wrapper registered for it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from nkieval.sim.context import dry_run, maybe_current
from nkieval.sim.errors import NkiValidationError
from nkieval.sim.fpstate import IGNORE_ALL, IGNORE_OVER

_F32 = np.float32


def _gelu(x: np.ndarray) -> np.ndarray:
    xd = x.astype(np.float64)
    return (0.5 * xd * (1.0 + _erf(xd / math.sqrt(2.0)))).astype(_F32)


def _erf(x: np.ndarray) -> np.ndarray:
    # numpy has no erf; math.erf elementwise is exact to double precision.
    return _ERF_UFUNC(np.asarray(x, dtype=np.float64)).astype(np.float64)


_ERF_UFUNC = np.frompyfunc(math.erf, 1, 1)


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    xd = x.astype(np.float64)
    return (0.5 * xd * (1 + np.tanh(np.sqrt(2 / np.pi) * (xd + 0.044715 * xd**3)))).astype(_F32)


def _sin_hw(x: np.ndarray) -> np.ndarray:
    """The Scalar engine's ``sin``, which does no range reduction (valid input range [-pi, pi]).

    Inside the range it is sin. Outside, the approximation's edge piece is extrapolated; we model
    that piece as the cubic Taylor polynomial of sin about +-pi, ``-(x - pi) + (x - pi)**3 / 6``
    (and its odd mirror below -pi), which reproduces the one documented out-of-range value,
    ``activation(op=sin)`` of 9.0 = 27.65 (docs/simulator.md, "Activation functions")."""
    x = np.asarray(x)
    out = np.sin(x)
    hi = x > math.pi
    lo = x < -math.pi
    if hi.any() or lo.any():
        d = np.where(hi, x - math.pi, np.where(lo, x + math.pi, 0.0))
        edge = -d + d * d * d / 6.0
        out = np.where(hi | lo, edge, out).astype(out.dtype, copy=False)
    return out


def _sigmoid(x: np.ndarray) -> np.ndarray:
    with IGNORE_OVER():
        return (1.0 / (1.0 + np.exp(-x.astype(np.float64)))).astype(_F32)


def _gelu_sigmoid(x: np.ndarray) -> np.ndarray:
    return (x * _sigmoid(1.702 * x)).astype(_F32)


def _erf_dx(x: np.ndarray) -> np.ndarray:
    return (2 / np.sqrt(np.pi) * np.exp(-x.astype(np.float64) ** 2)).astype(_F32)


def _gelu_dx(x: np.ndarray) -> np.ndarray:
    xd = x.astype(np.float64)
    cdf = 0.5 * (1 + _erf(xd / np.sqrt(2)))
    pdf = np.exp(-0.5 * xd * xd) / np.sqrt(2 * np.pi)
    return (cdf + xd * pdf).astype(_F32)


def _silu_dx(x: np.ndarray) -> np.ndarray:
    s = _sigmoid(x).astype(np.float64)
    return (s * (1 + x * (1 - s))).astype(_F32)


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(0.0, x.astype(np.float64)).astype(_F32)


def _mish(x: np.ndarray) -> np.ndarray:
    return (x * np.tanh(_softplus(x).astype(np.float64))).astype(_F32)


def _gelu_sigmoid_dx(x: np.ndarray) -> np.ndarray:
    s = _sigmoid(1.702 * x).astype(np.float64)
    return (s + 1.702 * x * s * (1 - s)).astype(_F32)


def _safe(fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    def run(*a: np.ndarray) -> np.ndarray:
        if dry_run():  # a record-only run: the result's shape, no values
            return np.zeros(_result_shape(a), _F32)
        with IGNORE_ALL():
            return np.asarray(fn(*a)).astype(_F32, copy=False)

    run.__name__ = getattr(fn, "__name__", "op")
    return run


def _result_shape(operands: tuple[Any, ...]) -> tuple[int, ...]:
    """The broadcast shape of an operator's operands (arrays or scalars)."""
    shapes = [np.shape(x) for x in operands]
    first = shapes[0]
    if all(s == first for s in shapes):
        return first
    return np.broadcast_shapes(*shapes)


def _int_bits(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[..., np.ndarray]:
    def run(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return fn(np.asarray(a).astype(np.int64), np.asarray(b).astype(np.int64))

    return run


def _abs_max(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.where(np.abs(a) >= np.abs(b), a, b)


def _abs_min(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.where(np.abs(a) <= np.abs(b), a, b)


# name -> (arity, fn)
BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
    "maximum": np.maximum, "minimum": np.minimum, "power": np.power,
    "abs_max": _abs_max, "abs_min": _abs_min,
    "fmod": np.fmod, "mod": np.mod,
    "equal": lambda a, b: (a == b), "not_equal": lambda a, b: (a != b),
    "greater": lambda a, b: (a > b), "greater_equal": lambda a, b: (a >= b),
    "less": lambda a, b: (a < b), "less_equal": lambda a, b: (a <= b),
    "logical_and": lambda a, b: np.logical_and(a != 0, b != 0),
    "logical_or": lambda a, b: np.logical_or(a != 0, b != 0),
    "logical_xor": lambda a, b: np.logical_xor(a != 0, b != 0),
    "bitwise_and": _int_bits(np.bitwise_and), "bitwise_or": _int_bits(np.bitwise_or),
    "bitwise_xor": _int_bits(np.bitwise_xor),
    "left_shift": _int_bits(lambda a, b: np.left_shift(a, b) & 0xFFFFFFFF),
    "right_shift": _int_bits(lambda a, b: np.right_shift(a & 0xFFFFFFFF, b)),
}

UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "copy": lambda x: x, "bypass": lambda x: x, "identity": lambda x: x,
    "abs": np.abs, "negative": np.negative, "sign": np.sign, "square": np.square,
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "reciprocal": lambda x: 1.0 / x, "sin": _sin_hw, "cos": np.cos, "tan": np.tan, "arctan": np.arctan,
    "tanh": np.tanh, "ceil": np.ceil, "floor": np.floor, "trunc": np.trunc,
    "invert": lambda x: np.invert(np.asarray(x).astype(np.int64)),
    "logical_not": lambda x: (x == 0),
    "relu": lambda x: np.maximum(x, 0), "sigmoid": _sigmoid, "silu": lambda x: x * _sigmoid(x),
    "silu_dx": _silu_dx, "gelu": _gelu, "gelu_dx": _gelu_dx, "gelu_apprx_tanh": _gelu_tanh,
    "gelu_apprx_sigmoid": _gelu_sigmoid, "gelu_apprx_sigmoid_dx": _gelu_sigmoid_dx,
    "mish": _mish, "softplus": _softplus, "erf": lambda x: _erf(x), "erf_dx": _erf_dx,
}

ARITH = frozenset({"add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "abs_max", "abs_min",
                   "fmod", "mod", "equal", "not_equal", "greater", "greater_equal", "less", "less_equal",
                   "logical_and", "logical_or", "logical_xor"})
BITVEC = frozenset({"bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift", "invert"})
COMPARE = frozenset({"equal", "not_equal", "greater", "greater_equal", "less", "less_equal"})
#: ops legal as a reduction operator (documented "reduce OK")
REDUCIBLE = frozenset({"add", "subtract", "multiply", "maximum", "minimum", "logical_and", "logical_or",
                       "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "abs_max", "abs_min"})
#: not hardware instructions: run in simulation, fail on device (NKI 0.4 release notes)
SIMULATOR_ONLY = frozenset({"divide", "fmod", "mod"})
#: v4-only operators
GEN4_ONLY = frozenset({"abs_max", "abs_min"})
#: Scalar-engine activation functions with their documented valid input ranges (None = unbounded)
ACTIVATION_RANGES: dict[str, tuple[float, float] | None] = {
    "copy": None, "identity": None, "bypass": None, "square": None, "sigmoid": None, "relu": None,
    "gelu": None, "gelu_dx": None, "gelu_apprx_tanh": None, "gelu_apprx_sigmoid": None,
    "gelu_apprx_sigmoid_dx": None, "silu": None, "silu_dx": None, "tanh": None, "softplus": None,
    "mish": None, "erf": None, "erf_dx": None, "exp": None, "sign": None, "abs": None,
    "log": (2.0**-64, 2.0**64), "sin": (-math.pi, math.pi), "arctan": (-math.pi / 2, math.pi / 2),
    "sqrt": (2.0**-116, 2.0**118), "rsqrt": (2.0**-87, 2.0**97), "reciprocal": (2.0**-42, 2.0**42),
    "negative": None,
}
REDUCE_IDENTITY: dict[str, float] = {
    "add": 0.0, "subtract": 0.0, "multiply": 1.0, "maximum": -np.inf, "minimum": np.inf,
    "bitwise_or": 0.0, "bitwise_and": -1.0, "bitwise_xor": 0.0, "logical_or": 0.0, "logical_and": 1.0,
    "abs_max": 0.0, "abs_min": np.inf,
}

#: the ALU operators whose fp32 result is a rounding (``SimOptions.exact``'s ``"alu"`` keeps them in fp64)
_ROUNDED_ALU = frozenset({"add", "subtract", "multiply", "divide", "power"})

# Bitvec operators stay exact int64 (bit patterns); everything else is fp32 engine math.
_SAFE_BINARY = {k: (v if k in BITVEC else _safe(v)) for k, v in BINARY.items()}
_SAFE_UNARY = {k: (v if k in BITVEC else _safe(v)) for k, v in UNARY.items()}

# Implementations of the value-returning nl.* call for an op, registered by nkieval.sim.language.
LANGUAGE_IMPL: dict[str, Callable[..., Any]] = {}


class Op:
    """An NKI operator object (``nl.add``, ``nl.exp`` …): usable as ``op=`` and callable."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"nl.{self.name}"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        impl = LANGUAGE_IMPL.get(self.name)
        if impl is None:
            raise NkiValidationError(f"nl.{self.name} has no value-returning form", rule="argument")
        return impl(*args, **kwargs)

    def __eq__(self, other: object) -> bool:
        other_name = getattr(other, "name", None) if isinstance(other, Op) else _NUMPY_NAMES.get(other)  # type: ignore[arg-type]
        return other_name == self.name

    def __hash__(self) -> int:
        return hash(("nkiop", self.name))

    @property
    def is_unary(self) -> bool:
        return self.name in UNARY and self.name not in BINARY

    def binary(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        fn = _SAFE_BINARY.get(self.name)
        if fn is None:  # (nl.prelu: an activation function, no ALU form)
            raise NkiValidationError(f"nl.{self.name} is not a binary ALU operator", rule="argument")
        ctx = maybe_current()
        if ctx is not None and "alu" in ctx.options.exact and self.name in _ROUNDED_ALU:
            with IGNORE_ALL():  # (SimOptions.exact: left in fp64, rounded where it is written)
                return BINARY[self.name](np.asarray(a, np.float64), np.asarray(b, np.float64))
        return fn(a, b)

    def unary(self, x: np.ndarray) -> np.ndarray:
        fn = _SAFE_UNARY.get(self.name)
        if fn is None:
            raise NkiValidationError(f"nl.{self.name} is not a unary ALU operator", rule="argument")
        ctx = maybe_current()
        if ctx is not None and "functions" in ctx.options.exact and getattr(x, "dtype", None) == _F32:
            x = x.astype(np.float64)  # (SimOptions.exact: the function in fp64, rounded to fp32 once by _safe)
        return fn(x)


OPS: dict[str, Op] = {name: Op(name) for name in {*BINARY, *UNARY}}
OPS["prelu"] = Op("prelu")  # nl.prelu: activate2-only activation constant (slope = relu_param)

_NUMPY_NAMES: dict[Any, str] = {
    np.add: "add", np.subtract: "subtract", np.multiply: "multiply", np.divide: "divide",
    np.true_divide: "divide", np.maximum: "maximum", np.minimum: "minimum", np.power: "power",
    np.fmod: "fmod", np.mod: "mod", np.equal: "equal", np.not_equal: "not_equal", np.greater: "greater",
    np.greater_equal: "greater_equal", np.less: "less", np.less_equal: "less_equal",
    np.logical_and: "logical_and", np.logical_or: "logical_or", np.logical_xor: "logical_xor",
    np.bitwise_and: "bitwise_and", np.bitwise_or: "bitwise_or", np.bitwise_xor: "bitwise_xor",
    np.left_shift: "left_shift", np.right_shift: "right_shift", np.invert: "invert",
    np.abs: "abs", np.absolute: "abs", np.negative: "negative", np.sign: "sign", np.square: "square",
    np.exp: "exp", np.log: "log", np.sqrt: "sqrt", np.reciprocal: "reciprocal", np.sin: "sin", np.cos: "cos",
    np.tan: "tan", np.arctan: "arctan", np.tanh: "tanh", np.ceil: "ceil", np.floor: "floor", np.trunc: "trunc",
    np.logical_not: "logical_not", np.copy: "copy",
}


def as_op(op: Any, instruction: str, role: str = "op") -> Op:
    """Normalise ``op=`` (an ``Op``, a NumPy ufunc as Beta 1 allowed, or None) to an Op."""
    if isinstance(op, Op):
        return op
    name = _NUMPY_NAMES.get(op) if callable(op) else None
    if name is not None:
        return OPS[name]
    if isinstance(op, str):
        raise NkiValidationError(f"{role} must be an nl operator object (e.g. nl.add), not the string {op!r}",
                                 instruction=instruction, operand=role, rule="argument")
    raise NkiValidationError(f"{role} {op!r} is not an NKI operator", instruction=instruction, operand=role,
                             rule="argument")
