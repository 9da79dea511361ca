"""The audit's records and its rubric: findings, per-criterion results, the report (JSON and Markdown).

A finding is written like a review's feedback line: what was observed, what a good task has, what to
change, with the evidence (numbers, case labels, diffs) it rests on. ``rule`` is a short stable id.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

AUDIT_SCHEMA = "nkieval.task-audit"
#: 1.0: the first rubric (criteria and weights below).
AUDIT_VERSION = "1.0"

Severity = Literal["error", "warning", "info"]


@dataclass(frozen=True)
class AuditCriterion:
    id: str
    title: str
    weight: float
    question: str


#: The task-quality rubric, versioned with AUDIT_VERSION (docs/audit.md).
RUBRIC: tuple[AuditCriterion, ...] = (
    AuditCriterion("well_formed", "Well-formed", 1.0,
                   "Does the task load and validate, with every problem named by file, key and rule?"),
    AuditCriterion("reference", "Reference is right", 2.0,
                   "Does the reference meet the numerics standard against its float64 oracle on every shape and "
                   "family, deterministically, and does the statement agree with task.toml?"),
    AuditCriterion("discriminates", "Tests discriminate", 2.0,
                   "Does the expert pass everywhere while trivial kernels and mutants of the expert fail?"),
    AuditCriterion("tolerance", "Tolerances fit the op", 1.0,
                   "Is the correctness tolerance neither looser nor tighter than the numerics standard allows?"),
    AuditCriterion("coverage", "Coverage", 1.0,
                   "Do the hidden shapes include ragged, multi-tile and degenerate sizes, and the input families "
                   "the op's hazards?"),
    AuditCriterion("hardware", "Hardware-appropriate", 1.0,
                   "Is the expert legal on every declared target, does it reach its stated roofline fraction, "
                   "and is the baseline correct and slower?"),
    AuditCriterion("gaming", "Hard to game", 1.5,
                   "Do the generic hostile kernels all fail?"),
    AuditCriterion("flawed", "Flawed candidates prove something", 1.0,
                   "Is each flawed candidate caught in its named criterion, by evidence words that name the flaw "
                   "(not words the expert's review also contains)?"),
)
CRITERION_IDS = tuple(c.id for c in RUBRIC)


@dataclass
class Finding:
    """One problem with the task: observed → expected → suggestion, with evidence."""

    criterion: str
    severity: Severity
    rule: str
    observed: str
    expected: str
    suggestion: str
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass
class CriterionAudit:
    id: str
    title: str
    weight: float
    level: int | None  # 0..4; None: not assessed
    summary: str
    findings: list[Finding] = field(default_factory=list)
    measurements: dict[str, Any] = field(default_factory=dict)

    @property
    def assessed(self) -> bool:
        return self.level is not None


def level_of(findings: list[Finding]) -> int:
    """4 no findings; 3 warnings only; 2 one error; 1 two errors; 0 three or more."""
    errors = sum(f.severity == "error" for f in findings)
    if errors:
        return max(0, 3 - errors)
    return 3 if any(f.severity == "warning" for f in findings) else 4


@dataclass
class AuditReport:
    task: str
    task_dir: str
    criteria: list[CriterionAudit]
    seed: int
    target: str
    verdict: str = ""  # "clean" | "findings" | "bad-task"
    score: float = 0.0  # weighted mean of assessed levels, 0..100
    timings: dict[str, float] = field(default_factory=dict)
    reviews: int = 0  # sandboxed reviews run
    versions: dict[str, str] = field(default_factory=dict)
    error: str = ""  # bad-task: the TaskError

    def finalize(self) -> AuditReport:
        got = [(c.weight, c.level) for c in self.criteria if c.level is not None]
        w = sum(x for x, _ in got)
        self.score = round(100.0 * sum(x * lv for x, lv in got) / (4.0 * w), 1) if w else 0.0
        if self.error:
            self.verdict = "bad-task"
        else:
            self.verdict = "findings" if any(f.severity != "info" for f in self.findings) else "clean"
        return self

    @property
    def findings(self) -> list[Finding]:
        return [f for c in self.criteria for f in c.findings]

    def criterion(self, cid: str) -> CriterionAudit:
        return next(c for c in self.criteria if c.id == cid)

    def to_dict(self) -> dict[str, Any]:
        d = {"schema": AUDIT_SCHEMA, "version": AUDIT_VERSION, **asdict(self)}
        d["summary"] = {
            "verdict": self.verdict, "score": self.score,
            "levels": {c.id: c.level for c in self.criteria},
            "findings": {c.id: [f.rule for f in c.findings if f.severity != "info"] for c in self.criteria},
            "errors": sum(f.severity == "error" for f in self.findings),
            "warnings": sum(f.severity == "warning" for f in self.findings),
        }
        return d

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(_finite(self.to_dict()), indent=indent, allow_nan=False)


def _finite(o: Any) -> Any:
    """JSON-safe: NumPy scalars as Python numbers, non-finite floats as None, other objects as text."""
    if isinstance(o, dict):
        return {str(k): _finite(v) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [_finite(v) for v in o]
    if hasattr(o, "item") and not isinstance(o, str | bytes):
        o = o.item()
    if isinstance(o, float):
        return o if math.isfinite(o) else None
    if o is None or isinstance(o, bool | int | str):
        return o
    return str(o)


def to_markdown(rep: AuditReport) -> str:
    """The report for a task author: summary table, then each criterion's findings and measurements."""
    out = [f"# Task audit: `{rep.task}`", "",
           f"Verdict **{rep.verdict}**, score {rep.score:.1f}/100 (rubric {AUDIT_SCHEMA} {AUDIT_VERSION}); "
           f"seed {rep.seed}, target {rep.target}.", ""]
    if rep.error:
        out += ["The task does not load, so nothing else was audited:", "", f"    {rep.error}", ""]
    out += ["| criterion | level | summary |", "|---|---|---|"]
    for c in rep.criteria:
        lv = "n/a" if c.level is None else f"{c.level}/4"
        out.append(f"| {c.title} | {lv} | {c.summary} |")
    out.append("")
    for c in rep.criteria:
        if not c.findings and not c.measurements.get("table"):
            continue
        out += [f"## {c.title}", ""]
        for f in c.findings:
            out.append(f"* **{f.severity}** `{f.rule}`: {f.observed} — expected: {f.expected} — "
                       f"suggestion: {f.suggestion}")
            diff = f.evidence.get("diff")
            if diff:
                out += ["", "  ```diff", *[f"  {x}" for x in str(diff).splitlines()], "  ```"]
        table = c.measurements.get("table")
        if table:
            out += ["", *table]
        out.append("")
    if rep.timings:
        out.append(f"{rep.reviews} sandboxed reviews; time per criterion: "
                   + ", ".join(f"{k.removesuffix('_s')} {v:.1f} s" for k, v in rep.timings.items()))
    return "\n".join(out) + "\n"
