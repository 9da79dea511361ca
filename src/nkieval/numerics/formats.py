"""Number formats: one table of every format the numerics standard reasons about.

Why a table of our own instead of ``np.finfo``: the standard needs facts NumPy does not
carry in one place (unit roundoff ``u = 2**-p``, whether a format has infinities, the
format TF32 that has no storage type, integer ranges for exact-arithmetic checks), and it
needs them under the names kernels and TOML task files use (``bf16``, ``fp8_e4m3``,
``tf32``). Storage and rounding go through ``ml_dtypes``/NumPy casts; the only hand-written
rounding is :func:`round_mantissa`, a documented model of a register that keeps fewer
mantissa bits than fp32 (TF32, limited-precision FP8 accumulators), which ml_dtypes does
not provide.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Literal

import ml_dtypes
import numpy as np

__all__ = [
    "FORMATS",
    "Format",
    "UnknownDtypeError",
    "format_names",
    "format_of",
    "get_format",
    "next_toward",
    "representable",
    "round_mantissa",
    "round_stochastic",
    "round_to",
    "ulp_key",
]


class UnknownDtypeError(ValueError):
    """A dtype name that is not in :data:`FORMATS` (message lists close matches)."""


@dataclass(frozen=True)
class Format:
    """Facts about one number format.

    Attributes:
        name: canonical name (``fp32``, ``bf16``, ``fp8_e4m3fn``, ``int32`` ...).
        kind: ``"float"`` or ``"int"``.
        storage: NumPy/ml_dtypes dtype that holds every value of the format exactly
            (TF32 is stored in float32).
        p: significand bits including the implicit bit (0 for integers).
        max: largest finite value.
        tiny: smallest positive normal value (1 for integers).
        subnormal: smallest positive value (1 for integers).
        has_inf: whether the format encodes infinities (OCP ``e4m3fn`` does not).
        bits: width of the storage encoding used for ULP keys.
        note: where the facts come from.
    """

    name: str
    kind: Literal["float", "int"]
    storage: np.dtype
    p: int
    max: float
    tiny: float
    subnormal: float
    has_inf: bool
    bits: int
    note: str = ""

    @property
    def u(self) -> float:
        """Unit roundoff ``2**-p`` (0 for integers: integer arithmetic is exact in range)."""
        return 0.0 if self.kind == "int" else 2.0**-self.p

    @property
    def is_int(self) -> bool:
        return self.kind == "int"

    @property
    def min(self) -> float:
        """Most negative finite value."""
        if self.kind == "int":
            return float(np.iinfo(self.storage).min)
        return -self.max

    def __repr__(self) -> str:  # short: formats appear inside recipes and verdict dumps
        return f"Format({self.name})"


def _float(name: str, storage, p: int, mx: float, tiny: float, sub: float, inf: bool, note: str) -> Format:
    st = np.dtype(storage)
    return Format(name, "float", st, p, mx, tiny, sub, inf, st.itemsize * 8, note)


def _int(name: str, storage) -> Format:
    st = np.dtype(storage)
    info = np.iinfo(st)
    return Format(name, "int", st, 0, float(info.max), 1.0, 1.0, False, st.itemsize * 8, "NumPy iinfo")


FORMATS: dict[str, Format] = {
    f.name: f
    for f in [
        _float("fp64", np.float64, 53, float.fromhex("0x1.fffffffffffffp1023"), 2.0**-1022, 2.0**-1074, True,
               "IEEE binary64; the oracle's own format"),
        _float("fp32", np.float32, 24, float.fromhex("0x1.fffffep127"), 2.0**-126, 2.0**-149, True,
               "IEEE binary32"),
        _float("tf32", np.float32, 11, float.fromhex("0x1.ffcp127"), 2.0**-126, 2.0**-136, True,
               "1-8-10 tensor-float; stored in float32, rounded by round_mantissa(x, 10)"),
        _float("fp16", np.float16, 11, 65504.0, 2.0**-14, 2.0**-24, True, "IEEE binary16"),
        _float("bf16", ml_dtypes.bfloat16, 8, float.fromhex("0x1.fep127"), 2.0**-126, 2.0**-133, True,
               "bfloat16 1-8-7 (ml_dtypes.bfloat16)"),
        _float("fp8_e4m3", ml_dtypes.float8_e4m3, 4, 240.0, 2.0**-6, 2.0**-9, True,
               "IEEE-like e4m3 = Neuron legacy float8_e4m3, max 240 (ml_dtypes.float8_e4m3)"),
        _float("fp8_e4m3fn", ml_dtypes.float8_e4m3fn, 4, 448.0, 2.0**-6, 2.0**-9, False,
               "OCP e4m3fn, no inf, max 448 (ml_dtypes.float8_e4m3fn)"),
        _float("fp8_e5m2", ml_dtypes.float8_e5m2, 3, 57344.0, 2.0**-14, 2.0**-16, True,
               "e5m2, max 57344 (ml_dtypes.float8_e5m2)"),
        _float("fp8_e3m4", ml_dtypes.float8_e3m4, 5, 15.5, 2.0**-2, 2.0**-6, True,
               "e3m4, max 15.5 (ml_dtypes.float8_e3m4)"),
        _int("int8", np.int8),
        _int("int16", np.int16),
        _int("int32", np.int32),
        _int("int64", np.int64),
        _int("uint8", np.uint8),
        _int("uint16", np.uint16),
        _int("uint32", np.uint32),
    ]
}

# Names people write, mapped to canonical names. NumPy/ml_dtypes dtype names are included
# so that ``format_of(array)`` works through the same table.
_ALIASES: dict[str, str] = {
    "float64": "fp64", "f64": "fp64", "double": "fp64",
    "float32": "fp32", "f32": "fp32", "single": "fp32", "float": "fp32",
    "tfloat32": "tf32",
    "float16": "fp16", "f16": "fp16", "half": "fp16",
    "bfloat16": "bf16",
    "float8_e4m3": "fp8_e4m3", "e4m3": "fp8_e4m3", "f8e4m3": "fp8_e4m3",
    "float8_e4m3fn": "fp8_e4m3fn", "e4m3fn": "fp8_e4m3fn", "f8e4m3fn": "fp8_e4m3fn",
    "float8_e5m2": "fp8_e5m2", "e5m2": "fp8_e5m2", "f8e5m2": "fp8_e5m2",
    "float8_e3m4": "fp8_e3m4", "e3m4": "fp8_e3m4",
    "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
    "u8": "uint8", "u16": "uint16", "u32": "uint32",
}


def format_names() -> list[str]:
    """Canonical names, finest float first, then integers."""
    return list(FORMATS)


def get_format(x: str | Format | np.dtype | type) -> Format:
    """Resolve a name, alias, NumPy/ml_dtypes dtype or :class:`Format`.

    Raises:
        UnknownDtypeError: with the closest known names, so a typo in a TOML task file
            reads as "unknown dtype 'bf61'; did you mean 'bf16'?".
    """
    if isinstance(x, Format):
        return x
    if not isinstance(x, str):
        try:
            x = np.dtype(x).name
        except TypeError as exc:
            raise UnknownDtypeError(f"cannot interpret {x!r} as a dtype") from exc
    key = x.strip().lower().replace("-", "_")
    key = _ALIASES.get(key, key)
    if key in FORMATS:
        return FORMATS[key]
    known = sorted(set(FORMATS) | set(_ALIASES))
    close = difflib.get_close_matches(key, known, n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    raise UnknownDtypeError(f"unknown dtype {x!r}{hint} Known: {', '.join(FORMATS)}")


def format_of(arr: np.ndarray) -> Format:
    """The format of an array's storage dtype (``bool`` counts as ``uint8``)."""
    dt = np.asarray(arr).dtype
    if dt == np.bool_:
        return FORMATS["uint8"]
    return get_format(dt)


