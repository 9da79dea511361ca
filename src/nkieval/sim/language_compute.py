"""Value-returning ``nl.*`` compute wrappers (NKI 0.3+), each lowered onto ``nisa`` instructions.

Why lower instead of computing with NumPy: the trace must show the instructions a real
kernel would issue (the performance model and the reviewer read it), and the engines' rules
(buffers, dtypes, partition limits) must apply to ``nl.*`` code exactly as to ``nisa.*`` code.

Conventions (documented for NKI 0.3–0.6):

* results are new SBUF tiles of ``dtype`` (default: the inputs' promoted dtype), except
  ``matmul`` and ``transpose``, which return PSUM tiles as the Tensor engine writes PSUM;
* binary ops do **not** broadcast between tensor operands (a documented 0.4 limitation);
  the one exception is a Python scalar or a ``[P, 1]`` tile, lowered to ``tensor_scalar``;
* reductions take trailing contiguous free axes only (``(1,)``, ``(1, 2)`` …, never axis 0),
  and on-chip results stay at least 2-D (a reduced ``[P, F]`` tile becomes ``[P, 1]``).

This module avoids Python's builtin ``sum``/``max``/``min``/``all`` by name because it
defines NKI functions with those names.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from nkieval.sim import dtypes as dt
from nkieval.sim import isa as _isa
from nkieval.sim.context import current
from nkieval.sim.errors import NkiValidationError
from nkieval.sim.isa.enums import engine as _engine
from nkieval.sim.memory import PSUM, SBUF
from nkieval.sim.ops import BINARY, LANGUAGE_IMPL, OPS, UNARY
from nkieval.sim.tensor import NkiTensor, allocate

_Scalar = (bool, int, float, np.number)


def _instr(name: str) -> Callable[..., Any]:
    """An ISA instruction looked up at call time (some land later than the wrappers using them)."""
    fn = getattr(_isa, name, None)
    if fn is None:
        from nkieval.sim.isa import INSTRUCTIONS

        info = INSTRUCTIONS.get(name)
        if info is None:
            raise NotImplementedError(f"this nl.* wrapper lowers to nisa.{name}, which the simulator does not "
                                      "implement yet")
        fn = info.fn
    return fn


def _tile(x: Any, role: str, api: str) -> NkiTensor:
    """An on-chip (SBUF/PSUM) operand of an ``nl.*`` compute call."""
    if not isinstance(x, NkiTensor):
        raise NkiValidationError(f"operand '{role}' of '{api}' must be a tile, got {type(x).__name__}",
                                 instruction=api, operand=role, rule="argument")
    if not x.is_on_chip:
        raise NkiValidationError(f"Expected operand '{role}' of '{api}' to be in address space 'psum|sbuf', but got "
                                 f"a tile in '{x.buffer.kind}' instead.", instruction=api, operand=role, rule="buffer")
    return x


def _new(shape: tuple[int, ...], dtype: Any, api: str, buffer: Any = SBUF) -> NkiTensor:
    return allocate(shape, dtype, buffer, instruction=api)


def _weak_dtype(v: Any) -> dt.DType:
    if isinstance(v, bool | np.bool_):
        return dt.uint8
    if isinstance(v, int | np.integer):
        return dt.int32
    return dt.float32


def _result_dtype(x: Any, y: Any) -> dt.DType:
    """Promotion with weak Python scalars: a scalar never widens a float tile."""
    xs, ys = isinstance(x, NkiTensor), isinstance(y, NkiTensor)
    if xs and ys:
        return dt.promote(x.dtype, y.dtype)
    t, s = (x, y) if xs else (y, x)
    if t.dtype.is_float:
        return t.dtype
    return dt.promote(t.dtype, _weak_dtype(s))


def _free(t: NkiTensor) -> int:
    return t.size // t.shape[0]


def _is_column(t: NkiTensor) -> bool:
    return _free(t) == 1


# -- elementwise ---------------------------------------------------------------------------------------
def binary(name: str, x: Any, y: Any, dtype: Any = None) -> NkiTensor:
    """``nl.<name>(x, y, dtype=None)``: tensor⊗tensor → tensor_tensor; tensor⊗scalar or
    tensor⊗[P, 1] → tensor_scalar (``reverse0`` when the tensor is on the right)."""
    op = OPS[name]
    api = name
    xs, ys = isinstance(x, NkiTensor), isinstance(y, NkiTensor)
    if not xs and not ys:
        raise NkiValidationError(f"at least one operand of '{api}' must be a tile", instruction=api, rule="argument")
    if xs:
        _tile(x, "x", api)
    elif not isinstance(x, _Scalar):
        raise NkiValidationError(f"operand 'x' of '{api}' must be a tile or a number, got {type(x).__name__}",
                                 instruction=api, operand="x", rule="argument")
    if ys:
        _tile(y, "y", api)
    elif not isinstance(y, _Scalar):
        raise NkiValidationError(f"operand 'y' of '{api}' must be a tile or a number, got {type(y).__name__}",
                                 instruction=api, operand="y", rule="argument")
    out_dt = dt.to_dtype(dtype) if dtype is not None else _result_dtype(x, y)
    if xs and ys:
        if x.shape == y.shape:
            out = _new(x.shape, out_dt, api)
            _isa.tensor_tensor(out, x, y, op)
            return out
        if x.shape[0] == y.shape[0] and _is_column(y) and not _is_column(x):
            out = _new(x.shape, out_dt, api)
            _isa.tensor_scalar(out, x, op, y)
            return out
        if x.shape[0] == y.shape[0] and _is_column(x) and not _is_column(y):
            out = _new(y.shape, out_dt, api)
            _isa.tensor_scalar(out, y, op, x, reverse0=True)
            return out
        raise NkiValidationError(
            f"operands x{list(x.shape)} and y{list(y.shape)} have different shapes; nl.* binary ops do not "
            "broadcast between tiles (only a number or a [P, 1] tile is applied along the free dimensions). "
            "Use nl.broadcast_to first.", instruction=api, operand="y", rule="shape-mismatch")
    if xs:
        out = _new(x.shape, out_dt, api)
        _isa.tensor_scalar(out, x, op, _scalar_value(y))
    else:
        out = _new(y.shape, out_dt, api)
        _isa.tensor_scalar(out, y, op, _scalar_value(x), reverse0=True)
    return out


def _scalar_value(v: Any) -> float:
    return float(v)


#: unary ops the Scalar engine's activation table computes directly
_ACTIVATION_UNARY = frozenset({
    "exp", "log", "sqrt", "tanh", "sigmoid", "relu", "gelu", "gelu_dx", "gelu_apprx_tanh", "gelu_apprx_sigmoid",
    "gelu_apprx_sigmoid_dx", "silu", "silu_dx", "softplus", "mish", "erf", "erf_dx", "square", "sign", "abs",
    "arctan",
})
_TWO_PI = 2.0 * math.pi


def unary(name: str, x: Any, dtype: Any = None) -> NkiTensor:
    """``nl.<name>(x, dtype=None)``, lowered per op: activation functions on the Scalar engine,
    ``reciprocal`` on the Vector engine (precise), ``rsqrt`` on GpSimd (NKI 0.5+), and the
    ops the hardware lacks (sin/cos/tan range reduction, floor/ceil/trunc) as short sequences."""
    api = name
    x = _tile(x, "x", api)
    out_dt = dt.to_dtype(dtype) if dtype is not None else x.dtype
    out = _new(x.shape, out_dt, api)
    if name in _ACTIVATION_UNARY:
        _isa.activation(out, OPS[name], x)
    elif name == "reciprocal":
        _isa.reciprocal(out, x)
    elif name == "rsqrt":
        _isa.tensor_scalar(out, x, OPS["rsqrt"], None, engine=_engine.gpsimd)
    elif name == "negative":
        _isa.tensor_scalar(out, x, OPS["multiply"], -1.0)
    elif name == "invert":
        _isa.tensor_scalar(out, x, OPS["invert"], None)
    elif name == "logical_not":
        _isa.tensor_scalar(out, x, OPS["equal"], 0.0)
    elif name in ("sin", "cos"):
        src = x
        if name == "cos":  # cos(x) = sin(x + pi/2)
            src = _new(x.shape, dt.float32, api)
            _isa.tensor_scalar(src, x, OPS["add"], math.pi / 2)
        _isa.activation(out, OPS["sin"], _range_reduce(src, api))
    elif name == "tan":
        s = unary("sin", x, dt.float32)
        c = unary("cos", x, dt.float32)
        rc = _new(x.shape, dt.float32, api)
        _isa.reciprocal(rc, c)
        _isa.tensor_tensor(out, s, rc, OPS["multiply"])
    elif name in ("floor", "ceil"):
        _round_toward(out, x, api, down=name == "floor")
    elif name == "trunc":
        a = _new(x.shape, dt.float32, api)
        _isa.activation(a, OPS["abs"], x)
        fl = _new(x.shape, dt.float32, api)
        _round_toward(fl, a, api, down=True)
        sg = _new(x.shape, dt.float32, api)
        _isa.activation(sg, OPS["sign"], x)
        _isa.tensor_tensor(out, fl, sg, OPS["multiply"])
    else:
        raise NkiValidationError(f"nl.{name} has no value-returning form", instruction=api, rule="argument")
    return out


def _range_reduce(x: NkiTensor, api: str) -> NkiTensor:
    """x - 2π·rint(x / 2π), into [-π, π], the input range of the Scalar engine's sin."""
    k = _new(x.shape, dt.int32, api)
    if current().options.float_to_int == "rne":
        _isa.tensor_scalar(k, x, OPS["multiply"], 1.0 / _TWO_PI)  # fp32 → int32 rounds to nearest even
    else:  # truncating casts (the Beta-1 simulator's): k = floor(x / 2π + 1/2), the nearest integer
        y = _new(x.shape, dt.float32, api)
        _isa.tensor_scalar(y, x, OPS["multiply"], 1.0 / _TWO_PI, op1=OPS["add"], operand1=0.5)
        _round_toward(k, y, api, down=True)
    shift = _new(x.shape, dt.float32, api)
    _isa.tensor_scalar(shift, k, OPS["multiply"], -_TWO_PI)
    r = _new(x.shape, dt.float32, api)
    _isa.tensor_tensor(r, x, shift, OPS["add"])
    return r


