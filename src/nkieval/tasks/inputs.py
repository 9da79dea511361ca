"""Input generation for tasks: named distributions ("families"), fresh seeds, storage dtypes.

Why several families: one N(0,1) input hides whole classes of bugs (numerics.md §4.7). A
softmax without max-subtraction only overflows on large logits; a tile-edge bug that rounds
away is exposed bitwise by small-integer ("exact") inputs, where every fp32 summation order
gives the same result; a variance formula that cancels shows up only on offset data.
Why fresh seeds: a candidate must not be able to learn the test data (anchors-eval.md
§5.4); the review draws a new base seed per run unless one is given, and records it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from nkieval.sim.dtypes import to_dtype


@dataclass(frozen=True)
class Family:
    name: str
    doc: str
    draw: Callable[[np.random.Generator, tuple[int, ...]], np.ndarray]
    #: random data (statistical gates of the numerics standard apply) vs structured data.
    random: bool = True


def _normal(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.standard_normal(shape)


def _near_constant(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    if not shape:
        return rng.standard_normal(shape)
    level = rng.standard_normal((*shape[:-1], 1))
    return level + 1e-3 * rng.standard_normal(shape)


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family("normal", "N(0, 1)", _normal),
        Family("uniform", "U[0, 1): one-signed, the worst case for error growth in sums",
               lambda r, s: r.random(s)),
        Family("integers", "small integers in {-2..2}: every fp32 summation order is exact, so results compare bitwise",
               lambda r, s: r.integers(-2, 3, size=s).astype(np.float64), random=False),
        Family("large", "N(0, 1) x 40: exp/softmax overflow without max-subtraction",
               lambda r, s: r.standard_normal(s) * 40.0),
        Family("offset", "100 + N(0, 1): cancellation in one-pass variance and in sums of large terms",
               lambda r, s: 100.0 + r.standard_normal(s)),
        Family("far_offset", "1e5 + N(0, 1): logits with a large common offset, whose differences stay O(1); a "
               "row maximum kept in bf16 is off by up to 2^-9 x 1e5 (~200), so exp(x - max) overflows fp32",
               lambda r, s: 1e5 + r.standard_normal(s)),
        Family("positive", "U[0.5, 1.5): scales and weights that must stay positive",
               lambda r, s: 0.5 + r.random(s)),
        Family("heavy_tailed", "Student-t with 3 degrees of freedom: occasional large magnitudes",
               lambda r, s: r.standard_t(3, size=s)),
        Family("near_constant", "rows (last axis) each a constant N(0, 1) plus N(0, 1) x 1e-3: a row variance "
               "(~1e-6) below a typical eps, so var + eps and var - eps differ. Structured: nearly constant terms "
               "make rounding errors correlated", _near_constant, random=False),
        Family("small", "N(0, 1) x 1e-3: a mean of squares (~1e-6) the size of a typical eps, so where eps is "
               "added (and with which sign) shows", lambda r, s: r.standard_normal(s) * 1e-3),
    )
}


def derive_seed(base: int, *parts: object) -> int:
    """A stable 63-bit seed from a base seed and labels (shape index, family, input name)."""
    h = hashlib.sha256(repr((int(base), *parts)).encode()).digest()
    return int.from_bytes(h[:8], "little") >> 1


def generate(name: str, shape: tuple[int, ...], dtype: str, family: str, seed: int) -> np.ndarray:
    """One input array in its storage dtype (bf16 via ml_dtypes), drawn from ``family``."""
    if family not in FAMILIES:
        raise KeyError(f"unknown input family {family!r}; known: {', '.join(FAMILIES)}")
    d = to_dtype(dtype)
    rng = np.random.default_rng(seed)
    if d.is_int:
        hi = 64 if d.itemsize > 1 else 16
        return rng.integers(0, hi, size=shape).astype(d.storage)
    vals = FAMILIES[family].draw(rng, shape)
    return np.asarray(vals, dtype=np.float64).astype(np.float32).astype(d.storage)


def generate_inputs(specs: list[tuple[str, tuple[int, ...], str, str | None]], family: str, base_seed: int,
                    case_label: str) -> dict[str, np.ndarray]:
    """Inputs for one (shape case, family): ``specs`` are (name, shape, dtype, per-input family override)."""
    out: dict[str, np.ndarray] = {}
    for name, shape, dtype, override in specs:
        fam = override or family
        out[name] = generate(name, shape, dtype, fam, derive_seed(base_seed, case_label, family, name))
    return out


def is_random(family: str) -> bool:
    return FAMILIES[family].random


def describe(families: Mapping[str, Family] | None = None) -> list[str]:
    return [f"{f.name}: {f.doc}" for f in (families or FAMILIES).values()]
