"""Verdict records and the one place they are turned into words.

Why records first, words last (torch.testing's ``ErrorMeta`` pattern): gates collect facts
(counts, indices, ratios) into plain frozen dataclasses; :func:`mismatch_message` and
:func:`explain` format them once, at the edge. The review pipeline stores
:meth:`Verdict.to_dict` as JSON and pastes :attr:`Verdict.explanation` into feedback.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from .recipe import PrecisionRecipe

__all__ = [
    "Finding",
    "GateResult",
    "Metrics",
    "Verdict",
    "WorstElement",
    "explain",
    "mismatch_message",
]

Status = Literal["pass", "fail", "inconclusive"]
GateStatus = Literal["pass", "fail", "warn", "skip", "inconclusive"]

GATE_NAMES: dict[str, str] = {
    "G0": "shape and dtype",
    "G1": "NaN/Inf parity",
    "GE": "bitwise where every order is exact",
    "G2": "hard (worst-case) bound",
    "G3": "probabilistic bound (random inputs)",
    "G5": "consistency with the declared precision (z-score)",
    "G4": "ratio to a same-precision reference",
    "G7": "test data can discriminate",
    "GC": "inputs inside the recipe's contract",
}


@dataclass(frozen=True)
class GateResult:
    """Outcome of one gate: ``value`` is compared with ``threshold`` (fail when above)."""

    id: str
    status: GateStatus
    value: float | None = None
    threshold: float | None = None
    detail: str = ""

    @property
    def name(self) -> str:
        return GATE_NAMES.get(self.id, self.id)


@dataclass(frozen=True)
class WorstElement:
    """One of the worst elements, ranked by error/bound."""

    index: tuple[int, ...]
    got: float
    expected: float
    error: float
    bound: float
    bound_det: float
    ratio: float
    scale: float | None = None
    z: float | None = None
    dominant: str = ""


@dataclass(frozen=True)
class Finding:
    """A likely cause of a failure (or of a GPU/Trainium discrepancy).

    ``id`` is a stable key (``bf16_accumulation``, ``tf32_inputs``, ``no_max_subtraction``
    ...); ``evidence`` quotes the numbers that support it; ``action`` says what to do.
    """

    id: str
    cause: str
    evidence: str
    action: str = ""


@dataclass(frozen=True)
class Metrics:
    """Every number the gates looked at (NaN where not applicable)."""

    n_elements: int = 0
    n_compared: int = 0
    n_exact_required: int = 0
    n_out_of_contract: int = 0
    max_abs_err: float = 0.0
    max_abs_err_index: tuple[int, ...] | None = None
    max_abs_err_allowed: float = math.nan
    max_rel_err: float = 0.0
    max_rel_err_index: tuple[int, ...] | None = None
    max_ulp: int = 0
    ulp_histogram: dict[str, int] = field(default_factory=dict)
    rel_l2: float = 0.0
    mismatch_count: int = 0
    mismatch_percent: float = 0.0
    mismatch_where: str = ""
    margin_det: float = 0.0
    margin_prb: float = 0.0
    exceed_det: int = 0
    exceed_prb: int = 0
    exact_mismatches: int = 0
    nan_expected: int = 0
    nan_got: int = 0
    inf_expected: int = 0
    inf_got: int = 0
    nan_produced: int = 0
    nan_swallowed: int = 0
    inf_mismatch: int = 0
    special_explained: int = 0
    z_max: float = math.nan
    z_p99: float = math.nan
    z_over: int = 0
    z_rms: float = math.nan
    bias_t: float = math.nan
    ratio_rms: float = math.nan
    ratio_max: float = math.nan
    sigma_ratio: float = math.nan
    bhattacharyya: float = math.nan
    cr_rate: float = math.nan
    cr_rate_ref: float = math.nan
    zeros_would_pass: bool = False
    output_grid: str | None = None
    k: int | None = None


def _json_safe(v: Any) -> Any:
    """``v`` as plain JSON data: dataclasses as dicts of their fields (what ``asdict`` gives, in
    the same walk, without its deep copies), tuples as lists, non-finite floats as strings."""
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return v
    if isinstance(v, str | int | None):
        return v
    if isinstance(v, tuple | list):
        return [_json_safe(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _json_safe(x) for k, x in v.items()}
    if hasattr(type(v), "__dataclass_fields__"):
        return {f.name: _json_safe(getattr(v, f.name)) for f in fields(v)}
    return v


def _from_json(v: Any) -> Any:
    if v in ("nan", "inf", "-inf"):
        return float(v)
    return v


def _tuple_or_none(v: Any) -> tuple[int, ...] | None:
    return None if v is None else tuple(int(i) for i in v)


@dataclass(frozen=True)
class Verdict:
    """The outcome of one numerics check.

    Attributes:
        status: ``pass``, ``fail`` or ``inconclusive``.
        margin: max over elements of error/bound for the bound that applied (the
            probabilistic one on random inputs, else the hard one); ≤ 1 passes.
            ``inf`` if an element required to be bitwise exact differs.
        deciding_gate: the gate that failed first, or for a pass the one with least room.
        gates: every gate's result.
        worst: the worst elements, largest error/bound first.
        recipe: the recipe judged against.
        op: op name.
        shape: output shape.
        input_family: declared input family (enables the statistical gates when random).
        metrics: every measured number.
        findings: likely causes (empty on a pass).
        notes: remarks that do not change the status.
        explanation: one plain-words paragraph for a reviewer.
    """

    status: Status
    margin: float
    deciding_gate: str
    gates: tuple[GateResult, ...]
    worst: tuple[WorstElement, ...]
    recipe: PrecisionRecipe
    op: str
    shape: tuple[int, ...]
    input_family: str | None
    metrics: Metrics
    findings: tuple[Finding, ...] = ()
    notes: tuple[str, ...] = ()
    explanation: str = ""

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    @property
    def headroom(self) -> float:
        """``1 − margin``: positive when every element is inside its bound."""
        return 1.0 - self.margin

    def gate(self, gate_id: str) -> GateResult | None:
        return next((g for g in self.gates if g.id == gate_id), None)

    def finding_ids(self) -> list[str]:
        return [f.id for f in self.findings]

    def message(self) -> str:
        """torch.testing-style mismatch message (count, worst abs/rel with index and bound)."""
        return mismatch_message(self.metrics, self.gate(self.deciding_gate) if self.status == "fail" else None)

    def __str__(self) -> str:
        return self.explanation

    # ------------------------------------------------------------------ serialisation

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict (non-finite floats become "inf"/"nan" strings)."""
        d = {
            "status": self.status,
            "margin": self.margin,
            "deciding_gate": self.deciding_gate,
            "gates": self.gates,
            "worst": self.worst,
            "recipe": self.recipe.to_dict(),
            "op": self.op,
            "shape": self.shape,
            "input_family": self.input_family,
            "metrics": self.metrics,
            "findings": self.findings,
            "notes": self.notes,
            "explanation": self.explanation,
        }
        return _json_safe(d)

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), allow_nan=False, **kwargs)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Verdict:
        """Inverse of :meth:`to_dict`."""

        def floats(obj: Mapping[str, Any], cls_: type) -> dict[str, Any]:
            out = {}
            for f in fields(cls_):
                if f.name not in obj:
                    continue
                v = _from_json(obj[f.name])
                if f.name.endswith("index") and v is not None:
                    v = _tuple_or_none(v)
                out[f.name] = v
            return out

        metrics = Metrics(**floats(d["metrics"], Metrics))
        gates = tuple(GateResult(**floats(g, GateResult)) for g in d["gates"])
        worst = []
        for w in d["worst"]:
            kw = floats(w, WorstElement)
            kw["index"] = tuple(int(i) for i in w["index"])
            worst.append(WorstElement(**kw))
        return cls(
            status=d["status"],
            margin=float(_from_json(d["margin"])),
            deciding_gate=d["deciding_gate"],
            gates=gates,
            worst=tuple(worst),
            recipe=PrecisionRecipe.from_dict(d["recipe"]),
            op=d["op"],
            shape=tuple(d["shape"]),
            input_family=d.get("input_family"),
            metrics=metrics,
            findings=tuple(Finding(**f) for f in d.get("findings", [])),
            notes=tuple(d.get("notes", [])),
            explanation=d.get("explanation", ""),
        )

    @classmethod
    def from_json(cls, s: str) -> Verdict:
        return cls.from_dict(json.loads(s))


