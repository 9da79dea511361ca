"""Correctness of one case: shapes, dtypes, unwritten elements, and gross mismatches.

This is the coarse, task-tolerance check that decides whether the kernel computes the right
function at all; the principled error budget is the numerics standard's job. Unwritten
output shows up as NaN (the simulator fills fresh memory with NaN), so NaN where the
reference is finite is reported as "unwritten or NaN" with the first and last such index.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from nkieval.tasks.schema import TensorSpec


def compare_outputs(got: list[np.ndarray], ref: list[np.ndarray], specs: tuple[TensorSpec, ...], rtol: float,
                    atol: float, unwritten: list[np.ndarray | None] | None = None,
                    floors: Sequence[float | None] | None = None) -> dict[str, Any] | None:
    """None when every output matches; otherwise the first problem as facts (kind, counts, worst element).

    ``unwritten`` (from the sandbox, read off the trace) says per output which elements no
    instruction wrote; with it, NaN the kernel computed (exp overflow, inf * 0) is reported as
    ``nonfinite`` instead of ``unwritten``. Without it every unexpected NaN counts as unwritten.
    ``floors`` (optional, per output): :func:`allowance_floor` of that output's reference, a function of the
    reference alone that a caller keeping the reference can keep with it; the result is the same with or without.
    """
    from nkieval.sim.dtypes import to_dtype

    for i, (spec, g, r) in enumerate(zip(specs, got, ref)):
        if tuple(g.shape) != tuple(r.shape):
            return {"kind": "shape", "output": spec.name, "got": list(g.shape), "expected": list(r.shape)}
        want_dt = to_dtype(spec.dtype).storage
        if g.dtype != want_dt:
            return {"kind": "dtype", "output": spec.name, "got": str(g.dtype), "expected": spec.dtype}
        known = unwritten is not None
        mask = unwritten[i] if known and i < len(unwritten) else None
        if known and (mask is None or not mask.any()):
            floor = floors[i] if floors is not None and i < len(floors) else None
            if _within_tolerance(g, r, rtol, atol, floor):
                continue
        g64 = np.asarray(g, dtype=np.float64)
        r64 = np.asarray(r, dtype=np.float64)
        nan = np.isnan(g64) & ~np.isnan(r64)
        never = (mask if mask is not None else np.zeros(g.shape, dtype=bool)) if known else nan
        if never.any():
            first, last = _first_last(never)
            return {"kind": "unwritten", "output": spec.name, "count": int(np.count_nonzero(never)),
                    "total": int(g.size), "first_index": first, "last_index": last}
        bad_nf = nan | (np.isinf(g64) & np.isfinite(r64))
        if bad_nf.any():
            first, last = _first_last(bad_nf)
            return {"kind": "nonfinite", "output": spec.name, "count": int(np.count_nonzero(bad_nf)),
                    "total": int(g.size), "nan": int(np.count_nonzero(nan)),
                    "inf": int(np.count_nonzero(np.isinf(g64) & np.isfinite(r64))),
                    "first_index": first, "last_index": last, "rows_affected": _rows(bad_nf)}
        with np.errstate(invalid="ignore", over="ignore"):
            err = np.abs(g64 - r64)
            allowed = atol + rtol * np.abs(r64)
            bad = (err > allowed) | (np.isinf(g64) != np.isinf(r64)) | (np.isnan(r64) != np.isnan(g64))
        bad &= ~(np.isnan(g64) & np.isnan(r64))
        if bad.any():
            with np.errstate(over="ignore", invalid="ignore"):  # a huge error over a tiny allowance is inf: worst
                ratio = np.where(bad, err / np.maximum(allowed, np.finfo(np.float64).tiny), 0.0)
            ratio = np.nan_to_num(ratio, nan=np.inf)
            w = np.unravel_index(int(np.argmax(ratio)), g.shape)
            return {"kind": "mismatch", "output": spec.name, "count": int(bad.sum()), "total": int(g.size),
                    "worst_index": [int(i) for i in w], "got": float(g64[w]), "expected": float(r64[w]),
                    "abs_error": float(err[w]), "allowed": float(allowed[w]), "rtol": rtol, "atol": atol,
                    "rows_affected": _rows(bad)}
    return None


def compare_each(got: list[np.ndarray], ref: list[np.ndarray], specs: tuple[TensorSpec, ...], rtol: float,
                 atol: float, unwritten: list[np.ndarray | None] | None = None,
                 floors: Sequence[float | None] | None = None
                 ) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """:func:`compare_outputs` (the first problem) and one record per output: its name, whether it is
    correct, and its problem's kind and counts (the same checks, output by output)."""
    first: dict[str, Any] | None = None
    per: list[dict[str, Any]] = []
    for i, (spec, g, r) in enumerate(zip(specs, got, ref)):
        mask = [unwritten[i] if i < len(unwritten) else None] if unwritten is not None else None
        floor = [floors[i] if i < len(floors) else None] if floors is not None else None
        m = compare_outputs([g], [r], (spec,), rtol, atol, mask, floor)
        if m is not None and first is None:
            first = m
        rec: dict[str, Any] = {"name": spec.name, "correct": m is None}
        if m is not None:
            rec["mismatch"] = {k: m[k] for k in ("kind", "count", "total") if k in m}
        per.append(rec)
    return first, per


