"""Criterion "Tests discriminate": the expert passes everywhere; trivial kernels and mutants of the expert
fail. Every kernel is reviewed in the sandbox (:mod:`nkieval.tasks.audit.runner`)."""

from __future__ import annotations

import dataclasses
import time

from nkieval.tasks.audit.clock import tree_cpu_s
from nkieval.tasks.audit.context import AuditContext
from nkieval.tasks.audit.hostile import trivial_kernels
from nkieval.tasks.audit.model import CriterionAudit, Finding, level_of
from nkieval.tasks.audit.mutate import Mutant, mutants
from nkieval.tasks.audit.permitted import permitted_by_recipe
from nkieval.tasks.audit.runner import RunOutcome
from nkieval.tasks.schema import ShapeCase, Task

#: The issue's bar: the task's shapes, families and tolerances kill this share of non-stillborn mutants.
KILL_RATE_BAR = 0.95

_SUGGEST = {
    "op_swap": "an input family on which the two operators differ (signs, magnitudes) or a tighter tolerance",
    "loop_bound": "a shape with more than one trip of this loop (several tiles along its axis)",
    "loop_start": "a shape with more than one trip of this loop",
    "slice_extent": "a ragged shape whose last row/column this extent covers",
    "slice_bound": "a shape on which this slice's last element is checked",
    "drop_branch": "a shape that takes this branch (a ragged tail or the special case it handles)",
    "dtype_downgrade": "a family with a wide dynamic range or a longer reduction, or a tolerance at the "
                       "recipe's precision",
    "const_perturb": "a tolerance that sees a 1% change in this constant",
    "swap_operands": "inputs on which the operands differ in value and layout",
}


def audit(ctx: AuditContext) -> CriterionAudit:
    task = ctx.task
    fs: list[Finding] = []
    meas: dict[str, object] = {}
    src = ctx.expert_source()
    if src is None:
        fs.append(Finding("discriminates", "error", "no-expert", "the task ships no solution_nki.py",
                          "an expert solution that passes every case", "add solution_nki.py"))
        return CriterionAudit("discriminates", "Tests discriminate", 2.0, level_of(fs), "no expert solution", fs)
    # with the reference kernels: the same review answers Hardware-appropriate and Flawed on this target
    ex = ctx.run("expert", src, compare_references=True)
    meas["expert"] = {"verdict": ex.verdict, "passed": ex.passed, "failing": ex.failing[:8]}
    if not ex.passed:
        fs.append(Finding("discriminates", "error", "expert-fails",
                          f"the expert solution does not pass its own task on {ctx.target}: verdict {ex.verdict} "
                          f"({ex.reason[:300]}); failing cases {ex.failing[:6]}",
                          "the expert passes every public and hidden shape and family",
                          "fix solution_nki.py or the task (reference, tolerance, shapes)",
                          {"levels": ex.levels}))
    twin = task.directory / "solution_beta1.py"  # the Beta-1 expert some tasks ship: it must pass too
    if twin.is_file():
        b1 = ctx.run("expert:beta1", twin)
        meas["expert_beta1"] = {"verdict": b1.verdict, "passed": b1.passed, "failing": b1.failing[:8]}
        if not b1.passed:
            fs.append(Finding("discriminates", "error", "beta1-expert-fails",
                              f"solution_beta1.py does not pass its task on {ctx.target}: verdict {b1.verdict} "
                              f"({b1.reason[:300]}); failing cases {b1.failing[:6]}",
                              "every expert solution the task ships passes every case",
                              "fix solution_beta1.py (or the Beta-1 front end, if the kernel is legal)"))
    rows = ["| kernel | verdict | caught by tests | failing cases |", "|---|---|---|---|"]
    for g in trivial_kernels(task):
        if g.source is None:
            rows.append(f"| {g.id} | not applicable ({g.why_not}) | | |")
            continue
        o = ctx.run_screened(f"trivial:{g.id}", g.source)
        rows.append(f"| {g.id} | {o.verdict} | {'yes' if o.killed_by_tests else 'no'} | {len(o.failing)} |")
        if o.passed:
            fs.append(Finding("discriminates", "error", "trivial-passes",
                              f"the trivial kernel '{g.id}' ({g.what}) passes the review",
                              "every trivial kernel fails a correctness or numerics check",
                              "add input families and shapes on which this output is wrong; tighten the tolerance",
                              {"kernel": g.id}))
        elif not o.killed_by_tests:
            fs.append(Finding("discriminates", "warning", "trivial-not-caught-by-tests",
                              f"the trivial kernel '{g.id}' ({g.what}) fails only with verdict {o.verdict} "
                              f"({o.reason[:200]}), no correctness or numerics check failed",
                              "the tests themselves reject it", "add cases on which its output is wrong",
                              {"kernel": g.id}))
    meas["trivial_table"] = rows
    if ex.passed:
        fs += _mutation(ctx, src, meas)
    table = [*rows, "", *meas.get("mutant_table", [])]  # type: ignore[misc]
    meas["table"] = table
    errors = [f for f in fs if f.severity == "error"]
    kr = meas.get("kill_rate")
    summary = (f"expert {'passes' if ex.passed else 'FAILS'}; trivial kernels caught "
               f"{sum(1 for r in rows[2:] if '| yes |' in r)}/{sum(1 for r in rows[2:] if 'not applicable' not in r)}"
               + (f"; mutants killed {meas['killed']}/{meas['killed'] + meas['survived']} "  # type: ignore[operator]
                  f"({100 * kr:.0f}%), {meas['stillborn']} stillborn, {meas['equivalent']} equivalent"
                  + (f", {meas['permitted']} permitted by the recipe" if meas.get("permitted") else "")
                  if isinstance(kr, float) else "")
               + (f"; {len(errors)} error(s)" if errors else ""))
    return CriterionAudit("discriminates", "Tests discriminate", 2.0, level_of(fs), summary, fs,
                          {k: v for k, v in meas.items() if k != "trivial_table"})


