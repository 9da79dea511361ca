"""Seeded input families, so that the gates mean something.

Why families: a correct kernel and a wrong one often agree on N(0,1) data; they part ways
on one-signed data (error growth), cancellation (|y| ≪ S), offsets (one-pass variance),
wide dynamic range, values near the format's max or min normal, NaN/Inf, and integers
(where every summation order is exact, so outputs must match bitwise). Each family is one
record in :data:`FAMILIES`; ``random`` says whether rounding errors on it behave randomly,
which is what licenses the probabilistic bound and the z-score gate.

Every array is generated in float64 from ``numpy.random.default_rng((seed, family, role))``
and rounded once to the requested format, so the same seed always gives the same bits.
Sizes in :data:`K_SIZES` and :data:`FREE_SIZES` straddle the 128-row tile and 512-column
PSUM-bank boundaries.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .formats import Format, get_format, round_to

__all__ = [
    "FAMILIES",
    "FREE_SIZES",
    "K_SIZES",
    "InputFamily",
    "generate",
    "is_random_family",
    "matmul_inputs",
    "reduction_inputs",
]

K_SIZES: tuple[int, ...] = (64, 127, 128, 129, 511, 512, 513, 1024, 4096, 16384)
FREE_SIZES: tuple[int, ...] = (1, 3, 127, 128, 129, 511, 512, 513)


@dataclass(frozen=True)
class InputFamily:
    """One input distribution.

    ``make(rng, shape, fmt, role, limit)`` returns float64 values; ``limit`` is the largest
    magnitude an element may take so the op's result stays inside the output format.
    ``role`` is ``"a"``/``"b"`` for the two matmul operands, ``"x"`` otherwise (the last
    axis is the reduction axis).
    """

    name: str
    random: bool
    doc: str
    make: Callable[[np.random.Generator, tuple[int, ...], Format, str, float], np.ndarray]


def _signs(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.choice(np.array([-1.0, 1.0]), size=shape)


def _normal(rng, shape, fmt, role, limit):
    return np.clip(rng.standard_normal(shape), -limit, limit)


def _uniform(rng, shape, fmt, role, limit):
    return rng.random(shape) * min(1.0, limit)


def _heavy(rng, shape, fmt, role, limit):
    return np.clip(rng.standard_t(2.0, size=shape), -limit, limit)


def _pairs_last(rng: np.random.Generator, shape: tuple[int, ...], axis: int, base: np.ndarray) -> np.ndarray:
    """Put ``+v`` and ``-v`` pairs along ``axis`` in random order (exact zero sum)."""
    moved = list(shape)
    n = moved.pop(axis)
    half = n // 2
    v = base[..., :half]
    out = np.concatenate([v, -v, np.zeros((*v.shape[:-1], n - 2 * half))], axis=-1)
    perm = rng.permuted(np.broadcast_to(np.arange(n), out.shape), axis=-1)
    out = np.take_along_axis(out, perm, axis=-1)
    return np.moveaxis(out, -1, axis)


def _cancellation(rng, shape, fmt, role, limit):
    off = min(100.0, limit / 2)
    # noise must survive rounding to the format: at least a couple of its ulps at `off`
    rel = max(0.1, 2.0 ** (2 - fmt.p)) if fmt.kind == "float" else 0.1
    if role == "a":
        return off + rng.standard_normal(shape) * off * rel
    if role == "b":
        if len(shape) < 2:
            return rng.standard_normal(shape)
        base = np.moveaxis(rng.standard_normal(shape), -2, -1)
        return _pairs_last(rng, shape, -2, base)
    if not shape:
        return np.array(rng.standard_normal())
    base = off + rng.standard_normal(shape) * off * rel
    return _pairs_last(rng, shape, -1, base) + rng.standard_normal(shape) * off * rel


def _offset(rng, shape, fmt, role, limit):
    ratio = min(1000.0, 2.0 ** (fmt.p + 2)) if fmt.kind == "float" else 1000.0
    mu = min(1000.0, limit / 2)
    return mu + rng.standard_normal(shape) * (mu / ratio)


def _log_range(fmt: Format, limit: float) -> float:
    hi = math.log2(max(limit, 2.0)) - 1
    lo = -math.log2(1.0 / fmt.tiny) / 2 if fmt.kind == "float" else 0.0
    return max(1.0, min(20.0, hi, -lo))


def _ill(rng, shape, fmt, role, limit):
    r = _log_range(fmt, limit)
    return _signs(rng, shape) * 2.0 ** rng.uniform(-r, r, size=shape)


def _large(rng, shape, fmt, role, limit):
    return _signs(rng, shape) * rng.uniform(0.5, 1.0, size=shape) * limit


def _tiny(rng, shape, fmt, role, limit):
    if role == "b":
        return np.clip(rng.standard_normal(shape), -limit, limit)
    lo = math.log2(fmt.subnormal)
    hi = math.log2(4 * fmt.tiny)
    tiny = _signs(rng, shape) * 2.0 ** rng.uniform(lo, hi, size=shape)
    # a quarter of the elements are ordinary, so outputs are not all inside the FTZ band
    # (where an all-zeros result would be acceptable and the test could not discriminate)
    normal = np.clip(rng.standard_normal(shape), -limit, limit)
    return np.where(rng.random(shape) < 0.25, normal, tiny)


def _special(rng, shape, fmt, role, limit):
    x = np.clip(rng.standard_normal(shape), -limit, limit)
    if x.size == 0:
        return x
    specials = np.array([np.nan, np.inf, -np.inf]) if fmt.has_inf else np.array([np.nan])
    if len(shape) >= 2:
        flat = x.reshape(-1, shape[-1]) if role != "b" else np.moveaxis(x, -1, 0).reshape(shape[-1], -1)
        rows = rng.choice(flat.shape[0], size=max(1, flat.shape[0] // 4), replace=False)
        cols = rng.integers(0, flat.shape[1], size=rows.size)
        flat[rows, cols] = rng.choice(specials, size=rows.size)
        x = flat.reshape(shape) if role != "b" else np.moveaxis(flat.reshape(shape[-1], *shape[:-1]), 0, -1)
    else:
        n = max(1, x.size // 100)
        pos = rng.choice(x.size, size=n, replace=False)
        x.reshape(-1)[pos] = rng.choice(specials, size=n)
    return x


def _integers(rng, shape, fmt, role, limit):
    hi = 2
    return rng.integers(-hi, hi + 1, size=shape).astype(np.float64)


def _constant(rng, shape, fmt, role, limit):
    return np.full(shape, min(0.1, limit))


FAMILIES: dict[str, InputFamily] = {
    f.name: f
    for f in [
        InputFamily("normal", True, "N(0,1)", _normal),
        InputFamily("uniform", True, "U[0,1): one-signed, the worst case for error growth", _uniform),
        InputFamily("heavy_tailed", True, "Student-t with 2 degrees of freedom, clipped to the range", _heavy),
        InputFamily("cancellation", True,
                    "matmul: a = 100 + N(0,10²), b with exactly zero-sum columns; reductions: ±(100+N) pairs "
                    "plus noise — |y| ≈ S/(10√K), ten times less than for N(0,1) data", _cancellation),
        InputFamily("offset", False,
                    "μ + N(0, (μ/1000)²): μ/σ = 10³ (one-pass variance fails). Structured: nearly constant terms "
                    "make rounding errors correlated, so only the hard bound applies", _offset),
        InputFamily("ill_conditioned", True, "random signs, log-uniform magnitudes over up to 2^±20", _ill),
        InputFamily("large_magnitude", True, "magnitudes in [½, 1] of the largest that keeps the result finite",
                    _large),
        InputFamily("tiny", True, "¾ subnormal or near-min-normal magnitudes, ¼ N(0,1) (matmul b: N(0,1))", _tiny),
        InputFamily("special", True, "N(0,1) with NaN/+Inf/−Inf in a quarter of the rows", _special),
        InputFamily("integers", False, "integers in [−2, 2]: every summation order is exact", _integers),
        InputFamily("constant", False, "every element 0.1: rounding errors are correlated, not random", _constant),
    ]
}


def is_random_family(name: str | None) -> bool:
    """Whether the probabilistic bound and z-score gates apply to this family. Names not
    in :data:`FAMILIES` count as structured (only the hard bound decides); ``"random"`` is
    accepted for externally generated random data."""
    if name is None:
        return False
    if name == "random":
        return True
    fam = FAMILIES.get(name)
    return bool(fam and fam.random)


def _rng(seed: int, family: str, role: str) -> np.random.Generator:
    return np.random.default_rng([int(seed), zlib.crc32(family.encode()), zlib.crc32(role.encode())])


def generate(family: str, shape: tuple[int, ...] | int, dtype: str | Format = "fp32", *, seed: int = 0,
             role: str = "x", limit: float | None = None) -> np.ndarray:
    """Seeded array of ``family`` in the storage dtype of ``dtype``.

    ``limit`` caps element magnitudes (default: half the format's max); values are then
    rounded once (RNE, saturating) to the format.

    Raises:
        KeyError: unknown family (the message lists the known ones).
    """
    if family not in FAMILIES:
        raise KeyError(f"unknown input family {family!r}; known: {', '.join(FAMILIES)}")
    fmt = get_format(dtype)
    shp = (shape,) if isinstance(shape, int) else tuple(shape)
    lim = fmt.max / 2 if limit is None else min(limit, fmt.max / 2)
    vals = FAMILIES[family].make(_rng(seed, family, role), shp, fmt, role, lim)
    r = round_to(vals, fmt, overflow="saturate")
    return r.astype(fmt.storage)


def matmul_inputs(family: str, m: int, k: int, n: int, dtype: str | Format = "bf16", *, seed: int = 0,
                  out: str | Format | None = None, acc: str | Format = "fp32") -> tuple[np.ndarray, np.ndarray]:
    """``(a, b)`` of shapes (m, k) and (k, n) from ``family``; magnitudes are capped so that
    ``S = Σ|a||b|`` stays below a quarter of the smaller of the accumulator's and output
    format's max (large_magnitude then sits right under it)."""
    fmt = get_format(dtype)
    cap = min(get_format(acc).max, get_format(out or dtype).max)
    limit = math.sqrt(cap / (4.0 * k))
    a = generate(family, (m, k), fmt, seed=seed, role="a", limit=limit)
    b = generate(family, (k, n), fmt, seed=seed, role="b", limit=limit)
    return a, b


def reduction_inputs(family: str, rows: int, k: int, dtype: str | Format = "fp32", *, seed: int = 0,
                     out: str | Format | None = None, acc: str | Format = "fp32") -> np.ndarray:
    """``(rows, k)`` array of ``family`` for reductions over the last axis, with magnitudes
    capped so that ``Σ|x|`` stays below a quarter of the accumulator's/output's max."""
    cap = min(get_format(acc).max, get_format(out or dtype).max)
    return generate(family, (rows, k), dtype, seed=seed, role="x", limit=cap / (4.0 * k))