def _round_toward(out: NkiTensor, x: NkiTensor, api: str, *, down: bool) -> None:
    """floor/ceil through an int32 round trip: k = rint(x); floor = k - (k > x); ceil = k + (k < x).
    Exact for |x| < 2**31 (the int32 range); NaN becomes 0 as in any fp32→int cast."""
    k = _new(x.shape, dt.int32, api)
    _isa.tensor_copy(k, x)
    fix = _new(x.shape, dt.float32, api)
    _isa.tensor_tensor(fix, k, x, OPS["greater" if down else "less"])
    _isa.tensor_tensor(out, k, fix, OPS["subtract" if down else "add"])


# -- reductions ------------------------------------------------------------------------------------------
def _axes(x: NkiTensor, axis: Any, api: str) -> tuple[int, ...]:
    nd = x.ndim
    raw = (axis,) if isinstance(axis, int | np.integer) else tuple(axis)
    axes = tuple(sorted(int(a) + nd if int(a) < 0 else int(a) for a in raw))
    if not axes or builtins.any(a >= nd for a in axes) or len(set(axes)) != len(axes):
        raise NkiValidationError(f"axis {axis} is out of range for a {nd}-D tile", instruction=api, operand="axis",
                                 rule="argument")
    if 0 in axes:
        raise NkiValidationError("cannot reduce along the partition dimension (axis 0)", instruction=api,
                                 operand="axis", rule="argument")
    if axes != tuple(builtins.range(nd - len(axes), nd)):
        raise NkiValidationError(f"axis {axes} must be trailing contiguous free axes of a {nd}-D tile, e.g. "
                                 f"{(nd - 1,)} or {tuple(builtins.range(1, nd))}", instruction=api, operand="axis",
                                 rule="argument")
    return axes


