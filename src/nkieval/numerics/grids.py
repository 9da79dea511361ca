"""Which narrower floating-point grid holds a value: exact bit tests that answer what a cast round trip
would (``x.astype(f).astype(float32) == x``), without the casts. The numerics gates use them to tell an output
computed in a narrower format than declared (every element on the bf16 or fp8 grid) from a faithful one."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .formats import FORMATS, Format

#: the coarser grids an fp32 output is checked against, coarsest last
_GRID_CANDIDATES = ("fp16", "bf16", "fp8_e5m2", "fp8_e4m3fn")


def _narrow_mask_table(f: Format) -> tuple[np.ndarray, np.uint32, np.uint32]:
    """For a float format no wider and no finer than fp32 (fp16, the fp8 grids): per fp32 biased
    exponent, the bits of ``|x|`` that must be zero for ``f`` to hold ``x`` (normals: the fp32
    mantissa bits below ``f``'s; subnormals: multiples of ``f.subnormal``; exponent fields 0 and
    255: zero, and inf where ``f`` has it; every bit, exponent included, elsewhere: out of range),
    plus the largest finite magnitude's bit pattern (e4m3fn's top binade stops short of a full
    mantissa) and inf's pattern (0 where ``f`` has no inf)."""
    t = np.full(256, 0x7FFFFFFF, dtype=np.uint32)
    t[0] = 0x7FFFFF
    low = 23 - (f.p - 1)  # fp32 mantissa bits f does not have
    e_min = round(math.log2(f.tiny)) + 127
    e_sub = round(math.log2(f.subnormal)) + 127
    e_max = math.floor(math.log2(f.max)) + 127
    for e in range(e_min, e_max + 1):
        t[e] = (1 << low) - 1
    for e in range(e_sub, e_min):
        t[e] = (1 << (low + e_min - e)) - 1
    inf = np.uint32(0x7F800000) if f.has_inf else np.uint32(0)
    if f.has_inf:
        t[255] = 0x7FFFFF
    return t, np.float32(f.max).view(np.uint32), inf


_NARROW_MASKS = {c: _narrow_mask_table(FORMATS[c]) for c in ("fp8_e5m2", "fp8_e4m3fn")}
# fp16: the low 13 mantissa bits for normals (2^-14 .. 2^15), more for subnormals (multiples of
# 2^-24), only ±0 and ±inf in exponent fields 0 and 255. Its top binade is full (65504 has an
# all-ones mantissa), so unlike e4m3fn it needs no test against the largest value.
_FP16_MASK = _narrow_mask_table(FORMATS["fp16"])[0]


def _fp16_held(x32: np.ndarray) -> np.ndarray:
    """``x32.astype(float16).astype(float32) == x32`` from the bits alone (the same for every
    one of the 2^32 fp32 values, checked exhaustively), without the two conversions."""
    u = x32.view(np.uint32) & np.uint32(0x7FFFFFFF)
    return (u & _FP16_MASK.take((u >> np.uint32(23)).astype(np.intp))) == 0


def _narrow_held(x32: np.ndarray, name: str) -> np.ndarray:
    """``x32.astype(fmt).astype(float32) == x32`` for an fp8 format from the bits alone (the same
    for every one of the 2^32 fp32 values, checked exhaustively), without the two conversions."""
    t, top, inf = _NARROW_MASKS[name]
    u = x32.view(np.uint32) & np.uint32(0x7FFFFFFF)
    ok = (u & t.take((u >> np.uint32(23)).astype(np.intp))) == 0
    ok &= (u <= top) | (u == inf) if inf else u <= top
    return ok

def _held_where(x32: np.ndarray, base: np.ndarray, test: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """``test(x32) & base``, testing only where ``base`` holds when that is a small part of the
    values (the common case: an fp32 output on no coarser grid)."""
    idx = np.flatnonzero(base)
    if idx.size * 8 >= base.size:
        ok = test(x32)
        ok &= base
        return ok
    ok = np.zeros(base.shape, dtype=bool)
    if idx.size:
        ok.reshape(-1)[idx] = test(x32.reshape(-1)[idx])
    return ok


def _grid_held(x: np.ndarray, out: Format) -> dict[str, np.ndarray]:
    """Per coarser grid candidate, which of the values ``x`` it holds exactly (fp32 values whose
    narrow cast round-trips, as :func:`~.formats.representable`), by bit tests that give the same
    answer. fp16 holds a value only where its low 13 fp32 significand bits are zero, and the fp8
    grids only where fp16 holds it (every fp8 value is an fp16 value): each test runs on those
    values only. ``x`` may be float32 already (the kernel's own output), which skips the cast;
    the answer is the same."""
    res: dict[str, np.ndarray] = {}
    with np.errstate(over="ignore", invalid="ignore"):
        x32 = x.astype(np.float32, copy=False)
        in32 = x32 == x
    sub: np.ndarray | None = None
    for c in _GRID_CANDIDATES:
        cf = FORMATS[c]
        if cf.p >= out.p:
            continue
        if c in _NARROW_MASKS:
            ok = _held_where(x32, in32 if sub is None else sub, lambda v, c=c: _narrow_held(v, c))
        elif c == "bf16":
            # bf16 is fp32 with the low 16 significand bits zero (same exponent range, subnormals
            # and inf included): the round trip holds exactly those values (NaN fails in32)
            ok = (x32.view(np.uint32) & np.uint32(0xFFFF)) == 0
            ok &= in32
        else:
            if cf.storage == np.float16:
                low = (x32.view(np.uint32) & np.uint32(0x1FFF)) == 0
                low &= in32
                ok = _held_where(x32, low, _fp16_held)
            else:
                with np.errstate(over="ignore", invalid="ignore"):
                    ok = x32.astype(cf.storage).astype(np.float32) == x32
                ok &= in32
            if c in ("fp16", "bf16"):
                sub = ok.copy() if sub is None else sub & ok
        res[c] = ok
    return res


def _grid_counts(x: np.ndarray, out: Format) -> dict[str, int]:
    """How many of the (finite) values ``x`` each coarser grid candidate holds exactly.

    Every candidate grid (fp16, bf16, the fp8 grids) holds a value only where its low 13 fp32
    significand bits are zero, which is a small part of a typical output (1 in 8192 of random
    significands): the tests run on those values only, with the same counts."""
    with np.errstate(over="ignore", invalid="ignore"):
        x32 = x.astype(np.float32, copy=False)
    idx = np.flatnonzero((x32.view(np.uint32) & np.uint32(0x1FFF)) == 0)
    if idx.size * 8 < x.size:
        x = x[idx]
    return {c: int(np.count_nonzero(ok)) for c, ok in _grid_held(x, out).items()}
