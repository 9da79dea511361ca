"""The review's records: feedback lines, per-case results, per-criterion results, the Review.

Plain dataclasses with ``to_dict()``; the JSON report is ``Review.to_dict()`` and is validated
against ``schemas/review-report-v2.json``. Feedback lines always have the shape observed →
expected → suggestion and carry the evidence they rest on.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

REPORT_SCHEMA = "nkieval.review-report"
#: 2.0: the verdict set is pass, fail, hack-suspected, impossible, sandbox-violation, harness-error
#: (nkieval.review.verdict); the run statuses that were verdicts in 1.x (timeout, exception, ...) are
#: ``verdict_reason`` of a ``fail`` now, and ``infra-error`` is ``harness-error``.
REPORT_VERSION = "2.0"

Severity = Literal["error", "warning", "info"]
CriterionVerdict = Literal["pass", "partial", "fail", "not-assessed", "not-applicable"]


@dataclass
class Feedback:
    """One line of review: what we saw, what an expert expects, what to do; and the evidence."""

    criterion: str
    severity: Severity
    observed: str
    expected: str
    suggestion: str
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"criterion": self.criterion, "severity": self.severity, "observed": self.observed,
                "expected": self.expected, "suggestion": self.suggestion, "evidence": _json_safe(self.evidence)}

    def line(self) -> str:
        return f"{self.observed} → expected: {self.expected} → {self.suggestion}"


@dataclass
class CaseResult:
    """One run of the candidate: a shape case with one input family and seed."""

    case: str
    shape: dict[str, int]
    hidden: bool
    family: str
    seed: int
    status: str
    correct: bool | None = None
    mismatch: dict[str, Any] | None = None
    numerics: dict[str, Any] | None = None
    error: dict[str, Any] = field(default_factory=dict)
    instructions: int | None = None
    sim_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return _json_safe(asdict(self))


@dataclass
class CriterionResult:
    id: str
    title: str
    weight: float
    verdict: CriterionVerdict
    level: int | None
    summary: str
    feedback: list[Feedback] = field(default_factory=list)
    capped_by: str | None = None
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def assessed(self) -> bool:
        return self.level is not None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "weight": self.weight, "verdict": self.verdict,
                "level": self.level, "score": None if self.level is None else self.level / 4.0,
                "summary": self.summary, "capped_by": self.capped_by,
                "feedback": [f.to_dict() for f in self.feedback], "evidence": _json_safe(self.evidence)}


@dataclass
class Review:
    """The outcome of reviewing one candidate on one task and target."""

    task: str
    task_title: str
    candidate: str
    candidate_sha256: str
    target: str
    rubric: str
    rubric_version: str
    verdict: str
    score: float
    score_complete: bool
    criteria: list[CriterionResult]
    cases: list[CaseResult]
    seed: int
    #: a short code for why (``fail``: the case status, ``incorrect``, ``numerics``, ``syntax``, ...)
    verdict_reason: str = ""
    #: the verdict in one sentence, with its evidence (an integrity verdict's figures)
    verdict_message: str = ""
    hardware: dict[str, Any] = field(default_factory=dict)
    performance: dict[str, Any] = field(default_factory=dict)
    not_assessed: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)

    def criterion(self, cid: str) -> CriterionResult:
        return next(c for c in self.criteria if c.id == cid)

    def to_dict(self) -> dict[str, Any]:
        return _json_safe({
            "schema": REPORT_SCHEMA, "version": REPORT_VERSION,
            "task": {"id": self.task, "title": self.task_title},
            "candidate": {"name": self.candidate, "sha256": self.candidate_sha256},
            "target": self.target, "rubric": {"id": self.rubric, "version": self.rubric_version},
            "verdict": self.verdict, "verdict_reason": self.verdict_reason,
            "verdict_message": self.verdict_message, "score": round(self.score, 2), "score_complete": self.score_complete,
            "criteria": [c.to_dict() for c in self.criteria],
            "cases": [c.to_dict() for c in self.cases],
            "seed": self.seed, "hardware": self.hardware, "performance": self.performance,
            "not_assessed": self.not_assessed, "timings": {k: round(v, 4) for k, v in self.timings.items()},
            "versions": self.versions,
        })

    def to_json(self, **kw: Any) -> str:
        import json

        return json.dumps(self.to_dict(), allow_nan=False, **kw)


def _json_safe(v: Any) -> Any:
    """Non-finite floats become strings; tuples lists; numpy scalars Python numbers."""
    if isinstance(v, bool) or v is None or isinstance(v, str | int):
        return v
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return v
    if isinstance(v, dict):
        return {str(k): _json_safe(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_json_safe(x) for x in v]
    if hasattr(v, "item") and callable(v.item):
        return _json_safe(v.item())
    if hasattr(v, "to_dict"):
        return _json_safe(v.to_dict())
    return str(v)