# --------------------------------------------------------------------------- formatting


def _g(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "n/a"
    if isinstance(x, float) and math.isnan(x):
        return "nan"
    if isinstance(x, float) and math.isinf(x):
        return "∞" if x > 0 else "-∞"
    return f"{x:.{digits}g}"


def _idx(i: Sequence[int] | None) -> str:
    if i is None:
        return "?"
    return "(" + ", ".join(str(int(v)) for v in i) + (",)" if len(i) == 1 else ")")


def mismatch_message(m: Metrics, failed: GateResult | None = None) -> str:
    """The single mismatch-message builder (torch.testing shape, our bounds)."""
    if failed is not None:
        head = f"Outputs are not within the numerics standard! (gate {failed.id}: {failed.name})"
    elif m.mismatch_count:
        head = "Outputs are not within the numerics standard!"
    else:
        head = "Outputs are within bounds."
    lines = [head]
    pct = f"{m.mismatch_percent:.3g}%"
    lines.append(f"Mismatched elements: {m.mismatch_count} / {m.n_elements} ({pct})")
    if m.mismatch_where:
        lines.append(f"Mismatch locations: {m.mismatch_where}")
    lines.append(
        f"Greatest absolute difference: {_g(m.max_abs_err)} at index {_idx(m.max_abs_err_index)} "
        f"(up to {_g(m.max_abs_err_allowed)} allowed)"
    )
    lines.append(f"Greatest relative difference: {_g(m.max_rel_err)} at index {_idx(m.max_rel_err_index)}")
    lines.append(f"Max error/bound: {_g(m.margin_det)} (hard), {_g(m.margin_prb)} (probabilistic)")
    if m.z_over:
        lines.append(f"Elements with error z > 10 (inconsistent with the declared precision): {m.z_over} / "
                     f"{m.n_elements}; 99th percentile z {_g(m.z_p99)}")
    return "\n".join(lines)


def explain(
    *,
    status: Status,
    deciding: GateResult | None,
    op: str,
    recipe: PrecisionRecipe,
    shape: tuple[int, ...],
    input_family: str | None,
    metrics: Metrics,
    worst: Sequence[WorstElement],
    findings: Sequence[Finding],
    notes: Sequence[str],
    statistical: bool,
) -> str:
    """One paragraph, plain words, numbers quoted; what a reviewer pastes into feedback."""
    m = metrics
    k = f", K = {m.k}" if m.k else ""
    fam = f", inputs '{input_family}'" if input_family else ""
    head = f"{op} [{recipe.describe()}]{k}, {m.n_elements} elements{fam}."
    parts: list[str] = []
    orders = " in any summation order" if m.k else ""
    if status == "pass":
        w = worst[0] if worst else None
        where = ""
        if w is not None and w.error > 0 and w.bound > 0:
            where = (f" at index {_idx(w.index)} (error {_g(w.error)}, allowed {_g(w.bound)}; the bound there is "
                     f"dominated by {w.dominant or 'n/a'})")
        if m.n_exact_required and m.n_exact_required == m.n_compared:
            parts.append(f"PASS. All {m.n_compared} compared elements are exact{orders} and match the correctly "
                         "rounded result bitwise.")
        elif statistical:
            parts.append(f"PASS. The largest error is {_g(100 * (w.ratio if w else 0.0), 2)}% of the probabilistic "
                         f"bound (λ = {recipe.lam:g}){where}, and {_g(100 * m.margin_det, 2)}% of the worst-case bound "
                         f"that no correct kernel can exceed{orders}.")
        else:
            parts.append(f"PASS. The largest error is {_g(100 * m.margin_det, 2)}% of the worst-case bound that no "
                         f"correct kernel can exceed{orders}{where}.")
        if m.n_exact_required and m.n_exact_required != m.n_compared:
            parts.append(f"{m.n_exact_required} elements are exact{orders} and match bitwise.")
        if not math.isnan(m.z_max):
            parts.append(f"Errors are consistent with the declared precision (z max {_g(m.z_max)}, "
                         f"99th percentile {_g(m.z_p99)}).")
        if m.nan_expected or m.inf_expected:
            parts.append(f"NaN/Inf positions match ({m.nan_expected} NaN, {m.inf_expected} Inf expected).")
        else:
            parts.append("No NaN/Inf mismatches.")
    elif status == "fail":
        g = deciding
        gate_txt = f"{g.id}, {g.name}" if g else "?"
        parts.append(f"FAIL ({gate_txt}). {g.detail if g else ''}".rstrip())
        if m.mismatch_count:
            where = f"; {m.mismatch_where}" if m.mismatch_where else ""
            parts.append(f"{m.mismatch_count} of {m.n_elements} elements ({m.mismatch_percent:.3g}%) are out of "
                         f"bounds{where}.")
        w = worst[0] if worst else None
        if w is not None and w.ratio > 1:
            parts.append(f"The worst is index {_idx(w.index)}: got {_g(w.got, 6)}, expected {_g(w.expected, 6)} "
                         f"(error {_g(w.error)}, allowed {_g(w.bound)}, {_g(w.ratio)}× the bound).")
        if findings:
            f0 = findings[0]
            parts.append(f"Likely cause: {f0.cause} — {f0.evidence}.")
            if f0.action:
                parts.append(f"Suggested action: {f0.action}.")
            for f in findings[1:3]:
                parts.append(f"Also consistent: {f.cause} ({f.evidence}).")
    else:
        g = deciding
        parts.append(f"INCONCLUSIVE ({g.id if g else '?'}, {g.name if g else ''}). {g.detail if g else ''}".rstrip())
        parts.append(f"Within the judged elements the largest error/bound is {_g(m.margin_det)} (hard bound).")
    for n in notes[:3]:
        parts.append(f"Note: {n}.")
    return " ".join([head, *parts])