def _reduced_shape(shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool) -> tuple[int, ...]:
    if keepdims:
        return tuple(1 if i in axes else n for i, n in enumerate(shape))
    kept = tuple(n for i, n in enumerate(shape) if i not in axes)
    return kept if len(kept) >= 2 else (*kept, 1)  # on-chip tiles stay at least 2-D


def _reduce(api: str, op: str, x: Any, axis: Any, dtype: Any, keepdims: bool, default_dtype: Any = None) -> NkiTensor:
    x = _tile(x, "x", api)
    axes = _axes(x, axis, api)
    out_dt = dt.to_dtype(dtype if dtype is not None else (default_dtype or x.dtype))
    out = _new(_reduced_shape(x.shape, axes, keepdims), out_dt, api)
    _isa.tensor_reduce(out, OPS[op], x, axes)
    return out


def sum(x: Any, axis: Any, dtype: Any = None, keepdims: bool = False) -> NkiTensor:
    """Sum over trailing free axes (Vector engine ``tensor_reduce``)."""
    return _reduce("sum", "add", x, axis, dtype, keepdims)


def max(x: Any, axis: Any, dtype: Any = None, keepdims: bool = False) -> NkiTensor:
    return _reduce("max", "maximum", x, axis, dtype, keepdims)


def min(x: Any, axis: Any, dtype: Any = None, keepdims: bool = False) -> NkiTensor:
    return _reduce("min", "minimum", x, axis, dtype, keepdims)


