"""Criterion "Hard to game": the generic hostile kernels (:mod:`nkieval.tasks.audit.hostile`) all fail."""

from __future__ import annotations

from nkieval.tasks.audit.context import AuditContext
from nkieval.tasks.audit.hostile import hostile_kernels
from nkieval.tasks.audit.model import CriterionAudit, Finding, level_of


def audit(ctx: AuditContext) -> CriterionAudit:
    fs: list[Finding] = []
    rows = ["| hostile kernel | what it tries | verdict | caught by |", "|---|---|---|---|"]
    tried = caught = 0
    for g in hostile_kernels(ctx.task, ctx.expert_source()):
        if g.source is None:
            rows.append(f"| {g.id} | {g.what} | not applicable: {g.why_not} | |")
            continue
        tried += 1
        o = ctx.run_screened(f"hostile:{g.id}", g.source)
        by = "tests" if o.killed_by_tests else (o.verdict if not o.passed else "-")
        rows.append(f"| {g.id} | {g.what} | {o.verdict} | {by} |")
        if o.passed:
            fs.append(Finding("gaming", "error", "hostile-passes",
                              f"the hostile kernel '{g.id}' ({g.what}) passes the review",
                              "every generic hostile kernel fails",
                              "add hidden shapes unlike the public one and cases that expose it" if
                              g.id == "public_shape_only" else "report it: the review lets it through",
                              {"kernel": g.id}))
        else:
            caught += 1
    summary = f"{caught}/{tried} generic hostile kernels fail"
    return CriterionAudit("gaming", "Hard to game", 1.5, level_of(fs), summary, fs, {"table": rows})