def _mutation(ctx: AuditContext, src: str, meas: dict[str, object]) -> list[Finding]:
    fs: list[Finding] = []
    t0, cpu0 = time.perf_counter(), tree_cpu_s()  # the budget is CPU time: the same mutants run on a busy machine
    ms, n_sites = mutants(src, max_mutants=ctx.max_mutants)
    expert = ctx.run("expert", src)
    killed, survived, stillborn, same = [], [], [], []
    rows = ["| mutant | operator | line | change | outcome |", "|---|---|---|---|---|"]
    not_run: list[Mutant] = []
    outcomes: dict[str, RunOutcome] = {}
    for m in ms:
        if tree_cpu_s() - cpu0 > ctx.mutation_budget_s:
            not_run.append(m)
            rows.append(f"| {m.id} | {m.kind} | {m.line} | {m.description.replace('|', '/')} | not run (time budget) |")
            continue
        # the screen first (smaller shapes, one family): most mutants fail there; any other is reviewed in full
        o = outcomes[m.id] = ctx.run_screened(f"mutant:{m.id}", m.source, tests_only=True)
        if o.passed and o.errors == expert.errors and expert.errors:
            same.append(m)  # its outputs' errors equal the expert's on every case: equivalent as far as tests go
            outcome = "survived, equivalent on every case"
        elif o.passed:
            survived.append(m)
            outcome = "SURVIVED"
        elif o.killed_by_tests:
            killed.append(m)
            outcome = f"killed ({len(o.failing)} failing cases, first {o.failing[0]})"
        else:
            stillborn.append(m)
            outcome = f"stillborn ({o.verdict}: {o.reason[:60]})"
        rows.append(f"| {m.id} | {m.kind} | {m.line} | {m.description.replace('|', '/')} | {outcome} |")
    # a mutant whose outputs equal the expert's on every case is equivalent *or* changes code no case
    # reaches (an untested tail branch): the probe shape tells them apart where it can
    probes = _probe(ctx, [*same, *survived]) if ctx.probe_survivors and (survived or same) else {}
    reached = [m for m in same if m.id in probes]
    same = [m for m in same if m.id not in probes]
    survived = reached + survived
    for m in reached:
        rows = [r.replace("survived, equivalent on every case", f"SURVIVED (the probe shape {probes[m.id]} kills it)")
                if r.startswith(f"| {m.id} |") else r for r in rows]
    # a survivor the task's precision recipe permits (an operand consumed in the compute dtype, within the
    # numerics standard's bound on every case) is listed on its own: no test should kill it
    why = {m.id: w for m in survived if m.id not in probes
           for w in [permitted_by_recipe(ctx.task, m.operand, m.kind, outcomes[m.id].margins)] if w}
    permitted = [m for m in survived if m.id in why]
    survived = [m for m in survived if m.id not in why]
    for m in permitted:
        rows = [r.replace("| SURVIVED |", "| survived, permitted by the recipe |") if r.startswith(f"| {m.id} |")
                else r for r in rows]
    n = len(killed) + len(survived)
    rate = len(killed) / n if n else None
    meas.update(mutants=len(ms), not_run=len(not_run), mutation_sites=n_sites, killed=len(killed), survived=len(survived),
                stillborn=len(stillborn), equivalent=len(same), permitted=len(permitted), kill_rate=rate, mutant_table=rows,
                mutation_s=round(time.perf_counter() - t0, 1), mutation_cpu_s=round(tree_cpu_s() - cpu0, 1),
                per_operator={k: [sum(m.kind == k for m in killed), sum(m.kind == k for m in survived)]
                              for k in sorted({m.kind for m in ms})})
    for m in same:
        fs.append(Finding("discriminates", "info", "mutant-equivalent",
                          f"mutant {m.id} ({m.kind}, line {m.line}: {m.description}) passes with outputs whose errors "
                          "equal the expert's on every case" + (", and on the probe shape" if ctx.probe_survivors
                                                                 else ""),
                          "(likely an equivalent mutant: not counted in the kill rate)",
                          "nothing, unless the change should matter", {"mutant": m.id, "diff": m.diff}))
    for m in permitted:
        fs.append(Finding("discriminates", "info", "mutant-permitted-by-recipe",
                          f"mutant {m.id} ({m.kind}, line {m.line}: {m.description}) passes every case: {why[m.id]}",
                          "(a kernel the task's precision recipe permits: not counted in the kill rate)",
                          "nothing, unless the recipe should not permit it: then declare a finer compute dtype",
                          {"mutant": m.id, "diff": m.diff, "operand": m.operand}))
    for m in survived:
        killer = probes.get(m.id)
        fs.append(Finding("discriminates", "warning", "mutant-survives",
                          f"mutant {m.id} ({m.kind}, line {m.line}: {m.description}) passes every case",
                          "the task's shapes, families and tolerance kill mutants of the expert (or the mutant is "
                          "equivalent to it)",
                          (f"add the shape {killer}, on which it fails" if killer else
                           f"add {_SUGGEST.get(m.kind, 'a case that exposes it')}, or confirm it is equivalent"),
                          {"mutant": m.id, "kind": m.kind, "diff": m.diff, "killing_shape": killer}))
    if rate is not None and rate < KILL_RATE_BAR:
        fs.append(Finding("discriminates", "error", "mutation-kill-rate",
                          f"the tests kill {len(killed)} of {n} non-stillborn mutants of the expert "
                          f"({100 * rate:.0f}%; {len(stillborn)} stillborn, {len(same)} equivalent, "
                          f"{len(permitted)} permitted by the recipe, {len(ms)} sampled "
                          f"of {n_sites} sites" + (f", {len(not_run)} not run in the time budget" if not_run else "")
                          + ")",
                          f">= {100 * KILL_RATE_BAR:.0f}% of non-equivalent mutants killed",
                          "see the surviving mutants: add the shapes or families they name",
                          {"kill_rate": rate, "survivors": [m.id for m in survived]}))
    return fs


