"""Tests beyond the gates: stochastic rounding's expectation, and how the error scales with the reduction
length."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .formats import Format, get_format, next_toward, round_to
from .verdict import GateResult


def check_stochastic_rounding(runs: np.ndarray, exact: np.ndarray, fmt: str | Format, *,
                              z_limit: float = 6.0) -> GateResult:
    """Stochastic-rounding conformance (research note §4.6).

    ``runs`` has shape ``(R, ...)``: R outputs of the same SR rounding with different seeds;
    ``exact`` the pre-rounding values. Checks (i) every output is one of the two neighbours
    of the exact value and (ii) unbiasedness: the mean signed error, pooled over runs and
    elements, has |z| ≤ ``z_limit``. SR cannot be matched bitwise without the hardware RNG.
    """
    f = get_format(fmt)
    runs = np.asarray(runs, dtype=np.float64)
    x = np.broadcast_to(np.asarray(exact, dtype=np.float64), runs.shape[1:])
    r = round_to(x, f)
    below = r <= x
    lo = np.where(below, r, _next(r, f, -1))
    hi = np.where(below, _next(r, f, +1), r)
    ok = (runs == lo) | (runs == hi)
    if not ok.all():
        n = int((~ok).sum())
        return GateResult("SR", "fail", float(n), 0.0, f"{n} outputs are not a neighbour of the exact value.")
    gap = np.where(hi > lo, hi - lo, 1.0)
    err = (runs - x) / gap  # in units of the local gap; mean 0 under SR
    n = err.size
    sd = float(err.std())
    z = float(err.mean() / (sd / math.sqrt(n))) if sd > 0 else 0.0
    status = "pass" if abs(z) <= z_limit else "fail"
    return GateResult("SR", status, abs(z), z_limit,
                      f"mean signed error {err.mean():.3g} gaps over {n} roundings (z = {z:.3g}).")


def _next(r: np.ndarray, f: Format, d: int) -> np.ndarray:

    return next_toward(r, f, float(d))


def k_scaling_slope(ks: Sequence[int], rms_rel_errors: Sequence[float]) -> float:
    """Slope of log(RMS((ŷ−y)/S)) against log K (research note §4.7): ≈0–0.1 for unbiased
    round-to-nearest accumulation, ≈0.5 for a biased/truncating accumulator; ≥ 0.3 is a red
    flag even when the bounds pass."""
    lk = np.log(np.asarray(ks, dtype=np.float64))
    le = np.log(np.maximum(np.asarray(rms_rel_errors, dtype=np.float64), 1e-300))
    return float(np.polyfit(lk, le, 1)[0])