def prod(x: Any, axis: Any, dtype: Any = None, keepdims: bool = False) -> NkiTensor:
    return _reduce("prod", "multiply", x, axis, dtype, keepdims)


def all(x: Any, axis: Any, dtype: Any = None, keepdims: bool = False) -> NkiTensor:
    """1 where every element along the axes is non-zero (default dtype ``bool_``)."""
    return _reduce("all", "logical_and", x, axis, dtype, keepdims, default_dtype=dt.bool_)


def mean(x: Any, axis: Any, dtype: Any = None, keepdims: bool = False) -> NkiTensor:
    """Mean with an fp32 intermediate sum (as documented), scaled by 1/n."""
    x = _tile(x, "x", "mean")
    axes = _axes(x, axis, "mean")
    n = math.prod(x.shape[a] for a in axes)
    shape = _reduced_shape(x.shape, axes, keepdims)
    s = _new(shape, dt.float32, "mean")
    _isa.tensor_reduce(s, OPS["add"], x, axes)
    out = _new(shape, dt.to_dtype(dtype) if dtype is not None else x.dtype, "mean")
    _isa.tensor_scalar(out, s, OPS["multiply"], 1.0 / n)
    return out


def _spread(col: NkiTensor, like: NkiTensor, axes: tuple[int, ...]) -> NkiTensor:
    """A zero-stride view of a keepdims-reduced tile over the reduced axes (no data moved)."""
    v = col
    for a in axes:
        v = v.broadcast(a, like.shape[a])
    return v


def _sub_along(out: NkiTensor, x: NkiTensor, col: NkiTensor, axes: tuple[int, ...], op: str = "subtract") -> None:
    if _free(col) == 1:
        _isa.tensor_scalar(out, x, OPS[op], col)
    else:
        _isa.tensor_tensor(out, x, _spread(col, x, axes), OPS[op])


