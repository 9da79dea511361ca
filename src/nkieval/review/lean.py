"""The lean JSON report: what repeats in a review is stored once, or left to the place that owns it.

``Review.to_dict()`` (lean, the default) passes its hardware, performance and case records through here:

* the reference kernels' (``solution``, ``baseline``) evidence and the precision recipe go to one
  ``references`` table keyed by content hash; where they were is ``{"ref": hash}`` (a case's diagnosis stays
  inline: its evidence quotes that case's residual, so two cases' diagnoses are seldom the same text);
* the performance model's uncertainty statement keeps each parameter's value and status; the parameter's
  source text is the hardware data's (``perf.params.load_params``), grouped ``by_status`` follows from the
  statuses, and :func:`restore_uncertainty` puts both back;
* per-case numerics leave out what was not computed (None, NaN, empty), the prose ``explanation`` (it restates
  the gates, the worst elements and the diagnosis kept beside it), and carry floats to
  :data:`CASE_FLOAT_DIGITS` significant digits.

:func:`nkieval.review.report.expand_references` undoes the hash references and the uncertainty's cut.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from typing import Any

#: significant digits of the floats in a lean report's per-case numerics (9: any float32 round-trips)
CASE_FLOAT_DIGITS = 9
#: what a lean uncertainty statement says instead of its parameters' sources
SOURCES_OMITTED = "omitted: each parameter's source is in the hardware data of this target and model version"


def ref_hash(d: Any, safe: Callable[[Any], Any]) -> str:
    return hashlib.sha256(json.dumps(safe(d), sort_keys=True).encode()).hexdigest()[:16]


class References:
    """The ``references`` table being built: ``put`` stores a record once and returns ``{"ref": hash}``."""

    def __init__(self, safe: Callable[[Any], Any]) -> None:
        self.table: dict[str, Any] = {}
        self._safe = safe

    def put(self, kind: str, of: str, data: Any) -> dict[str, str]:
        rec = {"kind": kind, "of": of, "data": data}
        h = ref_hash(rec, self._safe)
        self.table[h] = rec
        return {"ref": h}


def lean_evidence(hardware: dict[str, Any], performance: dict[str, Any], refs: References
                  ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The reference kernels' (``solution``, ``baseline``) evidence moved to ``refs``, and the performance
    model's uncertainty statement (the same for every estimate on a target) stored there once, lean."""
    hw = dict(hardware)
    for who in ("solution", "baseline"):
        if isinstance(hw.get(who), dict) and hw[who]:
            hw[who] = refs.put("hardware", who, hw[who])
    perf = dict(performance)
    for who in ("candidate", "solution", "baseline"):
        d = perf.get(who)
        if not isinstance(d, dict) or not d:
            continue
        d = dict(d)
        if isinstance(d.get("uncertainty"), dict):
            d["uncertainty"] = refs.put("uncertainty", "model", lean_uncertainty(d["uncertainty"]))
        if who != "candidate":
            d.pop("timeline", None)  # the report draws the candidate's only
            perf[who] = refs.put("performance", who, d)
        else:
            perf[who] = d
    return hw, perf


def lean_uncertainty(u: dict[str, Any]) -> dict[str, Any]:
    """The uncertainty statement without what the hardware data already holds: parameters keep value and
    status (an override keeps its note), ``by_status`` is left out (it groups the statuses)."""
    params = u.get("parameters")
    if not isinstance(params, dict):
        return u
    out = {k: v for k, v in u.items() if k != "by_status"}
    out["parameters"] = {n: {k: p[k] for k in ("value", "status") if k in p} | (
        {"source": p.get("source"), "note": p.get("note")} if p.get("status") == "override" else {})
        for n, p in params.items() if isinstance(p, dict)}
    out["parameter_sources"] = SOURCES_OMITTED
    return out


def restore_uncertainty(u: dict[str, Any], documented: Callable[[str, str], dict[str, Any] | None]
                        ) -> dict[str, Any]:
    """A lean uncertainty statement with its parameters' sources (``documented(model_version, target)``: that
    model's parameters with sources, or None) and ``by_status`` put back. The sources are restored only where the
    report's model version and every parameter's value and status match the current model's; otherwise the
    statement stays lean (its ``parameter_sources`` says so)."""
    if u.get("parameter_sources") != SOURCES_OMITTED or not isinstance(u.get("parameters"), dict):
        return u
    out = dict(u)
    params = out["parameters"]
    by_status: dict[str, list[str]] = {}
    for n, p in params.items():
        by_status.setdefault(p.get("status", ""), []).append(n)
    out["by_status"] = {k: sorted(v) for k, v in sorted(by_status.items())}
    docs = documented(str(u.get("model_version")), str(u.get("target")))
    if docs is not None and set(docs) == set(params) and all(
            docs[n].get("value") == p.get("value") and docs[n].get("status") == p.get("status")
            for n, p in params.items() if p.get("status") != "override"):
        out["parameters"] = {n: p if p.get("status") == "override" else dict(docs[n]) for n, p in params.items()}
        del out["parameter_sources"]
    return out


def lean_cases(cases: list[dict[str, Any]], refs: References) -> list[dict[str, Any]]:
    """Per-case records without repetition or noise (see the module docstring); the per-output records too."""
    out = []
    for c in cases:
        c = dict(c)
        n = c.get("numerics")
        if isinstance(n, dict):
            n = {k: v for k, v in n.items() if k != "explanation"}
            if isinstance(n.get("recipe"), dict):
                n["recipe"] = refs.put("recipe", "numerics", n["recipe"])
            if isinstance(n.get("metrics"), dict):
                n["metrics"] = {k: v for k, v in n["metrics"].items() if v is not None and v != "nan"}
            for k in ("gates", "worst"):
                if isinstance(n.get(k), list):
                    n[k] = [_no_empty(g) for g in n[k]]
            c["numerics"] = round_floats(n)
        if c.get("outputs"):
            c["outputs"] = round_floats(c["outputs"])
        out.append(c)
    return out


def _no_empty(d: Any) -> Any:
    """A gate or worst-element record without its empty fields (None, "", NaN)."""
    if not isinstance(d, dict):
        return d
    return {k: v for k, v in d.items()
            if v is not None and v != "" and v != "nan" and not (isinstance(v, float) and math.isnan(v))}


def round_floats(v: Any) -> Any:
    if isinstance(v, float) and math.isfinite(v) and v != 0.0:
        return float(f"{v:.{CASE_FLOAT_DIGITS}g}")
    if isinstance(v, dict):
        return {k: round_floats(x) for k, x in v.items()}
    if isinstance(v, list):
        return [round_floats(x) for x in v]
    return v