# --------------------------------------------------------------------------- rounding


def round_mantissa(x: np.ndarray, bits: int, mode: Literal["rne", "truncate"] = "rne") -> np.ndarray:
    """Round float32 values to ``bits`` explicit mantissa bits, keeping the fp32 exponent.

    This is a *model* of registers that ml_dtypes has no type for: TF32 operands
    (``bits=10``, RNE) and limited-precision FP8 accumulators (13-14 bits, often
    truncating). It operates on the fp32 bit pattern: add half an ulp of the kept width
    (plus the tie-to-even bit) and clear the dropped bits; a carry into the exponent is the
    correct RNE result, and a carry into the all-ones exponent gives inf. NaN/inf pass
    through unchanged.
    """
    if not 0 <= bits <= 23:
        raise ValueError(f"bits must be in [0, 23], got {bits}")
    x32 = np.asarray(x, dtype=np.float32)
    drop = 23 - bits
    if drop == 0:
        return x32.copy()
    b = x32.view(np.uint32).astype(np.uint64)
    finite = np.isfinite(x32)
    mask = np.uint64((1 << drop) - 1)
    if mode == "rne":
        lsb = (b >> np.uint64(drop)) & np.uint64(1)
        b2 = (b + (np.uint64(1 << (drop - 1)) - np.uint64(1)) + lsb) & ~mask
    elif mode == "truncate":
        b2 = b & ~mask
    else:
        raise ValueError(f"mode must be 'rne' or 'truncate', got {mode!r}")
    out = np.where(finite, b2, b).astype(np.uint32).view(np.float32)
    return out