def var(x: Any, axis: Any, dtype: Any = None, keepdims: bool = True) -> NkiTensor:
    """Population variance mean((x - mean)²); ``keepdims`` is ignored (always kept), as documented."""
    api = "var"
    x = _tile(x, "x", api)
    axes = _axes(x, axis, api)
    n = math.prod(x.shape[a] for a in axes)
    m = mean(x, axes, dt.float32, keepdims=True)
    d = _new(x.shape, dt.float32, api)
    _sub_along(d, x, m, axes)
    sq = _new(x.shape, dt.float32, api)
    _isa.tensor_tensor(sq, d, d, OPS["multiply"])
    s = _new(m.shape, dt.float32, api)
    _isa.tensor_reduce(s, OPS["add"], sq, axes)
    out = _new(m.shape, dt.to_dtype(dtype) if dtype is not None else x.dtype, api)
    _isa.tensor_scalar(out, s, OPS["multiply"], 1.0 / n)
    return out


# -- composites ---------------------------------------------------------------------------------------------
def softmax(x: Any, axis: Any = -1, dtype: Any = None) -> NkiTensor:
    """exp(x - max) / sum(exp(x - max)) along trailing free axes.

    When the axes cover every free dimension the max and sum are [P, 1] columns and the
    lowering is the standard four instructions (negated max, exp with bias and a fused sum,
    reciprocal, scale); otherwise the columns are applied through zero-stride views."""
    api = "softmax"
    x = _tile(x, "x", api)
    axes = _axes(x, axis, api)
    out = _new(x.shape, dt.to_dtype(dtype) if dtype is not None else x.dtype, api)
    red_shape = _reduced_shape(x.shape, axes, True)
    e = _new(x.shape, dt.float32, api)
    if axes == tuple(builtins.range(1, x.ndim)):
        neg_max = _new(red_shape, dt.float32, api)
        _isa.tensor_reduce(neg_max, OPS["maximum"], x, axes, negate=True)
        total = _new(red_shape, dt.float32, api)
        _isa.activation_reduce(e, OPS["exp"], x, OPS["add"], total, bias=neg_max)
        inv = _new(red_shape, dt.float32, api)
        _isa.reciprocal(inv, total)
        _isa.tensor_scalar(out, e, OPS["multiply"], inv)
        return out
    mx = _new(red_shape, dt.float32, api)
    _isa.tensor_reduce(mx, OPS["maximum"], x, axes)
    shifted = _new(x.shape, dt.float32, api)
    _sub_along(shifted, x, mx, axes)
    _isa.activation(e, OPS["exp"], shifted)
    total = _new(red_shape, dt.float32, api)
    _isa.tensor_reduce(total, OPS["add"], e, axes)
    inv = _new(red_shape, dt.float32, api)
    _isa.reciprocal(inv, total)
    _sub_along(out, e, inv, axes, op="multiply")
    return out


def rms_norm(x: Any, w: Any, axis: Any, n: Any = None, epsilon: float = 1e-6, compute_dtype: Any = None,
             dtype: Any = None) -> NkiTensor:
    """x / sqrt(mean(x²) + epsilon) * w over the trailing free ``axis``.

    ``n`` is the element count of the mean (default: the size of the normalised axes; pass
    the full row length when ``x`` is one chunk of a longer row). ``w`` has ``x``'s shape, or
    ``[1, F]`` (broadcast across partitions here, through the Tensor engine)."""
    api = "rms_norm"
    x = _tile(x, "x", api)
    axes = _axes(x, axis, api)
    count = int(n) if n is not None else math.prod(x.shape[a] for a in axes)
    cdt = dt.to_dtype(compute_dtype) if compute_dtype is not None else dt.float32
    red_shape = _reduced_shape(x.shape, axes, True)
    ss = _new(red_shape, dt.float32, api)
    sq = _new(x.shape, cdt, api)
    if _free(ss) == 1:
        _isa.activation_reduce(sq, OPS["square"], x, OPS["add"], ss)
    else:
        _isa.activation(sq, OPS["square"], x)
        _isa.tensor_reduce(ss, OPS["add"], sq, axes)
    ms = _new(red_shape, dt.float32, api)
    _isa.tensor_scalar(ms, ss, OPS["multiply"], 1.0 / count, op1=OPS["add"], operand1=float(epsilon))
    rinv = _new(red_shape, dt.float32, api)
    _isa.activation(rinv, OPS["rsqrt"], ms)
    y = _new(x.shape, cdt, api)
    _sub_along(y, x, rinv, axes, op="multiply")
    out = _new(x.shape, dt.to_dtype(dtype) if dtype is not None else x.dtype, api)
    if w is None:
        _isa.tensor_copy(out, y)
        return out
    w = _tile(w, "w", api)
    if w.shape != x.shape:
        if w.shape[0] == 1 and w.shape[1:] == x.shape[1:]:
            w = broadcast_to(w, x.shape)
        else:
            raise NkiValidationError(f"w{list(w.shape)} must have x's shape {list(x.shape)} or [1, ...free dims]",
                                     instruction=api, operand="w", rule="shape-mismatch")
    _isa.tensor_tensor(out, y, w, OPS["multiply"])
    return out


