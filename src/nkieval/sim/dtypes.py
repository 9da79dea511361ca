"""NKI data types and cast semantics.

An NKI dtype is a :class:`DType`: a name, the NumPy dtype that stores it (ml_dtypes for
bfloat16 and the fp8 formats), and how values are rounded into it. ``np.dtype(nl.bfloat16)``
works because a DType carries a ``.dtype`` attribute, and a DType compares equal to the
NumPy dtype (or scalar type) it stands for, so kernels may use either.

Cast rules modelled (see docs/simulator.md):

* Engines compute in fp32 and round on output (round-to-nearest-even).
* float → int rounds to nearest even and saturates to the int range; NaN → 0.
* fp8 overflow: ``saturate`` (default; values beyond the format's max clamp to ±max, as the
  Neuron engines do for their cFP8 outputs) or ``ieee`` (ml_dtypes' behaviour: ±inf where
  the format has it, NaN otherwise). ``SimOptions.fp8_overflow`` selects.
* tfloat32 is stored in a 32-bit float whose mantissa is rounded (RNE) to 10 bits;
  ml_dtypes has no tf32, so that one rounding lives here.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from nkieval.sim.errors import NkiValidationError
from nkieval.sim.fpstate import IGNORE_INVALID, IGNORE_OVER_INVALID


class DType:
    """An NKI dtype. Immutable. Deliberately not a dataclass: kernels' test code passes dtypes inside its own
    dataclasses through ``dataclasses.asdict``, which would turn a dataclass dtype into a dict."""

    __slots__ = ("kind", "name", "storage", "tf32")
    name: str
    storage: np.dtype
    kind: str  # "float" | "int" | "uint" | "bool" | "packed" (MX x4)
    tf32: bool

    def __init__(self, name: str, storage: np.dtype, kind: str, tf32: bool = False) -> None:
        for k, v in (("name", name), ("storage", storage), ("kind", kind), ("tf32", tf32)):
            object.__setattr__(self, k, v)

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError(f"DType is immutable (cannot set {key})")

    def __copy__(self) -> DType:
        return self

    def __deepcopy__(self, memo: Any) -> DType:
        return self

    def __reduce__(self) -> Any:
        return (_by_name, (self.name,))

    @property
    def dtype(self) -> np.dtype:
        """The NumPy storage dtype (lets ``np.dtype(DType)`` work)."""
        return self.storage

    @property
    def itemsize(self) -> int:
        return self.storage.itemsize

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        return self.kind in ("int", "uint", "bool")

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DType):
            return self is other or (self.name == other.name)
        try:
            od = np.dtype(other)  # type: ignore[call-overload]
        except TypeError:
            return NotImplemented
        return (not self.tf32 and od == self.storage and self.kind not in ("bool", "packed")) or (
            self.kind == "bool" and od == np.dtype(np.bool_)
        )

    def __hash__(self) -> int:
        return hash(("nkidtype", self.name))

    def __repr__(self) -> str:
        return self.name

    __str__ = __repr__


def _d(name: str, storage: Any, kind: str, **kw: Any) -> DType:
    return DType(name, np.dtype(storage), kind, **kw)


float32 = _d("float32", np.float32, "float")
tfloat32 = _d("tfloat32", np.float32, "float", tf32=True)
bfloat16 = _d("bfloat16", ml_dtypes.bfloat16, "float")
float16 = _d("float16", np.float16, "float")
float8_e4m3 = _d("float8_e4m3", ml_dtypes.float8_e4m3, "float")
float8_e4m3fn = _d("float8_e4m3fn", ml_dtypes.float8_e4m3fn, "float")
float8_e5m2 = _d("float8_e5m2", ml_dtypes.float8_e5m2, "float")
float8_e8m0fnu = _d("float8_e8m0fnu", ml_dtypes.float8_e8m0fnu, "float")
int8 = _d("int8", np.int8, "int")
int16 = _d("int16", np.int16, "int")
int32 = _d("int32", np.int32, "int")
uint8 = _d("uint8", np.uint8, "uint")
uint16 = _d("uint16", np.uint16, "uint")
uint32 = _d("uint32", np.uint32, "uint")
bool_ = _d("bool", np.uint8, "bool")  # stored as uint8 on the device
# 64-bit signed integer (current ``nki`` API only, ``nl.int64``): DMA moves it and ``nisa.scalar_load`` /
# ``scalar_store`` read and write it ("Unlike the compute instructions, scalar_load accepts nl.int64"); no
# compute instruction takes it (``nkieval.sim.isa.core.INT64_INSTRUCTIONS``). NumPy's int64 and the name
# "int64" do not map to it (Beta 1 has no 64-bit type); only this object and int64 kernel arguments of the
# current API do (:func:`argument_dtype`).
int64 = _d("int64", np.int64, "int")
# MX x4-packed types (v4): four fp8 codes in a 32-bit word / four fp4 codes in 16 bits, element 0 in the
# least significant bits. Opaque to the engines except quantize_mx / nc_matmul_mx (nkieval.sim.isa.mx).
float8_e4m3fn_x4 = _d("float8_e4m3fn_x4", np.uint32, "packed")
float8_e5m2_x4 = _d("float8_e5m2_x4", np.uint32, "packed")
float4_e2m1fn_x4 = _d("float4_e2m1fn_x4", np.uint16, "packed")

ALL_DTYPES: tuple[DType, ...] = (
    float32, tfloat32, bfloat16, float16, float8_e4m3, float8_e4m3fn, float8_e5m2,
    float8_e8m0fnu, int8, int16, int32, uint8, uint16, uint32, bool_,
    float8_e4m3fn_x4, float8_e5m2_x4, float4_e2m1fn_x4, int64,
)
#: Dtypes that only data movement accepts (see ``int64`` above); never reached by NumPy dtypes or names.
MOVE_ONLY_DTYPES = (int64,)
PACKED_DTYPES = (float8_e4m3fn_x4, float8_e5m2_x4, float4_e2m1fn_x4)
FLOAT_DTYPES = tuple(d for d in ALL_DTYPES if d.is_float)
INT_DTYPES = tuple(d for d in ALL_DTYPES if d.is_int)
FP8_DTYPES = (float8_e4m3, float8_e4m3fn, float8_e5m2)
#: Formats whose overflow policy matters (finite max below fp32's).
NARROW_FLOAT_DTYPES = (bfloat16, float16, *FP8_DTYPES, float8_e8m0fnu)
BY_NAME: dict[str, DType] = {d.name: d for d in ALL_DTYPES if d not in MOVE_ONLY_DTYPES}
BY_NAME.update({"bool_": bool_, "fp32": float32, "bf16": bfloat16, "fp16": float16, "tf32": tfloat32})
_SINGLETONS: dict[str, DType] = {d.name: d for d in ALL_DTYPES}


def _by_name(name: str) -> DType:
    """Unpickling a DType returns the module's singleton."""
    return _SINGLETONS[name]

