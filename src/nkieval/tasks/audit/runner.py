"""Run a candidate through the trusted review pipeline and classify the outcome for the audit.

The audit never runs candidate code in its own process: every generated, mutated or shipped
kernel goes through :func:`nkieval.review.review` (trace in the sandbox, then execute), with a
fixed seed so the review's case cache (inputs, reference outputs, prepared numerics checks) is
shared by all of a task's runs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nkieval.tasks.schema import Task

#: Verdicts the review gives before any test decides (integrity scan, sandbox): not a test's kill.
REJECTED = ("hack-suspected", "impossible", "sandbox-violation")


class HarnessError(RuntimeError):
    """The review itself failed (a judge component raised): the audit cannot conclude (exit 3)."""


@dataclass
class RunOutcome:
    """What the review said about one candidate, reduced to what the audit needs."""

    label: str
    verdict: str
    passed: bool  # the suite's expert rule: verdict pass, Correctness 4, Numerical standard >= 3
    ran: bool  # at least one case ran to completion (False: every case raised, or rejected before running)
    levels: dict[str, int | None] = field(default_factory=dict)
    summaries: dict[str, str] = field(default_factory=dict)
    failing: list[str] = field(default_factory=list)  # failing case labels (shape/family)
    reason: str = ""
    percent_of_roofline: float | None = None
    time_s: float | None = None
    baseline_time_s: float | None = None
    solution_time_s: float | None = None
    feedback: dict[str, list[str]] = field(default_factory=dict)  # criterion -> findings above info
    #: per case, the output's error against the reference as the numerics standard measured it (max abs error,
    #: relative L2, max ulp, ulp histogram): equal for two kernels whose outputs agree on every case
    errors: dict[str, Any] = field(default_factory=dict)
    #: per case, the numerics standard's largest error/bound of every output (None where it judged none)
    margins: dict[str, float | None] = field(default_factory=dict)
    with_references: bool = False  # reviewed with the reference kernels (relative performance evidence)
    text: str = ""  # keep_feedback: everything the review wrote (summaries and every feedback line)
    elapsed_s: float = 0.0

    @property
    def killed_by_tests(self) -> bool:
        """Some case failed its correctness or numerics check and at least one case ran: the task's shapes,
        families and tolerances caught it (not only the integrity scan, the physics check or a crash on
        every case)."""
        return not self.passed and self.ran and bool(self.failing)


def passes(r: Any) -> bool:
    """The suite's rule for an expert (nkieval.review.suite): pass, Correctness 4, Numerical standard >= 3."""
    lv = {c.id: c.level for c in r.criteria}
    num = lv.get("numerics")
    return r.verdict == "pass" and lv.get("correctness") == 4 and (num is None or num >= 3)


def run_candidate(task: Task, source: str | Path, label: str, *, seed: int, target: str | None = None,
                  families: tuple[str, ...] | None = None, compare_references: bool = False,
                  keep_feedback: bool = False) -> RunOutcome:
    """Review ``source`` (a path or kernel source text) on ``task`` and classify it.

    Raises:
        HarnessError: the review failed as a harness (never the candidate's fault).
        TaskError: the task is malformed (found while reviewing).
    """
    from nkieval.review.pipeline import review
    from nkieval.review.verdict import JudgeError
    from nkieval.tasks.schema import TaskError

    t0 = time.perf_counter()
    kw: dict[str, Any] = {"families": families} if families else {}
    try:
        r = review(task, source, target=target, seed=seed, compare_references=compare_references, **kw)
    except (TaskError, HarnessError):
        raise
    except JudgeError as e:
        raise HarnessError(f"reviewing {label}: the judge component {e.component!r} failed: {e}") from e
    except Exception as e:  # the harness broke: the audit cannot conclude
        raise HarnessError(f"reviewing {label}: {type(e).__name__}: {e}") from e
    if r.verdict == "harness-error":
        raise HarnessError(f"reviewing {label}: harness-error: {r.verdict_message}")
    perf = r.performance if "candidate" in r.performance else {}

    def total(which: str) -> float | None:
        v = (perf.get(which) or {}).get("_total_time")
        return float(v) if isinstance(v, int | float) else None

    summ = (perf.get("candidate") or {}).get("summary") or {}
    failing = [c.case for c in r.cases if not c.correct or (c.numerics or {}).get("status") == "fail"]
    ran = any(c.status == "ok" for c in r.cases)
    errors: dict[str, Any] = {}
    margins: dict[str, float | None] = {c.case: _worst_margin(c) for c in r.cases}
    for c in r.cases:
        m = (c.numerics or {}).get("metrics") or {}
        errors[c.case] = (c.status, c.correct, repr(m.get("max_abs_err")), repr(m.get("rel_l2")), m.get("max_ulp"),
                          repr(sorted((m.get("ulp_histogram") or {}).items())), m.get("mismatch_count"))
    out = RunOutcome(
        label=label, verdict=r.verdict, passed=passes(r), ran=ran,
        levels={c.id: c.level for c in r.criteria}, summaries={c.id: c.summary for c in r.criteria},
        failing=failing, reason=r.verdict_message or r.verdict_reason, errors=errors, margins=margins,
        percent_of_roofline=summ.get("percent_of_roofline"),
        time_s=total("candidate"), baseline_time_s=total("baseline"), solution_time_s=total("solution"),
        with_references=compare_references, elapsed_s=time.perf_counter() - t0)
    if keep_feedback:
        from nkieval.review.suite import feedback_text

        out.feedback = {c.id: [feedback_text(f) for f in c.feedback if f.severity != "info"] for c in r.criteria}
        out.text = "\n".join([r.verdict_message, *(c.summary for c in r.criteria),
                              *(feedback_text(f) for c in r.criteria for f in c.feedback)])
    return out


def _worst_margin(case: Any) -> float | None:
    """The largest numerics error/bound over a case's outputs; None when some output was not judged."""
    recs = [case.numerics, *((o.get("numerics") for o in case.outputs[1:]) if case.outputs else ())]
    vals = [(n or {}).get("margin") for n in recs]
    if not vals or any(not isinstance(v, int | float) for v in vals):
        return None
    return float(max(vals))