def _round_to_odd_f32(x64: np.ndarray) -> np.ndarray:
    """float64 -> float32 rounding to odd: a correct first step before rounding to a
    format with at most 22 significand bits (here TF32), avoiding double rounding."""
    r = x64.astype(np.float32)
    r64 = r.astype(np.float64)
    with np.errstate(invalid="ignore"):
        away = np.isfinite(x64) & (np.abs(r64) > np.abs(x64))
    r = np.where(away, np.nextafter(r, np.float32(0)), r)
    inexact = np.isfinite(x64) & (r.astype(np.float64) != x64)
    bits = r.view(np.uint32) | np.where(inexact, np.uint32(1), np.uint32(0))
    return bits.view(np.float32)


def round_to(
    x: np.ndarray | float,
    fmt: str | Format,
    *,
    overflow: Literal["ieee", "saturate"] = "ieee",
) -> np.ndarray:
    """Round values once (RNE) to ``fmt`` and return them as float64.

    ``overflow="ieee"`` keeps the storage cast's overflow result (inf, or NaN for formats
    without inf such as ``fp8_e4m3fn``, exactly as ml_dtypes does); ``"saturate"`` clamps
    finite values to ±max first, as NVIDIA's ``__NV_SATFINITE`` conversions do. Integer
    formats round half to even and saturate, as Neuron's fp32->int casts do.
    """
    f = get_format(fmt)
    x64 = np.asarray(x, dtype=np.float64)
    if f.kind == "int":
        with np.errstate(invalid="ignore"):
            r = np.clip(np.rint(x64), f.min, f.max)
        return r
    if overflow == "saturate":
        with np.errstate(invalid="ignore"):
            x64 = np.where(np.isfinite(x64), np.clip(x64, -f.max, f.max), x64)
    if f.name == "fp64":
        return x64.copy()
    if f.name == "tf32":
        return round_mantissa(_round_to_odd_f32(x64), 10, "rne").astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        return x64.astype(f.storage).astype(np.float64)


def representable(x: np.ndarray, fmt: str | Format) -> np.ndarray:
    """Boolean mask: finite values that ``fmt`` holds exactly."""
    f = get_format(fmt)
    x64 = np.asarray(x, dtype=np.float64)
    if f.kind == "float" and f.storage not in (np.float32, np.float64) and f.name != "tf32":
        # Fast path (same mask): a value of a format no finer and no wider than fp32 is an
        # fp32 value first, and fp32 -> narrow casts are several times cheaper than float64 ->
        # narrow ones in ml_dtypes. Membership does not depend on how the cast rounds: an
        # exactly representable value converts to itself, any other value to something else
        # (a neighbour, 0, inf or NaN), so the round-trip equality is exact membership.
        with np.errstate(over="ignore", invalid="ignore"):
            x32 = x64.astype(np.float32)
            ok = x32 == x64
            ok &= np.isfinite(x32)
            ok &= x32.astype(f.storage).astype(np.float32) == x32
        return ok
    with np.errstate(invalid="ignore"):
        return np.isfinite(x64) & (round_to(x64, f) == x64)