def allowance_floor(ref: np.ndarray, rtol: float, atol: float) -> float | None:
    """The least allowance ``atol + rtol * |r|`` over the reference ``ref``, rounded as
    :func:`compare_outputs` rounds each element's (float64: ``|r| * rtol``, then ``+ atol``); None where it
    proves nothing (no elements, a negative ``rtol``, a non-finite result).

    Both roundings are monotone in ``|r|`` (``rtol >= 0``), so every element's allowance is at least this:
    an output whose largest error is within it is within tolerance everywhere, with no allowance computed."""
    if ref.size == 0 or not rtol >= 0:
        return None
    with np.errstate(all="ignore"):
        least = float(np.min(np.abs(ref, dtype=np.float64)))
    floor = least * rtol + atol
    return floor if math.isfinite(floor) else None


def _within_tolerance(g: np.ndarray, r: np.ndarray, rtol: float, atol: float, floor: float | None) -> bool:
    """True when every element of ``g`` and ``r`` is finite and within tolerance (the usual case: only the
    tolerance test is left, in a fraction of the full checks' passes); False when any is not (the full checks
    then say what is wrong), so a True here is what the full checks find too.

    The largest error ``max |g - r|`` is finite exactly when every element is finite on both sides (an infinity
    or a NaN on either side makes its difference non-finite, and NaN propagates through the maximum; a float64
    difference of finite values that overflows is a mismatch the full checks find). Within ``floor``
    (:func:`allowance_floor`), no element's error exceeds its allowance; otherwise each allowance is computed."""
    with np.errstate(over="ignore", invalid="ignore"):
        err = np.subtract(g, r, dtype=np.float64)
        np.abs(err, out=err)
        worst = float(err.max()) if err.size else 0.0
    if not math.isfinite(worst):
        return False
    if floor is not None and worst <= floor:
        return True
    with np.errstate(over="ignore"):
        allowed = np.abs(r, dtype=np.float64)
    allowed *= rtol
    allowed += atol
    return not (err > allowed).any()


def _first_last(mask: np.ndarray) -> tuple[list[int], list[int]]:
    """The multi-indices of the first and the last True of ``mask`` (C order), as lists; what
    ``np.argwhere(mask)[[0, -1]]`` gives without listing every True."""
    flat = mask.reshape(-1)
    i = int(np.argmax(flat))
    j = flat.size - 1 - int(np.argmax(flat[::-1]))
    return ([int(v) for v in np.unravel_index(i, mask.shape)], [int(v) for v in np.unravel_index(j, mask.shape)])


def _rows(bad: np.ndarray) -> str:
    """Compact description of which leading-axis indices hold mismatches (e.g. '256..299')."""
    rows = np.nonzero(bad.reshape(bad.shape[0], -1).any(axis=1))[0] if bad.ndim > 1 else np.nonzero(bad)[0]
    if rows.size == 0:
        return ""
    if rows.size == rows[-1] - rows[0] + 1:
        return f"{rows[0]}..{rows[-1]}"
    return f"{rows.size} indices between {rows[0]} and {rows[-1]}"