_UNSIGNED_OF_SIZE = {1: dt.uint8, 2: dt.uint16, 4: dt.uint32}


def predicate(cond: NkiTensor, new_u8: Callable[[], NkiTensor]) -> NkiTensor:
    """``cond`` as the unsigned predicate of ``tensor_copy_predicated``, holding where ``cond`` is nonzero (both
    front ends' ``where``): an unsigned one as it is; a signed or bool one with a contiguous last dim read as
    unsigned bits in place, no instruction (a converting copy would saturate -1 to 0); any other (float, or a
    zero-stride broadcast) compared with 0 into ``new_u8()`` (a converting copy would truncate 0.5 to 0)."""
    if cond.dtype in (dt.uint8, dt.uint16, dt.uint32):
        return cond
    if cond.dtype in (dt.int8, dt.int16, dt.int32, dt.bool_) and cond.data.strides[-1] == cond.data.itemsize:
        return cond.view(_UNSIGNED_OF_SIZE[cond.dtype.itemsize])
    pred = new_u8()
    _isa.tensor_scalar(pred, cond, OPS["not_equal"], 0.0)
    return pred


def where(condition: Any, x: Any, y: Any, dtype: Any = None) -> NkiTensor:
    """``condition ? x : y`` per element; the condition holds where it is nonzero (any dtype).

    Lowered as: y (copy or memset) into the result, the condition as an unsigned predicate (an integer one
    read as unsigned in place, a float one compared with 0), then ``tensor_copy_predicated`` of x over it."""
    api = "where"
    cond = _tile(condition, "condition", api)
    shape = cond.shape
    for role, v in (("x", x), ("y", y)):
        if isinstance(v, NkiTensor):
            _tile(v, role, api)
            if v.shape != shape:
                raise NkiValidationError(f"{role}{list(v.shape)} must have the condition's shape {list(shape)}",
                                         instruction=api, operand=role, rule="shape-mismatch")
        elif not isinstance(v, _Scalar):
            raise NkiValidationError(f"operand '{role}' of 'where' must be a tile or a number", instruction=api,
                                     operand=role, rule="argument")
    if dtype is not None:
        out_dt = dt.to_dtype(dtype)
    elif isinstance(x, NkiTensor) or isinstance(y, NkiTensor):
        out_dt = _result_dtype(x, y) if isinstance(x, NkiTensor) and isinstance(y, NkiTensor) else \
            (x if isinstance(x, NkiTensor) else y).dtype
    else:
        out_dt = dt.float32
    out = _new(shape, out_dt, api)
    if isinstance(y, NkiTensor):
        _isa.tensor_copy(out, y)
    else:
        _isa.memset(out, int(y) if out_dt.is_int else float(y))
    pred = predicate(cond, lambda: _new(shape, dt.uint8, api))
    src: Any = x
    if isinstance(x, NkiTensor) and x.dtype != out_dt:
        src = _new(shape, out_dt, api)
        _isa.tensor_copy(src, x)
    elif not isinstance(x, NkiTensor):
        src = _new(shape, out_dt, api)
        _isa.memset(src, int(x) if out_dt.is_int else float(x))
    _instr("tensor_copy_predicated")(out, src, pred)
    return out