def probe_shapes(task: Task) -> list[ShapeCase]:
    """An extra hidden shape to look for a mutant killer: the first public shape with every dimension one
    larger (a new ragged tail on every axis, at the size the task author chose to show). Not the largest
    hidden shape grown by one: the probe needs the numerics standard's oracle on a new case, and on the
    largest shape that oracle cost as much as all of the task's own cases together (flash_attention_fwd)."""
    base = task.public_shapes[0] if task.public_shapes else max(task.hidden_shapes,
                                                                key=lambda s: sum(s.dims.values()))
    return [ShapeCase(dims={k: v + 1 for k, v in base.dims.items()}, hidden=True, index=len(task.hidden_shapes),
                      note="audit probe")]


def _probe(ctx: AuditContext, survived: list[Mutant], limit: int = 4) -> dict[str, str]:
    """For the first ``limit`` survivors: a probe shape on which the expert passes and the mutant fails. The
    mutants go first: the expert's review on the probe (its largest shape yet) is needed only when one fails."""
    task = ctx.task
    out: dict[str, str] = {}
    src = ctx.expert_source()
    assert src is not None
    for shape in probe_shapes(task):
        probe = ctx.tests_only(dataclasses.replace(task, shapes=(*task.public_shapes, shape)))
        failed = [m for m in survived[:limit] if m.id not in out
                  and ctx.run(f"mutant:{m.id}@probe{shape.index}", m.source, task=probe).killed_by_tests]
        if failed and ctx.run(f"expert@probe{shape.index}", src, task=probe).passed:
            for m in failed:
                out[m.id] = "{" + ", ".join(f"{k} = {v}" for k, v in shape.dims.items()) + "}"
    return out
