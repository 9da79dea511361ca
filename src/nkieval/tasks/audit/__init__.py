"""``nkieval task audit``: judge the task itself (docs/audit.md).

The audit reviews a task the way an NKI expert would before trusting it to train or benchmark a
model: is it well-formed, is its reference right, do its tests discriminate (trivial kernels and
mutants of the expert fail), do its tolerances fit the op, does it cover ragged, multi-tile and
degenerate shapes and the op's hazards, is it hardware-appropriate, is it hard to game, and do its
flawed candidates prove something. Every candidate kernel it runs (the expert, the baseline, the
flawed candidates, the generated trivial and hostile kernels, the mutants) goes through
:func:`nkieval.review.review` in the review's sandbox; the audit itself runs only the task's own
trusted code (reference.py), as ``task check`` does.

Layering: this package composes :mod:`nkieval.review`; nothing in ``nkieval.review`` (nor
``nkieval.tasks`` outside this package) imports it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

from nkieval.tasks.audit.model import (
    AUDIT_SCHEMA,
    AUDIT_VERSION,
    CRITERION_IDS,
    RUBRIC,
    AuditReport,
    CriterionAudit,
    Finding,
    to_markdown,
)
from nkieval.tasks.audit.runner import HarnessError

__all__ = ["AUDIT_SCHEMA", "AUDIT_VERSION", "CRITERION_IDS", "RUBRIC", "AuditReport", "CriterionAudit", "Finding",
           "HarnessError", "audit_task", "to_markdown"]


def audit_task(path: str | Path, *, seed: int = 0, target: str | None = None, max_mutants: int = 16,
               criteria: Sequence[str] | None = None, all_targets: bool = True, probe_survivors: bool = True,
               mutation_budget_s: float = 60.0, progress: Callable[[str], None] | None = None) -> AuditReport:
    """Audit the task at ``path`` (a directory or built-in id) against the rubric (``criteria``: a subset).

    A task that does not load gives a report with verdict ``bad-task`` and only Well-formed assessed.

    Raises:
        HarnessError: a review failed as a harness (retry; never the task's fault).
    """
    from nkieval.tasks.audit import (
        coverage,
        discriminate,
        flawed,
        gaming,
        hardware,
        refcheck,
        tolerance,
        wellformed,
    )
    from nkieval.tasks.audit.context import AuditContext
    from nkieval.tasks.loader import load_task, resolve_task_dir
    from nkieval.tasks.schema import TaskError

    want = tuple(criteria or CRITERION_IDS)
    t_all = time.perf_counter()
    try:
        directory = resolve_task_dir(path)
        task = load_task(directory)
    except TaskError as e:
        from nkieval.tasks.audit.model import RUBRIC as R

        crit = [CriterionAudit(c.id, c.title, c.weight, None, "not assessed: the task does not load")
                for c in R]
        crit[0] = CriterionAudit("well_formed", "Well-formed", 1.0, 0, f"does not load [{e.rule}]",
                                 [Finding("well_formed", "error", e.rule, str(e), "a task that loads",
                                          "fix what the error names", {"where": e.where})])
        return AuditReport(str(path), str(path), crit, seed, target or "", error=str(e)).finalize()
    tgt = target or task.default_target
    ctx = AuditContext(task, seed, tgt, max_mutants=max_mutants, probe_survivors=probe_survivors,
                       mutation_budget_s=mutation_budget_s)
    steps: list[tuple[str, Callable[[], CriterionAudit]]] = [
        ("well_formed", lambda: wellformed.audit(task, directory)),
        ("reference", lambda: refcheck.audit(ctx)),
        ("discriminates", lambda: discriminate.audit(ctx)),
        ("tolerance", lambda: tolerance.audit(ctx)),
        ("coverage", lambda: coverage.audit(task, ctx if wf_ok else None)),
        ("hardware", lambda: hardware.audit(ctx, all_targets=all_targets)),
        ("gaming", lambda: gaming.audit(ctx)),
        ("flawed", lambda: flawed.audit(ctx)),
    ]
    out: list[CriterionAudit] = []
    timings: dict[str, float] = {}
    wf_ok = True
    for cid, fn in steps:
        spec = next(c for c in RUBRIC if c.id == cid)
        if cid not in want:
            out.append(CriterionAudit(cid, spec.title, spec.weight, None, "not assessed (not requested)"))
            continue
        if cid == "tolerance" and "reference" not in want:
            refcheck.audit(ctx)  # the standard's bounds per case come from the reference criterion
        if not wf_ok and cid != "coverage":
            out.append(CriterionAudit(cid, spec.title, spec.weight, None,
                                      "not assessed: the numerics op cannot be judged (see Well-formed)"))
            continue
        if progress:
            progress(cid)
        t0 = time.perf_counter()
        try:
            res = fn()
        except TaskError as e:  # found while auditing (a review or the reference): the task's fault, named
            res = CriterionAudit(cid, spec.title, spec.weight, 0, f"the task failed here [{e.rule}]",
                                 [Finding(cid, "error", e.rule, str(e), "a task every criterion can run on",
                                          "fix what the error names", {"where": e.where})])
        timings[f"{cid}_s"] = round(time.perf_counter() - t0, 2)
        out.append(res)
        if cid == "well_formed" and any(f.rule == "numerics-op" for f in res.findings):
            wf_ok = False  # every review would fail with a false "no outputs": say why once, here
    timings["total_s"] = round(time.perf_counter() - t_all, 2)
    from nkieval import __version__

    return AuditReport(task.id, str(directory), out, seed, tgt, timings=timings, reviews=int(ctx.times.get("reviews", 0)),
                       versions={"nkieval": __version__, "audit": AUDIT_VERSION}).finalize()
