"""Fixed-tolerance baselines the standard is compared with (docs/numerics.md, benchmarks).

Why keep them: the standard's claims ("allclose rejects correct kernels and accepts wrong
ones") are only testable against faithful re-implementations of what other systems do. One
dtype-keyed table per rule, as torch.testing keeps ``_DTYPE_PRECISIONS``:

* ``torch.testing.assert_close`` defaults: ``|a−e| ≤ atol + rtol·|e|``, NaN never equal;
  dtypes outside the table (fp8) fall back to exact comparison (research note §3.1).
* ``np.allclose`` defaults ``rtol = 1e-5, atol = 1e-8``.
* KernelBench: ``allclose(atol = rtol = tol)``, tol 1e-4 for fp32 and 1e-2 for fp16/bf16;
  earlier versions used 1e-2 everywhere.
* relative L2 (normwise) ``‖a−e‖₂/‖e‖₂ ≤ 2e-5``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .formats import get_format

__all__ = ["BASELINES", "KERNELBENCH_TOL", "TORCH_DEFAULTS", "allclose", "rel_l2"]

# (rtol, atol), torch/testing/_comparison.py _DTYPE_PRECISIONS
TORCH_DEFAULTS: dict[str, tuple[float, float]] = {
    "fp16": (1e-3, 1e-5),
    "bf16": (1.6e-2, 1e-5),
    "fp32": (1.3e-6, 1e-5),
    "fp64": (1e-7, 1e-7),
}
KERNELBENCH_TOL: dict[str, float] = {"fp32": 1e-4, "fp16": 1e-2, "bf16": 1e-2}


def allclose(actual: np.ndarray, expected: np.ndarray, rtol: float, atol: float) -> bool:
    """``|a − e| ≤ atol + rtol·|e|`` everywhere (asymmetric; NaN never equal)."""
    a = np.asarray(actual, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        ok = np.abs(a - e) <= atol + rtol * np.abs(e)
        ok |= np.isinf(a) & np.isinf(e) & (a == e)
    return bool(np.all(ok))


def rel_l2(actual: np.ndarray, expected: np.ndarray) -> float:
    a = np.asarray(actual, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        den = float(np.linalg.norm(e))
        num = float(np.linalg.norm(a - e))
    return num / den if den > 0 else (0.0 if num == 0 else float("inf"))


def _torch(a: np.ndarray, e: np.ndarray, out: str) -> bool:
    rtol, atol = TORCH_DEFAULTS.get(get_format(out).name, (0.0, 0.0))
    return allclose(a, e, rtol, atol)


def _kernelbench(a: np.ndarray, e: np.ndarray, out: str) -> bool:
    tol = KERNELBENCH_TOL.get(get_format(out).name, 1e-2)
    return allclose(a, e, tol, tol)


BASELINES: dict[str, Callable[[np.ndarray, np.ndarray, str], bool]] = {
    "torch.testing defaults": _torch,
    "np.allclose defaults": lambda a, e, out: allclose(a, e, 1e-5, 1e-8),
    "allclose 1e-2": lambda a, e, out: allclose(a, e, 1e-2, 1e-2),
    "KernelBench": _kernelbench,
    "rel-L2 ≤ 2e-5": lambda a, e, out: rel_l2(a, e) <= 2e-5,
}
