"""Criterion "Well-formed": ``task check`` and what it does not catch yet (unknown numerics op, an
oracle missing for ``op = "reference"``, placeholders, a known-wrong variant that is the reference)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from nkieval.tasks.audit.model import CriterionAudit, Finding, level_of
from nkieval.tasks.schema import Task

_PLACEHOLDER = re.compile(r"\b(TODO|TBD|FIXME|XXX)\b|lorem ipsum", re.IGNORECASE)


def audit(task: Task, path: Path) -> CriterionAudit:
    from nkieval.tasks.loader import (
        check_task,
        load_reference,
        load_reference_variants,
        numerics_op_problem,
        reference_outputs,
    )

    fs: list[Finding] = []
    rep = check_task(path, run_reference=True)
    for e in rep.errors:
        if "[task rule numerics-op]" in e:
            continue  # reported below with its suggestion
        fs.append(Finding("well_formed", "error", "task-check", e, "`nkieval task check` passes",
                          "fix what the error names"))
    for w in rep.warnings:
        fs.append(Finding("well_formed", "info", "task-check-warning", w, "no warnings", "see the coverage criterion"))
    why = numerics_op_problem(task)
    if why:
        fs.append(Finding("well_formed", "error", "numerics-op", f"task.toml:numerics.op: {why}",
                          "a registered numerics op, or 'reference' with an oracle() and k",
                          "name a registered op (nkieval.numerics.oracle.OPS) or use op = \"reference\" with an "
                          "oracle in reference.py", {"op": task.numerics.op}))
    for where, text in (("statement", task.statement), ("title", task.title)):
        m = _PLACEHOLDER.search(text)
        if m:
            fs.append(Finding("well_formed", "error", "placeholder",
                              f"task.toml:{where} contains the placeholder {m.group(0)!r}",
                              "a finished problem statement", "replace the placeholder with the real text"))
    # a known wrong formula identical to the reference "explains" nothing and hides real diagnoses
    try:
        variants = load_reference_variants(task)
    except Exception:  # reported by task check
        variants = []
    if variants:
        from nkieval.tasks.inputs import generate_inputs

        fn = load_reference(task)
        same: dict[str, list[str]] = {v.id: [] for v in variants}
        cases = [(case, fam) for case in task.shapes for fam in task.families]
        for case, fam in cases:  # identical on *every* shape and family (a degenerate shape, or a family
            # without the hazard the variant mishandles, may make any two agree)
            ins = generate_inputs([(t.name, t.concrete(case.dims), t.dtype, t.family) for t in task.inputs],
                                  fam, 0, case.label)
            try:
                ref = np.asarray(reference_outputs(task, fn, ins)[0], np.float64)
            except Exception:
                break  # reported by the reference criterion
            for v in variants:
                try:
                    vo = np.asarray(v.fn(*[ins[t.name] for t in task.inputs], **task.params), np.float64)
                except Exception:
                    continue  # reported by task check
                tol = 1e-6 * (float(np.nanmax(np.abs(ref))) if ref.size else 0.0)
                if vo.shape == ref.shape and np.allclose(vo, ref, rtol=0, atol=tol, equal_nan=True):
                    same[v.id].append(case.label)
        for v in variants:
            if len(same[v.id]) == len(cases):
                fs.append(Finding("well_formed", "error", "variant-is-reference",
                                  f"reference.py:VARIANTS[{v.id!r}] ({v.cause}) computes the reference's output on "
                                  f"every shape and input family", "each known wrong formula differs from the reference",
                                  "write the variant as the flaw it names, or remove it", {"variant": v.id}))
    errors = [f for f in fs if f.severity == "error"]
    summary = "task check passes" if not errors else f"{len(errors)} problem(s): " + "; ".join(
        f.rule for f in errors[:4])
    return CriterionAudit("well_formed", "Well-formed", 1.0, level_of(fs), summary, fs)
