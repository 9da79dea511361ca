"""The slice of a failed check's output that the diagnosis works on, and what its mechanisms share about it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .formats import round_to
from .oracle import OpSpec, Prepared
from .recipe import PrecisionRecipe

_SAMPLE = 1 << 14
_WORK = 1 << 22


@dataclass
class _Sample:
    """The slice of the problem diagnosis works on."""

    spec: OpSpec
    arrays: list[np.ndarray]
    sliced: list[np.ndarray] | None
    params: dict[str, Any]
    recipe: PrecisionRecipe
    y: np.ndarray
    got: np.ndarray
    tau: np.ndarray
    rows: tuple[int, int]
    prep: Prepared
    #: values derived from the sample alone, computed once for all the models that use them
    memo: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def out(self) -> str:
        return self.recipe.output

    def match_base(self) -> dict[str, Any]:
        """The candidate-independent part of :func:`_match`, computed once per sample."""
        if "match" not in self.memo:
            got, y = self.got, self.y
            with np.errstate(all="ignore"):
                g_sp = ~np.isfinite(got)
                y_sp = ~np.isfinite(round_to(y, self.recipe.out_format, overflow=self.recipe.overflow))
                gy_sp = g_sp | y_sp
                fin = ~gy_sp
                abs_err = np.abs(got - y)
                # every element compared (the common case): no masked copies
                fin_all = bool(fin.all())
                err = abs_err if fin_all else abs_err[fin]
            self.memo["match"] = {"gy_sp": gy_sp, "fin": None if fin_all else fin, "abs_err": abs_err,
                                  "err": err, "e": _rms(err), "tau_f": self.tau if fin_all else self.tau[fin],
                                  "g_rms": _rms(got if fin_all else got[fin]),
                                  "special_fail": bool(np.any(g_sp != y_sp))}
        return self.memo["match"]

def _rms(v: np.ndarray) -> float:
    return float(np.sqrt(np.mean(v * v))) if v.size else 0.0
