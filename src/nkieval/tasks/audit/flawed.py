"""Criterion "Flawed candidates prove something": each flawed candidate is caught in its named criterion
(below the expert's level there) by a finding that contains one of its evidence words, and no evidence
word also appears in the expert's own review (text every review prints, such as the recipe, is no
evidence of a flaw)."""

from __future__ import annotations

from nkieval.review.suite import names_flaw
from nkieval.tasks.audit.context import AuditContext
from nkieval.tasks.audit.hostile import trivial_kernels
from nkieval.tasks.audit.model import CriterionAudit, Finding, level_of


def audit(ctx: AuditContext) -> CriterionAudit:
    task = ctx.task
    fs: list[Finding] = []
    rows = ["| flawed candidate | criterion | level (expert) | evidence found | verdict |", "|---|---|---|---|---|"]
    if not task.flawed:
        fs.append(Finding("flawed", "warning", "no-flawed", "the task ships no flawed candidates",
                          "two or more flawed candidates, each naming its criterion and evidence",
                          "add flawed/*.py and [[flawed]] entries"))
        return CriterionAudit("flawed", "Flawed candidates prove something", 1.0, level_of(fs), "none", fs)
    src = ctx.expert_source()
    ex = ctx.run("expert", src, compare_references=True) if src else None
    # text any review of this task may print whatever the kernel does: the expert's review, the recipe's
    # formats, the op and kernel names (a word from it matches a review of any candidate)
    recipe = task.numerics.recipe
    boiler = [ex.text if ex is not None else "", task.numerics.op, task.kernel,
              *(str(v) for v in recipe.values() if isinstance(v, str)),
              *(str(x) for v in recipe.values() if isinstance(v, list) for x in v)]
    expert_text = "\n".join(boiler).lower()
    zeros = next((g for g in trivial_kernels(task) if g.id == "zeros" and g.source), None)
    caught = 0
    for fl in task.flawed:
        path = (task.directory / fl.file).resolve()
        # the differential check against kernel.cu adds evidence to Migration only: other flaws are judged
        # without it (its CUDA runs and cause search were most of such a review)
        o = ctx.run(f"flawed:{fl.file}", path, families=tuple(fl.families) or None, compare_references=True,
                    keep_feedback=True, task=None if fl.criterion == "migration" else ctx.tests_only())
        lv = o.levels.get(fl.criterion)
        ref = 4
        if ex is not None and isinstance(ex.levels.get(fl.criterion), int):
            ref = min(4, ex.levels[fl.criterion])  # type: ignore[arg-type]
        lines = o.feedback.get(fl.criterion, [])
        named = names_flaw(fl.evidence, lines)
        ok = isinstance(lv, int) and lv < ref and named
        caught += ok
        rows.append(f"| {fl.file} | {fl.criterion} | {lv} ({ref}) | {'yes' if named else 'no'} | {o.verdict} |")
        if not isinstance(lv, int) or lv >= ref:
            fs.append(Finding("flawed", "error", "flawed-not-caught",
                              f"{fl.file} ({fl.flaw}) is not marked down in {fl.criterion}: level {lv}, expert {ref}",
                              f"the flaw lowers {fl.criterion} below the expert's level",
                              "make the flaw real (or name the criterion that catches it)",
                              {"file": fl.file, "levels": o.levels}))
        elif not fl.evidence:
            fs.append(Finding("flawed", "warning", "no-evidence",
                              f"{fl.file} declares no evidence words", "words that name the flaw",
                              "add evidence = [...] from what the review writes for it"))
        elif not named:
            fs.append(Finding("flawed", "error", "evidence-not-found",
                              f"no {fl.criterion} finding for {fl.file} contains any of {list(fl.evidence)}",
                              "a finding that names the flaw", "update evidence to the review's wording for it",
                              {"file": fl.file, "feedback": lines[:4]}))
        generic = [w for w in fl.evidence if w.strip() and w.lower() in expert_text]
        if generic:
            fs.append(Finding("flawed", "error", "evidence-in-expert-review",
                              f"evidence word(s) {generic} of {fl.file} also appear in the expert's review or in "
                              "text every review of this task prints (recipe, op, kernel name), so they do not name "
                              "the flaw", "evidence words that only a review of the flaw contains",
                              "choose a phrase from the flaw's own finding (e.g. the diagnosed cause)",
                              {"file": fl.file, "words": generic}))
        elif named and fl.criterion in ("correctness", "numerics") and zeros is not None and zeros.source is not None:
            z = ctx.run("trivial:zeros", zeros.source)
            if names_flaw(fl.evidence, z.feedback.get(fl.criterion, [])):
                fs.append(Finding("flawed", "warning", "evidence-symptom-only",
                                  f"the evidence {list(fl.evidence)} of {fl.file} also names a kernel that writes "
                                  f"zeros: it is the symptom, not the flaw ({fl.flaw})",
                                  "evidence that names the flaw's cause", "declare the wrong formula in reference.py "
                                  "VARIANTS so the review names its cause, then use that phrase",
                                  {"file": fl.file}))
    summary = f"{caught}/{len(task.flawed)} flawed candidates caught with evidence"
    return CriterionAudit("flawed", "Flawed candidates prove something", 1.0, level_of(fs), summary, fs,
                          {"table": rows})
