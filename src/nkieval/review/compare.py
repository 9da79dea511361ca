"""Correctness of one case: shapes, dtypes, unwritten elements, and gross mismatches.

This is the coarse, task-tolerance check that decides whether the kernel computes the right
function at all; the principled error budget is the numerics standard's job. Unwritten
output shows up as NaN (the simulator fills fresh memory with NaN), so NaN where the
reference is finite is reported as "unwritten or NaN" with the first and last such index.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nkieval.tasks.schema import TensorSpec


def compare_outputs(got: list[np.ndarray], ref: list[np.ndarray], specs: tuple[TensorSpec, ...], rtol: float,
                    atol: float, unwritten: list[np.ndarray | None] | None = None) -> dict[str, Any] | None:
    """None when every output matches; otherwise the first problem as facts (kind, counts, worst element).

    ``unwritten`` (from the sandbox, read off the trace) says per output which elements no
    instruction wrote; with it, NaN the kernel computed (exp overflow, inf * 0) is reported as
    ``nonfinite`` instead of ``unwritten``. Without it every unexpected NaN counts as unwritten.
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
        if known and (mask is None or not mask.any()) and np.isfinite(g).all() and np.isfinite(r).all():
            # every element written and finite on both sides (the usual case): only the tolerance
            # test is left, and it needs a fraction of the passes below (same result)
            with np.errstate(over="ignore"):
                err = np.abs(np.subtract(g, r, dtype=np.float64))
                allowed = np.abs(r, dtype=np.float64)
            allowed *= rtol
            allowed += atol
            if not (err > allowed).any():
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
                 atol: float, unwritten: list[np.ndarray | None] | None = None
                 ) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """:func:`compare_outputs` (the first problem) and one record per output: its name, whether it is
    correct, and its problem's kind and counts (the same checks, output by output)."""
    first: dict[str, Any] | None = None
    per: list[dict[str, Any]] = []
    for i, (spec, g, r) in enumerate(zip(specs, got, ref)):
        mask = [unwritten[i] if i < len(unwritten) else None] if unwritten is not None else None
        m = compare_outputs([g], [r], (spec,), rtol, atol, mask)
        if m is not None and first is None:
            first = m
        rec: dict[str, Any] = {"name": spec.name, "correct": m is None}
        if m is not None:
            rec["mismatch"] = {k: m[k] for k in ("kind", "count", "total") if k in m}
        per.append(rec)
    return first, per


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
