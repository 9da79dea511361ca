"""C arithmetic on thread vectors: the usual arithmetic conversions, conversions between types, fp32
operations rounded per operation, FMA, flush-to-zero, and the CUDA math library."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from nkieval.cuda.values import (
    BF16,
    BOOL,
    F16,
    F32,
    F64,
    FP8_E4M3,
    FP8_E5M2,
    I32,
    I64,
    LOW_FLOATS,
    U32,
    U64,
)

_INT_RANK = {np.dtype(np.int8): 1, np.dtype(np.uint8): 1, np.dtype(np.int16): 2, np.dtype(np.uint16): 2,
             I32: 3, U32: 3, I64: 4, U64: 4, BOOL: 0}
_FLT_RANK = {FP8_E4M3: 1, FP8_E5M2: 1, BF16: 2, F16: 2, F32: 3, F64: 4}
FLT_MIN = np.float32(1.1754943508222875e-38)


_NUMPY_VALUES = (np.ndarray, np.generic)  # (a tuple: isinstance of a union is slower, and this runs per operand)


def dtype(v: Any) -> np.dtype:
    return v.dtype if isinstance(v, _NUMPY_VALUES) else np.asarray(v).dtype


def is_float(dt: np.dtype) -> bool:
    return dt in _FLT_RANK


def promote(a: np.dtype, b: np.dtype) -> np.dtype:
    """C's usual arithmetic conversions (half and bfloat16 operators keep their type when both sides have
    it; fp8 has no arithmetic and converts to float)."""
    if a == b and a not in (FP8_E4M3, FP8_E5M2, BOOL) and _INT_RANK.get(a, 9) >= 3:
        return a
    fa, fb = a in _FLT_RANK, b in _FLT_RANK
    if fa or fb:
        if a == b and a in (BF16, F16):
            return a
        best = max((t for t in (a, b) if t in _FLT_RANK), key=lambda t: _FLT_RANK[t])
        return F32 if best in LOW_FLOATS else best
    a, b = (I32 if _INT_RANK[a] < 3 else a), (I32 if _INT_RANK[b] < 3 else b)
    if a == b:
        return a
    sa, sb = a.kind == "i", b.kind == "i"
    if sa == sb:
        return a if _INT_RANK[a] >= _INT_RANK[b] else b
    s, u = (a, b) if sa else (b, a)
    if _INT_RANK[u] >= _INT_RANK[s]:
        return u
    return s  # int64 holds every uint32


def cast(v: Any, dt: np.dtype) -> Any:
    """C conversion of ``v`` to ``dt`` (float to int truncates; to fp8 saturates as CUDA's constructor does)."""
    src = dtype(v)
    if src == dt:
        return v
    if dt == BOOL:
        return np.not_equal(v, 0) if isinstance(v, np.ndarray) else np.bool_(v != 0)
    if dt in (FP8_E4M3, FP8_E5M2):
        x = np.asarray(v, np.float32)
        lim = 448.0 if dt == FP8_E4M3 else 57344.0
        x = np.where(np.isnan(x), x, np.clip(x, -lim, lim))
        out = x.astype(dt)
        return out if isinstance(v, np.ndarray) else out[()]
    if src in (BF16, F16, FP8_E4M3, FP8_E5M2) and dt.kind in "iu":
        v = np.asarray(v, np.float32) if isinstance(v, np.ndarray) else np.float32(v)
        src = F32
    if is_float(src) and dt.kind in "iu":
        with np.errstate(invalid="ignore"):
            x = np.trunc(v)
            x = np.where(np.isfinite(x), x, 0)
            info = np.iinfo(dt)
            x = np.clip(x, info.min, info.max)
            out = np.asarray(x).astype(dt)
        return out if isinstance(v, np.ndarray) else out[()]
    if isinstance(v, np.ndarray):
        return v.astype(dt)
    return np.asarray(v).astype(dt)[()]


def ftz(x: Any) -> Any:
    """Flush fp32 subnormals to (signed) zero, as ``--use_fast_math`` (``-ftz=true``) does."""
    if dtype(x) != F32:
        return x
    return np.where(np.abs(x) < FLT_MIN, np.float32(0) * np.sign(x), x).astype(F32) \
        if isinstance(x, np.ndarray) else (np.float32(0.0) * np.sign(x) if abs(x) < FLT_MIN else x)


def c_div(a: Any, b: Any, dt: np.dtype) -> Any:
    if dt.kind in "iu":
        bz = np.where(b == 0, 1, b) if isinstance(b, np.ndarray) else (b if b != 0 else dt.type(1))
        if dt.kind == "u":
            return (a // bz).astype(dt) if isinstance(a, np.ndarray) or isinstance(bz, np.ndarray) \
                else dt.type(a // bz)
        q = np.abs(a) // np.abs(bz)
        q = np.where((a < 0) != (bz < 0), -q, q)
        return cast(q, dt)
    return a / b


def c_mod(a: Any, b: Any, dt: np.dtype) -> Any:
    if dt.kind in "iu":
        q = c_div(a, b, dt)
        return cast(a - q * b, dt)
    return np.fmod(a, b)


def fma32(x: Any, y: Any, z: Any) -> Any:
    """fp32 fused multiply-add: the exact product (exact in fp64), one rounding of the sum (via fp64: a
    double rounding that differs from a single one in a vanishingly rare set of inputs)."""
    r = np.asarray(x, F64) * np.asarray(y, F64)
    zv = np.asarray(z, F64)
    if isinstance(r, np.ndarray) and (zv.ndim == 0 or zv.shape == r.shape):
        r += zv  # (in place: the product is a fresh array)
    else:
        r = r + zv
    out = np.asarray(r).astype(F32)
    return out if out.ndim else out[()]


def _f32(fn: Any) -> Any:
    def g(x: Any) -> Any:
        out = np.asarray(fn(np.asarray(x, F64))).astype(F32)
        return out if out.ndim else out[()]
    return g


def _f64(fn: Any) -> Any:
    def g(x: Any) -> Any:
        out = np.asarray(fn(np.asarray(x, F64)), F64)
        return out if out.ndim else out[()]
    return g


_erf = np.frompyfunc(math.erf, 1, 1)
_erfc = np.frompyfunc(math.erfc, 1, 1)


def _erf64(x: np.ndarray) -> np.ndarray:
    return np.asarray(_erf(x), F64)


def _erfc64(x: np.ndarray) -> np.ndarray:
    return np.asarray(_erfc(x), F64)


def _rsqrt(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return 1.0 / np.sqrt(x)


def _normcdf(x: np.ndarray) -> np.ndarray:
    return 0.5 * _erfc64(-x / math.sqrt(2.0))


#: One-argument math functions in fp32 (computed in fp64, rounded once: within CUDA's documented 1-4 ulp).
UNARY32: dict[str, Any] = {
    "expf": _f32(np.exp), "exp2f": _f32(np.exp2), "expm1f": _f32(np.expm1), "logf": _f32(np.log),
    "log2f": _f32(np.log2), "log10f": _f32(np.log10), "log1pf": _f32(np.log1p), "sqrtf": _f32(np.sqrt),
    "rsqrtf": _f32(_rsqrt), "tanhf": _f32(np.tanh), "sinf": _f32(np.sin), "cosf": _f32(np.cos),
    "tanf": _f32(np.tan), "erff": _f32(_erf64), "erfcf": _f32(_erfc64), "fabsf": _f32(np.abs),
    "floorf": _f32(np.floor), "ceilf": _f32(np.ceil), "truncf": _f32(np.trunc),
    "roundf": _f32(lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5)), "rintf": _f32(np.rint),
    "normcdff": _f32(_normcdf), "atanf": _f32(np.arctan), "asinf": _f32(np.arcsin), "acosf": _f32(np.arccos),
    "sinhf": _f32(np.sinh), "coshf": _f32(np.cosh), "cbrtf": _f32(np.cbrt),
    "__fsqrt_rn": _f32(np.sqrt), "__frsqrt_rn": _f32(_rsqrt),
    "__frcp_rn": _f32(lambda x: 1.0 / x),
}
UNARY64: dict[str, Any] = {
    "exp": _f64(np.exp), "exp2": _f64(np.exp2), "expm1": _f64(np.expm1), "log": _f64(np.log),
    "log2": _f64(np.log2), "log10": _f64(np.log10), "log1p": _f64(np.log1p), "sqrt": _f64(np.sqrt),
    "rsqrt": _f64(_rsqrt), "tanh": _f64(np.tanh), "sin": _f64(np.sin), "cos": _f64(np.cos), "tan": _f64(np.tan),
    "erf": _f64(_erf64), "erfc": _f64(_erfc64), "fabs": _f64(np.abs), "floor": _f64(np.floor),
    "ceil": _f64(np.ceil), "trunc": _f64(np.trunc), "round": _f64(lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5)),
    "normcdf": _f64(_normcdf), "atan": _f64(np.arctan), "cbrt": _f64(np.cbrt), "sinh": _f64(np.sinh),
    "cosh": _f64(np.cosh),
}
#: C++ overloads: ``exp(float)`` is the float function.
OVERLOAD_F32 = {k: k + "f" for k in UNARY64}


def fast_exp(x: Any) -> Any:
    """``__expf``: ``ex2.approx(x * log2(e))``; the product is rounded to fp32 first (the approximation's
    dominant error for large |x|), the power of two is then taken exactly and rounded."""
    t = np.asarray(x, F32) * np.float32(1.4426950408889634)
    out = np.exp2(np.asarray(t, F64)).astype(F32)
    return out if out.ndim else out[()]


def fast_log(x: Any) -> Any:
    """``__logf``: ``lg2.approx(x) * ln(2)`` with the product rounded to fp32."""
    with np.errstate(divide="ignore", invalid="ignore"):
        l2 = np.log2(np.asarray(x, F64)).astype(F32)
    out = (l2 * np.float32(0.6931471805599453)).astype(F32)
    return out if out.ndim else out[()]


def fast_div(a: Any, b: Any) -> Any:
    """``__fdividef`` / ``div.approx``: ``a * rcp(b)``, two roundings."""
    with np.errstate(divide="ignore", invalid="ignore"):
        r = (np.float32(1.0) / np.asarray(b, F32)).astype(F32)
        out = (np.asarray(a, F32) * r).astype(F32)
    return out if out.ndim else out[()]


def fast_pow(a: Any, b: Any) -> Any:
    """``__powf``: ``exp2(b * log2(a))`` with fp32 intermediates."""
    with np.errstate(divide="ignore", invalid="ignore"):
        l2 = np.log2(np.asarray(a, F64)).astype(F32)
        t = (np.asarray(b, F32) * l2).astype(F32)
        out = np.exp2(t.astype(F64)).astype(F32)
    return out if out.ndim else out[()]


#: ``--use_fast_math`` maps these to their approximate intrinsics.
FAST_MATH_MAP = {"expf": "__expf", "logf": "__logf", "powf": "__powf", "exp10f": "__exp10f",
                 "sinf": "__sinf", "cosf": "__cosf", "tanf": "__tanf", "log2f": "__log2f"}
