"""The review's records: feedback lines, per-case results, per-criterion results, the Review.

Plain dataclasses with ``to_dict()``; the JSON report is ``Review.to_dict()`` and is validated
against ``schemas/review-report-v2.json``. Feedback lines always have the shape observed →
expected → suggestion and carry the evidence they rest on.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from nkieval.review.lean import References, lean_cases, lean_evidence

REPORT_SCHEMA = "nkieval.review-report"
#: 2.0: the verdict set is pass, fail, hack-suspected, impossible, sandbox-violation, harness-error
#: (nkieval.review.verdict); the run statuses that were verdicts in 1.x (timeout, exception, ...) are
#: ``verdict_reason`` of a ``fail`` now, and ``infra-error`` is ``harness-error``.
#: 3.0: feedback lines carry ``key`` (the cause they state, shared by the lines of several criteria that
#: state the same one), ``cause``, ``confidence``, and the ``cases``/``families`` they explain; a report has
#: ``findings`` (one per cause, deduplicated across cases, families and criteria), ``summary`` (the
#: verdict's scope, the share of wrong elements), per-output results on each case (``outputs``), criteria
#: carry ``uncapped_level``, and the reference kernels' evidence is stored once under ``references`` and
#: referred to by its hash (``hardware``/``performance`` ``solution``/``baseline`` are ``{"ref": hash}``).
#: docs/reports.md, "Schema 3.0", says how to read a 2.x report's fields from a 3.0 one.
#: 3.1: per-case numerics records are lean: the precision recipe (the same for every case) is stored once
#: under ``references`` (``cases[].numerics.recipe`` is ``{"ref": hash}``), metrics that were not computed
#: (null or NaN) are left out, and their floats carry 9 significant digits (every fp32 value exactly).
#: 3.2: per-case numerics drop ``explanation`` (prose of the fields beside it) and empty gate/worst fields; the
#: uncertainty statement drops its parameters' sources and ``by_status`` (``parameter_sources`` says so;
#: :func:`nkieval.review.report.expand_references` restores them).
#: docs/reports.md, "Migration from 3.1", is the migration note. The layout is in :mod:`nkieval.review.lean`.
REPORT_VERSION = "3.2"

Severity = Literal["error", "warning", "info"]
#: How a stated cause was established: re-evaluating the op that way reproduced the kernel's output;
#: the evidence matches a known pattern (a static rule, an error signature); suspected from the error's
#: shape only; or the finding is a direct measurement (no cause inferred).
Confidence = Literal["reproduced", "matched-pattern", "suspected", "measured"]
CONFIDENCE_WORDS: dict[str, str] = {
    "reproduced": "reproduced by re-evaluation", "matched-pattern": "matched pattern",
    "suspected": "suspected, not confirmed", "measured": "measured",
}
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
    #: the cause this line states (None: a measurement that names none) and how sure it is
    cause: str | None = None
    confidence: Confidence | None = None
    #: the cases and input families this line explains (all of them, not only the one quoted)
    cases: list[str] = field(default_factory=list)
    families: list[str] = field(default_factory=list)
    #: one finding per key: lines of several criteria that state the same cause share it (the report merges them)
    key: str = ""
    #: this line in one clause, shown under a finding another criterion's line leads
    brief: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"criterion": self.criterion, "severity": self.severity, "observed": self.observed,
                "expected": self.expected, "suggestion": self.suggestion, "evidence": _json_safe(self.evidence),
                "cause": self.cause, "confidence": self.confidence, "cases": list(self.cases),
                "families": list(self.families), "key": self.key or None}

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
    #: one record per output, in the task's order: name, correct, mismatch kind and counts, numerics status
    #: and margin (``numerics`` above is the first output's full verdict)
    outputs: list[dict[str, Any]] = field(default_factory=list)

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
    #: the level before a gate or an integrity verdict capped it (None: not capped)
    uncapped_level: int | None = None

    @property
    def assessed(self) -> bool:
        return self.level is not None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "weight": self.weight, "verdict": self.verdict,
                "level": self.level, "score": None if self.level is None else self.level / 4.0,
                "summary": self.summary, "capped_by": self.capped_by, "uncapped_level": self.uncapped_level,
                "feedback": [f.to_dict() for f in self.feedback], "evidence": _json_safe(self.evidence)}


@dataclass
class Finding:
    """One cause, stated once: the feedback lines of every criterion that state it (``Feedback.key``),
    merged; the first line leads, the others add their one-clause ``brief``. Built by
    :func:`nkieval.review.findings.build` from the criteria; the report's Findings section."""

    key: str
    criteria: list[str]
    severity: Severity
    observed: str
    expected: str
    suggestion: str
    cause: str | None = None
    confidence: Confidence | None = None
    cases: list[str] = field(default_factory=list)
    families: list[str] = field(default_factory=list)
    also: list[str] = field(default_factory=list)
    evidence: dict[str, Any] = field(default_factory=dict)
    location: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return _json_safe(asdict(self))


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
    #: one per cause, deduplicated across cases, families and criteria (``findings.build``)
    findings: list[Finding] = field(default_factory=list)
    #: the verdict's scope and the headline figures in words and numbers (``findings.summarise``)
    summary: dict[str, Any] = field(default_factory=dict)
    #: candidate source lines around each location a finding cites: ``{"candidate.py:39": [[37, "..."], ...]}``
    excerpts: dict[str, list[list[Any]]] = field(default_factory=dict)

    def criterion(self, cid: str) -> CriterionResult:
        return next(c for c in self.criteria if c.id == cid)

    def to_dict(self, *, lean: bool = True) -> dict[str, Any]:
        """The JSON report. ``lean`` (the default) stores the expert's and the baseline's evidence once, under
        ``references`` keyed by content hash, and refers to it from ``hardware`` and ``performance``."""
        hardware, performance, references = self.hardware, self.performance, {}
        cases = [c.to_dict() for c in self.cases]
        if lean:
            refs = References(_json_safe)
            hardware, performance = lean_evidence(self.hardware, self.performance, refs)
            cases = lean_cases(cases, refs)
            references = refs.table
        return _json_safe({
            "schema": REPORT_SCHEMA, "version": REPORT_VERSION,
            "task": {"id": self.task, "title": self.task_title},
            "candidate": {"name": self.candidate, "sha256": self.candidate_sha256},
            "target": self.target, "rubric": {"id": self.rubric, "version": self.rubric_version},
            "verdict": self.verdict, "verdict_reason": self.verdict_reason,
            "verdict_message": self.verdict_message, "score": round(self.score, 2), "score_complete": self.score_complete,
            "criteria": [c.to_dict() for c in self.criteria],
            "cases": cases,
            "seed": self.seed, "hardware": hardware, "performance": performance, "references": references,
            "not_assessed": self.not_assessed, "timings": {k: round(v, 4) for k, v in self.timings.items()},
            "versions": self.versions, "findings": [f.to_dict() for f in self.findings], "summary": self.summary,
            "excerpts": self.excerpts,
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