_BY_STORAGE: dict[np.dtype, DType] = {}
for _dt in ALL_DTYPES:
    if not _dt.tf32 and _dt.kind not in ("bool", "packed") and _dt not in MOVE_ONLY_DTYPES:
        _BY_STORAGE.setdefault(_dt.storage, _dt)
_BY_STORAGE[np.dtype(np.bool_)] = bool_


class UnknownDTypeError(NkiValidationError, TypeError):
    """A dtype that NKI does not have (e.g. float64), or NumPy's int64 (write ``nl.int64``)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, rule="dtype")


_INT64_SEEN = [False]


def int64_seen() -> bool:
    """Has this process made an ``nl.int64`` tensor? (Lets instructions skip the int64 operand scan until then.)"""
    return _INT64_SEEN[0]


def to_dtype(value: Any) -> DType:
    """Normalise a dtype-like (DType, numpy dtype/type, name) to a :class:`DType`."""
    if isinstance(value, DType):
        if value is int64:
            _INT64_SEEN[0] = True
        return value
    if isinstance(value, str):
        if value in BY_NAME:
            return BY_NAME[value]
        if value == "int64":
            raise UnknownDTypeError(_INT64_HINT)
        raise UnknownDTypeError(f"unknown NKI dtype {value!r}; known: {', '.join(sorted(BY_NAME))}")
    try:
        nd = np.dtype(value)
    except TypeError:
        raise UnknownDTypeError(f"not a dtype: {value!r}") from None
    if nd in _BY_STORAGE:
        return _BY_STORAGE[nd]
    if nd == np.int64:
        raise UnknownDTypeError(_INT64_HINT)
    raise UnknownDTypeError(
        f"dtype {nd} is not an NKI dtype (NKI has float32, bfloat16, float16, tfloat32, fp8 "
        "formats, int8/16/32, uint8/16/32 and bool)"
    )


_INT64_HINT = ("dtype int64 is not accepted as a NumPy dtype or a name: NKI's 64-bit integer is nl.int64 (current "
               "nki API only; Beta 1 has none), which DMA and nisa.scalar_load/scalar_store move but no compute "
               "instruction takes; write nl.int64")


def argument_dtype(array_dtype: Any, *, int64_ok: bool) -> DType:
    """The dtype of a kernel argument (a host array). ``int64_ok`` (the current ``nki`` API) lets int64 arrays
    become ``nl.int64`` HBM tensors; otherwise (Beta 1) they are refused as :func:`to_dtype` refuses them."""
    if int64_ok and np.dtype(array_dtype) == np.int64:
        return to_dtype(int64)
    return to_dtype(array_dtype)


def finfo_max(dt: DType) -> float:
    m = _FINFO_MAX.get(dt.storage)
    if m is None:  # ml_dtypes.finfo is slow to build, and every rounding to a narrow format asks
        m = _FINFO_MAX[dt.storage] = float(ml_dtypes.finfo(dt.storage).max)
    return m


_FINFO_MAX: dict[np.dtype, float] = {}


def round_tf32(x: np.ndarray) -> np.ndarray:
    """Round fp32 values to TF32 (10 explicit mantissa bits), round-to-nearest-even."""
    a = np.ascontiguousarray(x, dtype=np.float32)
    bits = a.view(np.uint32)
    finite = np.isfinite(a)
    lsb = (bits >> np.uint32(13)) & np.uint32(1)
    rounded = (bits + np.uint32(0x0FFF) + lsb) & np.uint32(0xFFFFE000)
    out = np.where(finite, rounded, bits).astype(np.uint32)
    return out.view(np.float32).reshape(a.shape)


def cast(values: np.ndarray, dt: DType, *, fp8_overflow: str = "saturate", precise: bool = True,
         float_to_int: str = "rne") -> np.ndarray:
    """Round fp32 (or any numeric) ``values`` into ``dt``'s storage, with NKI semantics.

    ``precise=False`` models ``NKI_PRECISE_FP=0``: every float format is held as fp32
    (no bf16/fp8 rounding) — integer formats still round and saturate.
    ``float_to_int`` (``SimOptions.float_to_int``): ``"rne"`` rounds floats to nearest-even on the
    way to an integer dtype (hardware), ``"truncate"`` toward zero (the Beta-1 simulator's NumPy cast).
    """
    src = np.asarray(values)
    if dt.kind == "packed":  # raw codes (memset 0, bit-exact moves); never an arithmetic conversion
        return src.astype(dt.storage)
    if dt.is_int:
        info = np.iinfo(np.uint8 if dt.kind == "bool" else dt.storage)
        if src.dtype.kind in "iub":
            wide = src.astype(np.int64)
            return np.clip(wide, info.min, info.max).astype(dt.storage)
        f = src.astype(np.float64)
        f = np.where(np.isnan(f), 0.0, f)
        f = np.trunc(f) if float_to_int == "truncate" else np.rint(f)  # numpy rint is round-half-even
        if dt.kind == "bool":
            return (f != 0).astype(np.uint8)
        return np.clip(f, info.min, info.max).astype(dt.storage)
    # float destination
    if not precise and dt is not float32:
        # all-fp32 mode (NKI_PRECISE_FP=0): float formats are held unrounded in fp32 storage
        return src.astype(np.float32)
    return _round_float(src, dt, fp8_overflow)


def storage_dtype(dt: DType, precise: bool = True) -> np.dtype:
    """The NumPy dtype a tensor of ``dt`` is stored in under the given precision mode."""
    if not precise and dt.is_float:
        return np.dtype(np.float32)
    return dt.storage


def _round_float(src: np.ndarray, dt: DType, fp8_overflow: str) -> np.ndarray:
    if dt.tf32:
        return round_tf32(src.astype(np.float32))
    if dt is float32:
        return src.astype(np.float32)
    f = src.astype(np.float32, copy=False)  # read only below: the result is a new array of dt.storage
    if fp8_overflow == "saturate" and (dt in NARROW_FLOAT_DTYPES or (dt.kind == "float" and not _has_inf(dt))) \
            and not _within(f, finfo_max(dt)):  # (values all finite and in range: saturation changes nothing)
        if dt in NARROW_FLOAT_DTYPES:
            m = finfo_max(dt)
            with IGNORE_INVALID():
                f = np.where(np.isfinite(f), np.clip(f, -m, m), f)
        if dt.kind == "float" and not _has_inf(dt):
            # formats without inf (e4m3fn, e8m0): ±inf saturates to ±max like a finite overflow
            m = finfo_max(dt)
            f = np.where(np.isinf(f), np.sign(f) * m, f)
    if dt is bfloat16 and f.dtype == _F32 and f.ndim:
        return f32_to_bf16(f)
    with IGNORE_OVER_INVALID():
        return f.astype(dt.storage)


_F32 = np.dtype(np.float32)
_BF16 = np.dtype(ml_dtypes.bfloat16)


def f32_to_bf16(f: np.ndarray) -> np.ndarray:
    """``f.astype(bfloat16)`` (round to nearest even) for fp32 ``f``, bit for bit, in about half the time: ml_dtypes
    converts element by element through a scalar routine, this rounds the bit patterns with five whole-array integer
    operations. A finite or infinite value's pattern ``u`` rounds to ``(u + 0x7fff + (u >> 16 & 1)) >> 16`` (ties to
    the even upper half; a carry out of the mantissa steps the exponent, so the largest values round to inf, as
    ml_dtypes does); a NaN becomes the quiet NaN ``0x7fc0`` with its sign (ml_dtypes drops the payload). Checked
    against ``astype`` on all 2**32 fp32 patterns (docs/compat-public.md, eleventh pass)."""
    u = f.view(np.uint32)
    t = u >> 16
    t &= 1
    t += u  # (no wrap below 2**32: the largest non-NaN pattern is -inf's, 0xff800000)
    t += 0x7FFF
    t >>= 16
    out = t.astype(np.uint16)
    if f.size and np.isnan(f.max()):  # (max propagates NaN: one pass finds whether there is any)
        nan = np.isnan(f)
        out[nan] = (u[nan] >> 16).astype(np.uint16) & 0x8000 | 0x7FC0
    return out.view(_BF16)


def _within(f: np.ndarray, m: float) -> bool:
    """Whether every value of ``f`` lies in [-m, m]: False for NaN or ±inf (the min/max of an array with a NaN
    is NaN, which compares False), and True for no values."""
    if f.size == 0:
        return True
    return bool(f.max() <= m) and bool(f.min() >= -m)


def _has_inf(dt: DType) -> bool:
    return dt not in (float8_e4m3fn, float8_e8m0fnu)


def promote(a: DType, b: DType) -> DType:
    """Beta-1 / nl.* type promotion (documented in the Beta-1 shared API page)."""
    if a is b or a == b:
        return a
    if a.is_float and b.is_float:
        pair = {a.name, b.name}
        if pair == {"float16", "bfloat16"}:
            return float32
        if pair <= {"float8_e4m3", "float8_e5m2", "float8_e4m3fn"}:
            return bfloat16
        return a if a.itemsize >= b.itemsize else b
    if a.is_float:
        return a
    if b.is_float:
        return b
    if a.kind == b.kind or a.kind == "bool" or b.kind == "bool":
        if a.kind == "bool":
            return b
        if b.kind == "bool":
            return a
        return a if a.itemsize >= b.itemsize else b
    signed, unsigned = (a, b) if a.kind == "int" else (b, a)
    if signed.itemsize > unsigned.itemsize:
        return signed
    if unsigned.itemsize == 1:
        return int16
    if unsigned.itemsize == 2:
        return int32
    return float32