# -- Tensor engine -------------------------------------------------------------------------------------------
def transpose(x: Any, dtype: Any = None) -> NkiTensor:
    """2-D partition↔free transpose on the Tensor engine; the result is a PSUM tile.

    A PSUM input is copied to SBUF first (the Tensor engine reads SBUF)."""
    api = "transpose"
    x = _tile(x, "x", api)
    if x.ndim != 2:
        raise NkiValidationError(f"parameter 'x{list(x.shape)}' of 'transpose' exceed max supported number of "
                                 "dimensions of 2.", instruction=api, operand="x", rule="argument")
    limit = current().target.pe_array_rows  # a transpose through the Tensor engine's array
    for d, n in enumerate(x.shape):
        if n > limit:
            raise NkiValidationError(f"size of dimension {d} in 'x{list(x.shape)}' of 'transpose' exceed "
                                     f"architecture limitation of {limit}.", instruction=api, operand="x",
                                     rule="instruction-limit")
    src = x
    if x.buffer.kind == "psum":
        src = _new(x.shape, x.dtype, api)
        _isa.tensor_copy(src, x)
    out_dt = dt.to_dtype(dtype) if dtype is not None else x.dtype
    pt = _new((x.shape[1], x.shape[0]), x.dtype if out_dt not in (x.dtype, dt.float32) else out_dt, api, PSUM)
    _isa.nc_transpose(pt, src, engine=_engine.tensor)
    if pt.dtype == out_dt:
        return pt
    out = _new(pt.shape, out_dt, api)
    _isa.tensor_copy(out, pt)
    return out


def matmul(x: Any, y: Any, transpose_x: bool = False) -> NkiTensor:
    """``x @ y`` (or ``x.T @ y`` with ``transpose_x=True``) on the Tensor engine, returned in a
    new fp32 PSUM tile. Without ``transpose_x`` an extra Tensor-engine transpose of x is issued
    (as documented), so pass a pre-transposed x for performance."""
    api = "matmul"
    x = _tile(x, "x", api)
    y = _tile(y, "y", api)
    for role, t in (("x", x), ("y", y)):
        if t.buffer.kind != "sbuf":
            raise NkiValidationError(f"Expected operand '{role}' of 'matmul' to be in address space 'sbuf', but got a "
                                     f"tile in '{t.buffer.kind}' instead.", instruction=api, operand=role,
                                     rule="buffer")
    stationary = x
    if not transpose_x:
        if x.ndim != 2 or x.shape[1] != y.shape[0]:
            raise NkiValidationError(f"x{list(x.shape)} free dimension must match y{list(y.shape)} partition "
                                     "dimension", instruction=api, operand="y", rule="shape-mismatch")
        pt = transpose(x)
        stationary = _new(pt.shape, x.dtype, api)
        _isa.tensor_copy(stationary, pt)
    m = _free(stationary)
    out = _new((m, _free(y)), dt.float32, api, PSUM)
    _isa.nc_matmul(out, stationary, y)
    return out


def broadcast_to(x: Any, shape: Any, dtype: Any = None) -> NkiTensor:
    """NumPy-style broadcast of size-1 dimensions into a new SBUF tile (same rank).

    Free dimensions are broadcast by copying a zero-stride view; the partition dimension
    (1 → P) cannot be a view on chip, so it goes through the Tensor engine: a ones[1, P]
    stationary times x[1, F] gives every partition a copy (exact: each output is one product
    by 1.0). Integer tiles take the fp32 route there (exact below 2**24)."""
    api = "broadcast_to"
    x = _tile(x, "x", api)
    shp = tuple(int(s) for s in shape)
    if len(shp) != x.ndim:
        raise NkiValidationError(f"shape {list(shp)} must have x's rank {x.ndim}", instruction=api, operand="shape",
                                 rule="shape-mismatch")
    for d, (a, b) in enumerate(zip(x.shape, shp)):
        if a != b and a != 1:
            raise NkiValidationError(f"cannot broadcast dimension {d} of size {a} to {b}", instruction=api,
                                     operand="shape", rule="shape-mismatch")
    out_dt = dt.to_dtype(dtype) if dtype is not None else x.dtype
    src = x
    if x.shape[0] != shp[0]:
        src = _partition_broadcast(x, shp[0], api)
    view = src
    for d in builtins.range(1, x.ndim):
        if view.shape[d] != shp[d]:
            view = view.broadcast(d, shp[d])
    out = _new(shp, out_dt, api)
    _isa.tensor_copy(out, view)
    return out