def next_toward(r: np.ndarray, fmt: str | Format, direction: float) -> np.ndarray:
    """Neighbour of the ``fmt``-representable values ``r`` in ``direction`` (+1 or -1)."""
    f = get_format(fmt)
    r64 = np.asarray(r, dtype=np.float64)
    if f.kind == "int":
        return r64 + np.sign(direction)
    if f.name == "tf32":
        r32 = r64.astype(np.float32)
        up = np.sign(direction) > 0
        # step 2**13 units of the fp32 pattern, with the usual sign-magnitude care
        b = r32.view(np.uint32).astype(np.int64)
        neg = (b >> 31) & 1
        mag = b & 0x7FFFFFFF
        toward_larger_mag = np.where(neg == 1, not up, up)
        at_zero = mag == 0
        mag2 = np.where(toward_larger_mag, mag + (1 << 13), mag - (1 << 13))
        sign2 = np.where(at_zero, 0 if up else 1, neg)
        mag2 = np.where(at_zero, 1 << 13, mag2)
        out = ((sign2 << 31) | mag2).astype(np.uint32).view(np.float32)
        return out.astype(np.float64)
    target = f.max if direction > 0 else -f.max
    st = r64.astype(f.storage)
    return np.nextafter(st, np.full(st.shape, target, dtype=f.storage)).astype(np.float64)


def round_stochastic(x: np.ndarray, fmt: str | Format, rng: np.random.Generator) -> np.ndarray:
    """Stochastic rounding to ``fmt``: round up with probability equal to the distance
    from the lower neighbour, in units of the gap (Neuron's SR mode). Returns float64."""
    f = get_format(fmt)
    x64 = np.asarray(x, dtype=np.float64)
    r = round_to(x64, f)
    with np.errstate(invalid="ignore"):
        below = r <= x64
    lo = np.where(below, r, next_toward(r, f, -1.0))
    hi = np.where(below, next_toward(r, f, +1.0), r)
    gap = hi - lo
    with np.errstate(invalid="ignore", divide="ignore"):
        p_up = np.where(gap > 0, (x64 - lo) / gap, 0.0)
    draw = rng.random(x64.shape)
    out = np.where(draw < p_up, hi, lo)
    exact = r == x64
    return np.where(exact | ~np.isfinite(x64) | ~np.isfinite(gap), r, out)


def ulp_key(x: np.ndarray, fmt: str | Format) -> np.ndarray:
    """Monotone integer key of values rounded to ``fmt``: the ULP distance between two
    values is the absolute difference of their keys (+0 and -0 share key 0; inf is one
    step past max). NaNs map to an arbitrary key; mask them out first."""
    f = get_format(fmt)
    if f.kind == "float" and f.name not in ("tf32", "fp64"):
        # one cast straight to the storage type: round_to's float64 round trip followed by a
        # second (exact) cast gives the same bits, at three times the cost
        xa = np.asarray(x)
        if xa.dtype != f.storage:
            xa = xa if xa.dtype == np.float64 else xa.astype(np.float64)
            with np.errstate(over="ignore", invalid="ignore"):
                xa = xa.astype(f.storage)
        st = xa
    else:
        r = round_to(x, f)
    if f.kind == "int":
        with np.errstate(invalid="ignore"):
            return np.nan_to_num(r).astype(np.int64)
    if f.name == "tf32":
        bits = r.astype(np.float32).view(np.uint32).astype(np.int64) >> 13
        nbits = 19
    elif f.name == "fp64":
        b = r.view(np.int64)
        mag = b & np.int64(0x7FFFFFFFFFFFFFFF)
        return np.where(b < 0, -mag, mag)
    else:
        uint = {8: np.uint8, 16: np.uint16, 32: np.uint32}[f.bits]
        bits = st.view(uint)
        half = 1 << (f.bits - 1)
        key = (bits & uint(half - 1)).astype(np.int64)
        np.negative(key, out=key, where=bits >= half)
        return key
    sign = (bits >> (nbits - 1)) & 1
    mag = bits & ((1 << (nbits - 1)) - 1)
    return np.where(sign == 1, -mag, mag)
