"""Stages 6 and 7, score and report: the rubric's criteria from the evidence, physics and confirmed
static hack findings, the verdict and the score; then the :class:`~nkieval.review.model.Review`."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from nkieval.review import findings
from nkieval.review.model import CaseResult, CriterionResult, Review
from nkieval.review.physics import fully_written, output_bytes_violations, roofline_violation
from nkieval.review.scoring import Evidence, score_all, total_score
from nkieval.review.stages.evidence import RunEvidence, StaticFindings
from nkieval.review.stages.judge import Judgement
from nkieval.review.stages.load import NOT_TEXT, Loaded
from nkieval.review.verdict import Decision, JudgeError, confirmed_hacks, decide


@dataclass(frozen=True)
class Scored:
    """Stage 6's output: the criteria, the verdict and the score."""

    criteria: list[CriterionResult]
    decision: Decision
    score: float
    not_assessed: list[str]
    hw_case: CaseResult | None


@contextmanager
def _component(name: str) -> Iterator[None]:
    """A judge component that raises fails closed: :class:`JudgeError` naming it (exit 3)."""
    try:
        yield
    except JudgeError:
        raise
    except Exception as e:
        raise JudgeError(name, f"{name} raised {type(e).__name__}: {e}") from e


def score(loaded: Loaded, judgement: Judgement, run: RunEvidence, static: StaticFindings,
          differential: tuple[dict[str, Any] | None, str | None] = (None, None)) -> Scored:
    """Rubric levels from the evidence; physics and confirmed static hack findings (integrity verdicts),
    then the verdict; the score of an integrity verdict is exactly 0 (``scoring.total_score``)."""
    results = judgement.cases
    hw_case = next(x for x in results if x.case == run.case.label) if run.case is not None else None
    (analysis, analysis_reason), (migration, migration_reason) = static.analysis, static.migration
    ev = Evidence(task=loaded.task, rubric=loaded.rubric, target=loaded.target, cases=results,
                  integrity=loaded.integrity, hw=run.hw, hw_case=hw_case, hw_solution=run.refs.hw_solution,
                  hw_baseline=run.refs.hw_baseline, perf=run.perf, perf_reason=run.perf_reason,
                  numerics_reason=judgement.numerics_reason, analysis=analysis, analysis_reason=analysis_reason,
                  migration=migration, migration_reason=migration_reason,
                  differential=differential[0], differential_reason=differential[1])
    with _component("scoring"):
        crits = score_all(ev)
    with _component("physics"):
        physics = [v for v in ([roofline_violation(loaded.task, run.case.dims, loaded.target, run.perf["candidate"])]
                               if run.case and run.perf and fully_written(hw_case) else [])
                   if v] + output_bytes_violations(run.hw.output_writes if run.hw else None, hw_case)
    with _component("verdict"):
        decision = decide(crits, results, loaded.integrity, physics, confirmed_hacks(analysis, results, physics))
    with _component("scoring"):
        total = total_score(crits, decision.verdict, decision.message)
    not_assessed = [f"{c.id}: {c.summary}" for c in crits if c.verdict == "not-assessed"]
    return Scored(crits, decision, total, not_assessed, hw_case)


def report(loaded: Loaded, judgement: Judgement, run: RunEvidence, scored: Scored,
           timings: dict[str, float]) -> Review:
    """Stage 7: the review's report."""
    src = loaded.source
    raw = bytes.fromhex(src[len(NOT_TEXT):]) if src.startswith(NOT_TEXT) else src.encode()
    hw, refs, d = run.hw, run.refs, scored.decision
    found = findings.build(scored.criteria)
    text = "" if src.startswith(NOT_TEXT) else src
    return Review(
        task=loaded.task.id, task_title=loaded.task.title, candidate=loaded.name,
        candidate_sha256=hashlib.sha256(raw).hexdigest(), target=loaded.target, rubric=loaded.rubric.id,
        rubric_version=loaded.rubric.version, verdict=d.verdict, verdict_reason=d.reason, verdict_message=d.message,
        score=scored.score, score_complete=not scored.not_assessed, criteria=scored.criteria, cases=judgement.cases,
        seed=loaded.seed,
        hardware={"candidate": hw.to_dict() if hw else None,
                  "solution": refs.hw_solution.to_dict() if refs.hw_solution else None,
                  "baseline": refs.hw_baseline.to_dict() if refs.hw_baseline else None,
                  "case": scored.hw_case.case if scored.hw_case else None},
        performance=run.perf or {"not_assessed": run.perf_reason or "no successful run"},
        not_assessed=scored.not_assessed, timings=timings, versions=_versions(), findings=found,
        summary=findings.summarise(scored.criteria, judgement.cases, d.verdict, len(loaded.task.outputs)),
        excerpts=findings.excerpts(found, text))


_VERSIONS: dict[str, str] = {}


def _versions() -> dict[str, str]:
    if not _VERSIONS:
        _VERSIONS.update(_read_versions())
    out = dict(_VERSIONS)
    # which OS isolation the candidate's tracer ran under (docs/security.md): "full", or "none" when the
    # review was run with --unsafe-no-sandbox
    from nkieval.review.tracing import isolation_in_force

    iso = isolation_in_force()
    if iso:
        out["isolation"] = str(iso.get("level", "unknown"))
    return out


def _read_versions() -> dict[str, str]:
    import platform
    from importlib.metadata import PackageNotFoundError, version

    try:
        v = version("nkieval")
    except PackageNotFoundError:
        v = "unknown"
    return {"nkieval": v, "python": platform.python_version(), "numpy": np.__version__}