_MATMUL_DTYPES = ("bfloat16", "float16", "float32", "float8_e4m3", "float8_e5m2")


def _partition_broadcast(x: NkiTensor, p: int, api: str) -> NkiTensor:
    src = x
    if x.dtype.name not in _MATMUL_DTYPES:
        src = _new(x.shape, dt.float32, api)
        _isa.tensor_copy(src, x)
    ones = _new((1, p), src.dtype, api)
    _isa.memset(ones, 1.0)
    f = _free(x)
    flat = src.reshape((1, f)) if src.is_contiguous() else src
    res = _new((p, *x.shape[1:]), dt.float32, api)
    res_flat = res.reshape((p, f))
    chunk = 512
    for c0 in builtins.range(0, f, chunk):
        c1 = builtins.min(f, c0 + chunk)
        ps = _new((p, c1 - c0), dt.float32, api, PSUM)
        _isa.nc_matmul(ps, ones, flat[:, c0:c1])
        _isa.tensor_copy(res_flat[:, c0:c1], ps)
    return res


def expand_dims(x: Any, axis: int) -> NkiTensor:
    """A view of x with a size-1 axis inserted (never before the partition dimension on chip)."""
    if not isinstance(x, NkiTensor):
        raise NkiValidationError("operand 'x' of 'expand_dims' must be a tensor", instruction="expand_dims",
                                 operand="x", rule="argument")
    a = int(axis)
    if a < 0:
        a += x.ndim + 1
    if x.is_on_chip and a == 0:
        raise NkiValidationError("expand_dims cannot insert an axis before the partition dimension of an on-chip "
                                 "tile", instruction="expand_dims", operand="axis", rule="indexing")
    return x.expand_dim(a)


def dropout(x: Any, rate: Any, dtype: Any = None) -> NkiTensor:
    """Zero each element with probability ``rate`` (a number or a [P, 1] tile), through
    ``nisa.dropout``; like that instruction, survivors are not rescaled."""
    api = "dropout"
    x = _tile(x, "x", api)
    out = _new(x.shape, dt.to_dtype(dtype) if dtype is not None else x.dtype, api)
    _instr("dropout")(out, x, rate)
    return out


def shared_identity_matrix(n: int, dtype: Any = dt.uint8) -> NkiTensor:
    """An [n, n] identity tile in SBUF (GpSimd iota of p - j, then a compare with 0)."""
    api = "shared_identity_matrix"
    diff = _new((n, n), dt.int32, api)
    _isa.iota(diff, [[-1, n]], offset=0, channel_multiplier=1)
    out = _new((n, n), dtype, api)
    _isa.tensor_scalar(out, diff, OPS["equal"], 0.0)
    return out


def _register() -> None:
    for name in BINARY:
        LANGUAGE_IMPL[name] = lambda x, y, dtype=None, _n=name: binary(_n, x, y, dtype)
    for name in UNARY:
        if name not in ("copy", "bypass", "identity"):
            LANGUAGE_IMPL[name] = lambda x, dtype=None, _n=name: unary(_n, x, dtype)


_register()

__all__ = [
    "all", "broadcast_to", "dropout", "expand_dims", "matmul", "max", "mean", "min", "prod", "rms_norm",
    "shared_identity_matrix", "softmax", "sum", "transpose", "var", "where",
]
