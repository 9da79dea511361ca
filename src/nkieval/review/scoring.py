"""One scoring function per rubric criterion: evidence in, level and feedback lines out.

Every function reads the thresholds of the rubric (versioned data) and returns a
:class:`CriterionResult` whose feedback lines cite the evidence they rest on (case, shape and
seed; metric and value; source line). A criterion whose evidence source is missing returns
``verdict="not-assessed"`` with the reason, never a guessed level.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nkieval.review import wording as W
from nkieval.review.evidence import HardwareEvidence
from nkieval.review.integrity import IntegrityIssue
from nkieval.review.model import CaseResult, CriterionResult, Feedback
from nkieval.review.rubric import Criterion, Rubric
from nkieval.tasks.schema import Task


@dataclass
class Evidence:
    """Everything the scorers may look at, gathered by the pipeline."""

    task: Task
    rubric: Rubric
    target: str
    cases: list[CaseResult]
    integrity: list[IntegrityIssue] = field(default_factory=list)
    hw: HardwareEvidence | None = None
    hw_case: CaseResult | None = None
    hw_solution: HardwareEvidence | None = None
    hw_baseline: HardwareEvidence | None = None
    perf: dict[str, Any] | None = None  # {"candidate": d, "baseline": d|None, "solution": d|None}
    perf_reason: str | None = None
    numerics_reason: str | None = None
    analysis: list[dict[str, Any]] | None = None
    analysis_reason: str | None = None
    migration: list[dict[str, Any]] | None = None
    migration_reason: str | None = None
    #: the port against the task's CUDA source run on the same inputs (stages.differential)
    differential: dict[str, Any] | None = None
    differential_reason: str | None = None


def _verdict(level: int) -> str:
    return "pass" if level >= 4 else "partial" if level >= 2 else "fail"


def _case_ev(c: CaseResult) -> dict[str, Any]:
    return {"case": c.case, "shape": c.shape, "family": c.family, "seed": c.seed, "hidden": c.hidden}


def _shape(c: CaseResult) -> str:
    return f"{c.case} ({', '.join(f'{k}={v}' for k, v in c.shape.items())}; {c.family}, seed {c.seed})"


# ------------------------------------------------------------------------------ correctness
_SUGGEST = {
    "unwritten": "cover the whole index space: loop over ceil(n / tile) tiles and clamp the last one with min() "
                 "(or process the remainder as its own tile), as the CUDA bounds guard does",
    "nonfinite": "find the intermediate that overflows: exp of large arguments (subtract the row max first), "
                 "a division by a zero sum, inf * 0; keep every intermediate inside its dtype's range",
    "mismatch": "the listed rows/columns localise the bug; compare tile origins and strides there with the reference",
    "shape": "return outputs with exactly the declared shapes",
    "dtype": "allocate each output with the declared dtype (nl.ndarray(..., dtype=..., buffer=nl.shared_hbm))",
    "exception": "fix the exception at the candidate line shown",
    "import-error": "make the file importable on its own and define the kernel entry point at top level",
    "timeout": "the kernel did not finish; look for an unbounded loop or a Python loop over every element",
    "memory-limit": "allocate only tile-sized buffers; no host arrays or HBM tensors beyond the outputs",
    "crash": "do not exit the process or raise signals from a kernel",
    "bad-output": "allocate outputs with nl.ndarray(shape, dtype, buffer=nl.shared_hbm), write them with "
                  "nisa.dma_copy/nl.store, and return them",
    "instruction-limit": "issue one instruction per tile, not per element or row",
    "not-run": "fix the earlier failure first",
    "infra-error": "retry: this is a harness failure, not the candidate's",
    "sandbox-violation": "a kernel only computes: no processes, files, network or signals",
    "violation": "a kernel only computes: no processes, files, network or signals",
}
_EXPECT = {
    "unwritten": "every output element written, for any size including n % 128 != 0",
    "mismatch": "values within the task tolerance of the reference",
    "nonfinite": "finite outputs wherever the reference is finite",
    "shape": "the declared output shape",
    "dtype": "the declared output dtype",
    "timeout": "the kernel finishes within the task's time limit",
    "memory-limit": "memory use within the task's limit",
    "crash": "the kernel returns normally",
    "bad-output": "outputs that are HBM tensors allocated and written by the kernel's own instructions",
    "instruction-limit": "an instruction count within the task's limit",
}


def _reproduced_cause(c: CaseResult) -> dict[str, Any] | None:
    """The numerics diagnosis's top finding when a defect model re-ran the op that way and reproduced
    the output (a named cause with evidence, not a guess from the error's shape)."""
    findings = (c.numerics or {}).get("findings") or []
    top = findings[0] if findings else None
    if isinstance(top, dict) and top.get("cause") and "reproduces the kernel's output" in str(top.get("evidence")):
        return top
    return None


def _out_shape(c: CaseResult, task: Task, name: str) -> tuple[int, ...] | None:
    spec = next((o for o in task.outputs if o.name == name), None)
    if spec is None:
        return None
    try:
        return tuple(int(d) if isinstance(d, int) else int(c.shape[d]) for d in spec.shape)
    except (KeyError, TypeError, ValueError):
        return None


def _ends_at_last(c: CaseResult, task: Task, m: dict[str, Any]) -> bool:
    shape = _out_shape(c, task, m["output"])
    return bool(shape) and list(m.get("last_index") or []) == [d - 1 for d in shape]  # type: ignore[union-attr]


def _tail_failure(c: CaseResult, task: Task, partitions: int) -> bool | None:
    """Whether a failing case can be a dropped bounds guard: anything but wrong values (unwritten, NaN), or
    wrong values whose worst element lies in the last partial tile (``partitions`` rows) of the first axis. A
    value mismatch inside the whole tiles (a bf16 intermediate on a ragged shape) is not a bounds problem; on a
    first axis no longer than one tile the case cannot tell (None)."""
    m = c.mismatch or {}
    if m.get("kind") != "mismatch" or not m.get("worst_index"):
        return True
    shape = _out_shape(c, task, m["output"])
    if not shape:
        return True
    if shape[0] <= partitions:
        return None
    return int(m["worst_index"][0]) >= (shape[0] // partitions) * partitions


def _tail_seen(cases: list[CaseResult], task: Task) -> set[str]:
    """Outputs with a case whose unwritten elements are a partial tail: there, a small case left wholly
    unwritten is the same bug (its only tile is the tail), not an output never stored."""
    return {m["output"] for c in cases for m in [c.mismatch or {}]
            if m.get("kind") == "unwritten" and m["count"] < m["total"] and _ends_at_last(c, task, m)}


def _unwritten_cause(c: CaseResult, task: Task, m: dict[str, Any], tails: set[str] = frozenset()  # type: ignore[assignment]
                     ) -> tuple[str, str, str]:
    """What the pattern of unwritten elements says: (key part, cause, suggestion); matched pattern."""
    out = m["output"]
    ends = _ends_at_last(c, task, m)
    if ends and (m["count"] < m["total"] or out in tails):
        return ("tail", f"the last partial tile of {out} is skipped (a size that is not a multiple of the tile)",
                _SUGGEST["unwritten"])
    if m["count"] >= m["total"]:
        return ("never-stored", f"the kernel never stores {out}",
                f"store every result tile into {out} (nl.store / nisa.dma_copy into the kernel-allocated HBM tensor)")
    return ("gaps", f"some tiles of {out} are never stored",
            "check the loop bounds and the tile origins of the stores: every tile of the index space must be written")


def _mismatch_cause(c: CaseResult) -> tuple[str | None, str | None, str | None, str | None]:
    """(cause id, cause, confidence, action) of a mismatching case, from its numerics diagnosis."""
    findings = (c.numerics or {}).get("findings") or []
    top = findings[0] if findings and isinstance(findings[0], dict) else None
    conf = W.finding_confidence(top)
    if top is None or conf is None or conf == "suspected":
        return None, None, None, None
    return str(top.get("id")), str(top.get("cause")), conf, top.get("action") or None


def _group_key(c: CaseResult, task: Task, tails: set[str] = frozenset()) -> str:  # type: ignore[assignment]
    if c.status == "ok" and c.mismatch:
        m = c.mismatch
        kind = m["kind"]
        if kind == "unwritten":
            return f"unwritten:{m['output']}:{_unwritten_cause(c, task, m, tails)[0]}"
        cid = _mismatch_cause(c)[0]
        return f"cause:{cid}" if cid else f"correctness:{kind}:{m['output']}"
    e = c.error
    return f"status:{c.status}:{e.get('rule') or e.get('error_type') or ''}:{e.get('location') or ''}"


def _group_feedback(group: list[CaseResult], task: Task, tails: set[str] = frozenset()  # type: ignore[assignment]
                    ) -> Feedback:
    """One feedback line for every failing case with the same cause: the first case quoted, the others listed."""
    c = group[0]
    ev = _case_ev(c)
    names = [x.case for x in group]
    fams = sorted({x.family for x in group})
    more = (f"; the same in {len(group) - 1} more case(s): {W.case_list(names[1:])}" if len(group) > 1 else "")
    key = _group_key(c, task, tails)
    cause = conf = None
    if c.status == "ok" and c.mismatch:
        m = c.mismatch
        kind = m["kind"]
        ev.update({k: v for k, v in m.items() if k != "kind"})
        sug = _SUGGEST[kind]
        if kind == "unwritten":
            _, cause, sug = _unwritten_cause(c, task, m, tails)
            conf = "matched-pattern"
            obs = (f"{_shape(c)}: {W.share(m['count'], m['total'])} of {m['output']} were never written (NaN), "
                   f"indices {W.index(m['first_index'])}..{W.index(m['last_index'])}")
        elif kind == "nonfinite":
            obs = (f"{_shape(c)}: {W.share(m['count'], m['total'])} of {m['output']} are NaN ({W.num(m['nan'])}) or "
                   f"inf ({W.num(m['inf'])}) where the reference is finite; every element was written, so the kernel "
                   f"computed them, indices {W.index(m['first_index'])}..{W.index(m['last_index'])}"
                   + (f"; rows {m['rows_affected']}" if len(m.get("first_index") or []) > 1 else ""))
            cause, conf = "an intermediate overflows (or computes inf - inf, 0/0, inf * 0)", "suspected"
        elif kind == "mismatch":
            obs = (f"{_shape(c)}: {W.share(m['count'], m['total'])} of {m['output']} differ from the reference; "
                   f"worst at {W.index(m['worst_index'])}: got {W.num(m['got'])}, expected {W.num(m['expected'])} "
                   f"(|err| {W.num(m['abs_error'])} > allowed {W.num(m['allowed'])})"
                   + (f"; rows {m['rows_affected']}" if len(m.get("worst_index") or []) > 1 else ""))
            rel = W.relative_error(m.get("got"), m.get("expected"))
            if m["count"] * 10 >= m["total"] and (rel is None or rel > 0.01):
                sug = ("the values are wrong, not imprecise: check the formula against the task statement, "
                       f"reproducing it on {c.case} (seed {c.seed})")
        else:
            obs = f"{_shape(c)}: output {m['output']} has {kind} {m['got']}, expected {m['expected']}"
        cid, rcause, rconf, action = _mismatch_cause(c) if kind != "unwritten" else (None, None, None, None)
        if rcause is not None:
            cause, conf = rcause, rconf
            if rconf == "reproduced":
                f0 = ((c.numerics or {}).get("findings") or [{}])[0]
                obs += f"; {W.stated(rcause, rconf)} ({f0.get('evidence')})"
            else:
                obs += f"; {W.stated(rcause, rconf)}"
            sug = action or sug
            ev["finding"] = cid
        elif cause is not None:
            obs += f"; {W.stated(cause, conf)}"
        fb = Feedback("correctness", "error", obs + more, _EXPECT[kind], sug, ev, cause=cause, confidence=conf,
                      cases=names, families=fams, key=key)
        fb.brief = f"{kind} on {len(group)} case(s)"
        return fb
    e = c.error
    ev.update({k: v for k, v in e.items() if k in ("rule", "instruction", "location", "error_type")})
    if c.status == "rule-violation":
        from nkieval.sim.errors import RULES

        rule = RULES.get(e.get("rule", ""))
        obs = f"{_shape(c)}: hardware rule violated: {e.get('message', '')}"
        exp = f"every instruction respects rule {e.get('rule')}: {rule.title if rule else 'see nkieval rules'}"
        sug = rule.why if rule else "see `nkieval rules`"
        return Feedback("correctness", "error", obs + more, exp, sug, ev, cause=f"rule {e.get('rule')}",
                        confidence="measured", cases=names, families=fams, key=key)
    where = f" at {e['frames'][-1]}" if e.get("frames") else ""
    obs = f"{_shape(c)}: {c.status}: {e.get('error_type', '')} {e.get('message', '')}".rstrip() + where
    for k in ("stdout_tail", "stderr_tail"):
        if k in e:
            ev[k] = e[k][-200:]
    return Feedback("correctness", "error", obs + more,
                    _EXPECT.get(c.status, "the kernel runs and returns its outputs"),
                    _SUGGEST.get(c.status, "fix the failure shown"), ev, cases=names, families=fams, key=key)


def score_correctness(ev: Evidence, crit: Criterion) -> CriterionResult:
    cases = ev.cases
    fb: list[Feedback] = []
    not_program = [i for i in ev.integrity if getattr(i, "kind", "forbidden") != "forbidden"]
    if not_program:
        i = not_program[0]
        fb.append(Feedback("correctness", "error", f"candidate.py:{i.line} {i.what}",
                           "a UTF-8 Python file that parses", "fix the file so that Python can parse it",
                           {"location": f"candidate.py:{i.line}", "rule": i.kind}))
        return CriterionResult(crit.id, crit.title, crit.weight, "fail", 0, f"{i.what}; the candidate was not run", fb)
    if ev.integrity:
        for i in ev.integrity:
            fb.append(Feedback("correctness", "error", f"candidate.py:{i.line} {i.what}",
                               "a self-contained kernel that only uses nki, numpy and math",
                               f"remove it: {i.why}", {"location": f"candidate.py:{i.line}", "rule": "integrity"}))
        return CriterionResult(crit.id, crit.title, crit.weight, "fail", 0,
                               f"integrity: {len(ev.integrity)} forbidden construct(s); the candidate was not run",
                               fb)
    public = [c for c in cases if not c.hidden]
    hidden = [c for c in cases if c.hidden]
    ok = [c for c in cases if c.correct]
    failed = [c for c in cases if not c.correct]
    groups: dict[str, list[CaseResult]] = {}
    later: list[CaseResult] = []
    tails = _tail_seen(failed, ev.task)
    for c in sorted(failed, key=lambda x: x.hidden):  # one line per cause; a public case is quoted first
        if (c.mismatch or {}).get("kind") in ("mismatch", "nonfinite") and \
                str((c.numerics or {}).get("diagnosis", "")).startswith("skipped"):
            later.append(c)  # its cause was not diagnosed: joins a diagnosed group of the same symptom below
            continue
        groups.setdefault(_group_key(c, ev.task, tails), []).append(c)
    for c in later:
        sym = ((c.mismatch or {}).get("kind"), (c.mismatch or {}).get("output"))
        home = next((k for k, g in groups.items()
                     if ((g[0].mismatch or {}).get("kind"), (g[0].mismatch or {}).get("output")) == sym), None)
        groups.setdefault(home or _group_key(c, ev.task, tails), []).append(c)
    for g in list(groups.values())[:int(ev.rubric.t("correctness", "max_listed_cases"))]:
        fb.append(_group_feedback(g, ev.task, tails))
    warns = [w for c in ok for w in c.error.get("warnings", [])]
    if not failed:
        level = 3 if warns else 4
        if warns:
            w = warns[0]
            fb.append(Feedback("correctness", "warning", f"simulator warning: {w.get('message')}",
                               "no behaviour that is undefined on hardware",
                               "fix the construct at the location shown", {"location": w.get("location"),
                                                                           "rule": w.get("rule")}))
        summary = f"correct on all {len(cases)} cases ({len(public)} public, {len(hidden)} hidden shape/family runs)"
    elif all(c.correct for c in public):
        level = 2
        summary = f"correct on the public shapes; fails {len(failed)} of {len(hidden)} hidden cases"
    elif any(c.status == "ok" for c in public):
        level = 1
        summary = f"wrong on public shapes: {len(failed)} of {len(cases)} cases fail"
    else:
        level = 0
        statuses = sorted({c.status for c in public})
        summary = f"does not run on the public shapes ({', '.join(statuses)})"
    wrong = _wrong_share(failed)
    if wrong:
        summary += f"; {wrong}"
    bad_outs = sorted({o["name"] for c in cases for o in c.outputs if o.get("correct") is False})
    if len(ev.task.outputs) > 1 and bad_outs:
        good = [o.name for o in ev.task.outputs if o.name not in bad_outs]
        summary += (f"; outputs wrong somewhere: {', '.join(bad_outs)}"
                    + (f"; right on every case that ran: {', '.join(good)}" if bad_outs and good else ""))
    if any(c.status == "bad-output" for c in cases):
        level = 0
        summary = "outputs are not HBM tensors the kernel allocated and wrote"
    return CriterionResult(crit.id, crit.title, crit.weight, _verdict(level), level, summary, fb,
                           evidence={"wrong_outputs": bad_outs, "failed_cases": [c.case for c in failed]})


def _wrong_share(failed: list[CaseResult]) -> str:
    """The share of wrong elements, smallest and largest over the failing cases that ran: 5 wrong elements of
    262,144 and a kernel wrong everywhere must not read alike."""
    xs = [(int(m["count"]), int(m["total"]), c.case) for c in failed
          for m in [c.mismatch or {}] if isinstance(m.get("count"), int) and m.get("total")]
    if not xs:
        return ""
    lo = min(xs, key=lambda t: t[0] / t[1])
    hi = max(xs, key=lambda t: t[0] / t[1])
    if lo == hi:
        return f"wrong elements: {W.share(lo[0], lo[1])} on {lo[2]}"
    return f"wrong elements: {W.share(lo[0], lo[1])} on {lo[2]} up to {W.share(hi[0], hi[1])} on {hi[2]}"


# ------------------------------------------------------------------------------ numerics
def _precision_hint(w: dict[str, Any]) -> str:
    """The worst element's relative error in significand bits, named when it matches a narrower format."""
    import math

    try:
        got, exp = float(w["got"]), float(w["expected"])
    except (KeyError, TypeError, ValueError):
        return ""
    if not (math.isfinite(got) and math.isfinite(exp)) or exp == 0 or got == exp:
        return ""
    rel = abs(got - exp) / abs(exp)
    if rel >= 0.5:  # not a precision problem: the value itself is wrong (e.g. 0 where a tiny value is due)
        return f"; worst relative error {rel:.3g}"
    bits = -math.log2(rel)
    if 6.5 <= bits <= 10.5:
        fmt = "bf16 (8 significand bits): an intermediate or the output is probably rounded to bf16"
    elif 10.5 < bits <= 12.5:
        fmt = "fp16/tf32 (11 significand bits): an intermediate is probably rounded to fp16 or tf32"
    else:
        return f"; worst relative error 2^-{bits:.1f}"
    return f"; worst relative error 2^-{bits:.1f}, the precision of {fmt}"


def score_numerics(ev: Evidence, crit: Criterion) -> CriterionResult:
    if ev.numerics_reason and not any(c.numerics for c in ev.cases):
        return CriterionResult(crit.id, crit.title, crit.weight, "not-assessed", None,
                               f"not assessed: nkieval.numerics {ev.numerics_reason}")
    judged = [c for c in ev.cases if c.numerics]
    if not judged:
        return CriterionResult(crit.id, crit.title, crit.weight, "fail", 0,
                               "no output to judge: the kernel produced no outputs")
    fails = [c for c in judged if _num_status(c) == "fail"]
    inconclusive = [c for c in judged if _num_status(c) == "inconclusive"]
    margins = [(_num_margin(c), c) for c in judged]
    finite = [(m, c) for m, c in margins if m is not None]
    worst_margin, worst_case = max(finite, key=lambda t: t[0]) if finite else (float("nan"), None)
    no_margin = [c for m, c in margins if m is None and _num_status(c) == "fail"]
    if not fails:
        level = 3 if inconclusive else 4
    elif len(fails) == len(judged):
        level = 0
    elif len(fails) * 2 <= len(judged):
        level = 2
    else:
        level = 1
    fb: list[Feedback] = []
    recipe = ev.task.numerics.recipe
    recipe_txt = ", ".join(f"{k}={v}" for k, v in recipe.items())
    groups: dict[str, list[CaseResult]] = {}
    undiagnosed: list[CaseResult] = []
    tails = _tail_seen(ev.cases, ev.task)
    for c in sorted(fails, key=lambda x: x.hidden):  # one line per cause; a public case quoted first
        n = c.numerics or {}
        if (c.mismatch or {}).get("kind") == "unwritten":
            key = _group_key(c, ev.task, tails)  # the same key as Correctness's line: one finding
        elif str(n.get("diagnosis", "")).startswith("skipped") or (not n.get("findings") and \
                _num_status(c, first=True) != "fail"):
            undiagnosed.append(c)
            continue
        else:
            f0 = (n.get("findings") or [{}])[0]
            conf = W.finding_confidence(f0)
            # a cause the diagnosis established has its own finding; the unconfirmed ones (suspected from the
            # error's shape, or none) share one, led by the first such case
            # (on a case Correctness fails too, that case's Correctness finding: the same symptom, stated once)
            key = (f"cause:{f0.get('id')}" if conf in ("reproduced", "matched-pattern") else
                   _group_key(c, ev.task, tails) if not c.correct else "numerics:unconfirmed")
        groups.setdefault(key, []).append(c)
    if undiagnosed and not groups:
        groups["numerics:undiagnosed"] = undiagnosed
        undiagnosed = []
    for i, (key, g) in enumerate(list(groups.items())[:3]):
        extra = undiagnosed if i == 0 else []
        fb.append(_numerics_feedback(key, g, extra, ev.task, recipe_txt, tails))
    if not fails and inconclusive:
        c = inconclusive[0]
        fb.append(Feedback("numerics", "info", f"{_shape(c)}: numerics inconclusive ({c.numerics.get('deciding_gate')})",
                           "a decisive pass", "none needed if other cases pass", _case_ev(c),
                           cases=[x.case for x in inconclusive], families=sorted({x.family for x in inconclusive}),
                           key="numerics:inconclusive"))
    summary = f"{len(judged) - len(fails)} of {len(judged)} cases inside the error budget"
    if finite:
        summary += f"; worst margin {W.num(worst_margin)} (error/bound, must be <= 1) on {worst_case.case}"
    if no_margin:
        summary += (f"; {len(no_margin)} failing case(s) have no finite margin (NaN, inf or unwritten elements): "
                    f"{W.case_list([c.case for c in no_margin], 2)}")
    bad_outs = sorted({o["name"] for c in judged for o in c.outputs
                       if (o.get("numerics") or {}).get("status") == "fail"})
    if len(ev.task.outputs) > 1:
        judged_outs = sorted({o["name"] for c in judged for o in c.outputs if o.get("numerics")})
        summary += (f"; outputs judged: {', '.join(judged_outs) or ev.task.outputs[0].name}"
                    + (f", failing: {', '.join(bad_outs)}" if bad_outs else ""))
    return CriterionResult(crit.id, crit.title, crit.weight, _verdict(level), level, summary, fb,
                           evidence={"worst_margin": worst_margin if not no_margin else float("inf"),
                                     "worst_finite_margin": worst_margin,
                                     "failed_cases": [c.case for c in fails], "failing_outputs": bad_outs})


def _num_status(c: CaseResult, first: bool = False) -> str | None:
    """A case's numerics status over every judged output (``first``: the first output's only)."""
    st = [(c.numerics or {}).get("status")]
    if not first:
        st += [(o.get("numerics") or {}).get("status") for o in c.outputs[1:]]
    for s in ("fail", "inconclusive", "pass"):
        if s in st:
            return s
    return None


def _num_margin(c: CaseResult) -> float | None:
    """The case's largest finite margin over its judged outputs (None: none finite)."""
    import math

    vals = [(c.numerics or {}).get("margin")] + [(o.get("numerics") or {}).get("margin") for o in c.outputs[1:]]
    xs = [float(v) for v in vals if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)]
    return max(xs) if xs else None


def _later_output_causes(c: CaseResult) -> list[tuple[str, str, str | None, str | None]]:
    """The top likely cause of each output after the first that fails its own oracle on case ``c`` (the judge
    diagnoses them on the first failing cases): (output, cause, confidence, action)."""
    out = []
    for o in c.outputs[1:]:
        n = o.get("numerics") or {}
        top = (n.get("findings") or [None])[0]
        if n.get("status") == "fail" and isinstance(top, dict) and top.get("cause"):
            out.append((str(o["name"]), str(top["cause"]), W.finding_confidence(top), top.get("action")))
    return out


def _numerics_feedback(key: str, g: list[CaseResult], undiagnosed: list[CaseResult], task: Task,
                       recipe_txt: str, tails: set[str]) -> Feedback:
    c = g[0]
    n = c.numerics or {}
    names = [x.case for x in g]
    evd = _case_ev(c)
    expected = f"every element within the error budget of the recipe ({recipe_txt})"
    if (c.mismatch or {}).get("kind") == "unwritten":
        m = c.mismatch or {}
        _, cause, sug = _unwritten_cause(c, task, m, tails)
        obs = (f"{_shape(c)}: the numerics cannot be judged where {m.get('output')} was never written "
               f"({W.share(m.get('count', 0), m.get('total', 0))}); {W.stated(cause, 'matched-pattern')}")
        if len(g) > 1:
            obs += f"; the same in {len(g) - 1} more case(s): {W.case_list(names[1:])}"
        fb = Feedback("numerics", "error", obs, expected, sug, evd, cause=cause, confidence="matched-pattern",
                      cases=names, families=sorted({x.family for x in g}), key=key)
        fb.brief = f"numerics fails on {len(g)} case(s) (unwritten elements)"
        return fb
    if _num_status(c, first=True) != "fail":  # only outputs after the first fail: each with its own causes
        outs = [(o["name"], (o.get("numerics") or {}).get("margin")) for o in c.outputs[1:]
                if (o.get("numerics") or {}).get("status") == "fail"]
        obs = (f"{_shape(c)}: output(s) " + ", ".join(f"{nm} (margin {W.num(mg)})" for nm, mg in outs)
               + " fail the numerical standard (error/bound must be <= 1); the first output passes")
        causes = _later_output_causes(c)
        if causes:
            obs += "; " + "; ".join(f"{nm}: {W.stated(cause, conf)}" for nm, cause, conf, _ in causes)
        everyone = [*g, *undiagnosed]
        if len(everyone) > 1:
            obs += f"; also failing in {len(everyone) - 1} more case(s): {W.case_list([x.case for x in everyone[1:]])}"
        action = next((a for _, _, conf, a in causes if a and conf != "suspected"), None)
        fb = Feedback("numerics", "error", obs, expected,
                      action or ("compute these outputs as the task statement does, in the recipe's precision; "
                                 f"reproduce on {c.case}"), evd, cases=[x.case for x in everyone],
                      families=sorted({x.family for x in everyone}), key=key,
                      cause=causes[0][1] if causes else None, confidence=causes[0][2] if causes else None)
        fb.brief = f"output(s) {', '.join(nm for nm, _ in outs)} fail the numerical standard"
        return fb
    w = (n.get("worst") or [{}])[0]
    finding = (n.get("findings") or [{}])[0]
    conf = W.finding_confidence(finding)
    margins = [m for m in (_num_margin(x) for x in g) if m is not None]
    mtxt = (f"margin {W.num(n.get('margin'))}" if len(g) == 1 or not margins
            else f"margin {W.num(min(margins))}" if W.num(min(margins)) == W.num(max(margins))
            else f"margin {W.num(min(margins))}..{W.num(max(margins))}")
    obs = f"{_shape(c)}: {mtxt} (error/bound; must be <= 1), deciding gate {n.get('deciding_gate')}"
    if w:
        obs += (f"; worst element {W.index(w.get('index'))}: got {W.num(w.get('got'))}, oracle "
                f"{W.num(w.get('expected'))}, bound {W.num(w.get('bound'))}")
    bad_outs = [o["name"] for o in c.outputs[1:] if (o.get("numerics") or {}).get("status") == "fail"]
    also_outs = ""
    if bad_outs:
        # a later output the first output's cause also reproduces says so in a word, not the cause again
        later = {nm: f"the same cause, {cf}" if cause == finding.get("cause") and cf else W.stated(cause, cf)
                 for nm, cause, cf, _ in _later_output_causes(c)}
        also_outs = "also failing: output(s) " + ", ".join(f"{nm} ({later[nm]})" if nm in later else nm
                                                          for nm in bad_outs)
        obs += f"; {also_outs}"
    cause = None
    if finding.get("cause") and conf:
        cause = str(finding["cause"])
        obs += f"; {W.stated(cause, conf)}"
    else:
        hint = _precision_hint(w)
        if "probably" in hint:
            figure, _, cause = hint.partition(", the precision of ")
            conf = "suspected"
            obs += f"{figure}; {W.stated('the precision of ' + cause, conf)}"
        else:
            obs += hint
    rel = W.relative_error(w.get("got"), w.get("expected"))
    if finding.get("action"):
        sug = finding["action"]
    elif conf == "suspected" and cause:
        sug = "keep accumulations in fp32 (PSUM) and follow the task's precision recipe"
    elif (rel is not None and rel >= 0.01) or not c.correct:
        sug = ("the values are wrong, not imprecise: check the formula against the task statement "
               f"(reproduce on {c.case}, seed {c.seed})")
    else:
        sug = "keep accumulations in fp32 (PSUM) and follow the task's precision recipe"
    rest = [x.case for x in g[1:]] + [x.case for x in undiagnosed]
    if len(g) > 1:
        lead = "the same cause in" if key.startswith("cause:") else "also failing, cause not confirmed, in"
        obs += f"; {lead} {len(g) - 1} more case(s): {W.case_list(names[1:])}"
    if undiagnosed:
        obs += (f"; {len(undiagnosed)} more failing case(s) not diagnosed: "
                f"{W.case_list([x.case for x in undiagnosed])}")
    evd.update({"margin": n.get("margin"), "gate": n.get("deciding_gate"), "worst": w, "finding": finding.get("id"),
                "also_cases": rest})
    fb = Feedback("numerics", "error", obs, expected, sug, evd, cause=cause, confidence=conf if cause else None,
                  cases=names + [x.case for x in undiagnosed],
                  families=sorted({x.family for x in [*g, *undiagnosed]}), key=key)
    fb.brief = (f"numerics fails on {len(g) + len(undiagnosed)} case(s), {mtxt}"
                + (f"; {W.stated(cause, conf)}" if cause and conf != "reproduced" else "")
                + (f"; {also_outs}" if also_outs else ""))
    return fb


# ------------------------------------------------------------------------------ hardware
def _partitions(target: str) -> int:
    """The target's partition count (hardware/data): utilisation fractions are reported as partitions."""
    from nkieval.hardware import get_target

    return int(get_target(target).partitions)
#: trace metrics whose defect other criteria state too (a literal port, a static rule): one finding
_HW_KEYS = {"partition_utilisation": "layout:partitions", "dma_median_bytes_per_partition": "dma:small"}


def score_hardware(ev: Evidence, crit: Criterion) -> CriterionResult:
    R = ev.rubric
    hw, sol = ev.hw, ev.hw_solution
    if hw is None:
        return CriterionResult(crit.id, crit.title, crit.weight, "fail", 0,
                               "no successful run whose trace could be inspected")
    minor, major = int(R.t("hardware", "penalty_minor")), int(R.t("hardware", "penalty_major"))
    case = ev.hw_case
    base_ev = _case_ev(case) if case else {}
    fb: list[Feedback] = []
    penalty = 0

    def flag(p: int, obs: str, exp: str, sug: str, **metric: Any) -> None:
        nonlocal penalty
        penalty += p
        m = str(metric.get("metric"))
        fb.append(Feedback("hardware", "error" if p >= major else "warning", obs, exp, sug, {**base_ev, **metric},
                           confidence="measured", key=_HW_KEYS.get(m, f"hardware:{m}"),
                           brief=obs.split(";")[0]))

    sol_txt = lambda v, fmt: f" (expert solution: {fmt.format(v)})" if v is not None else ""  # noqa: E731
    u = hw.partition_utilisation
    su = sol.partition_utilisation if sol else None
    P = _partitions(ev.target)
    if su is None or su >= 0.5:
        if u < float(R.t("hardware", "partition_utilisation_severe")):
            flag(major + 1, f"compute instructions drive {u * P:.1f} of {P} partitions on average{sol_txt(su and su * P, '{:.0f}')}",
                 "all 128 partitions busy: the parallel axis on partitions, [128, F] tiles",
                 "lay the data out as [128, n/128] (or tile rows 128 at a time) so each instruction uses every lane; "
                 "a 1-partition instruction costs as much as a 128-partition one",
                 metric="partition_utilisation", value=u, reference=su)
        elif u < float(R.t("hardware", "partition_utilisation_min")):
            flag(major, f"compute instructions drive {u * P:.1f} of {P} partitions on average{sol_txt(su and su * P, '{:.0f}')}",
                 "at least 64, ideally 128 partitions per instruction",
                 "put the parallel axis on partitions and tile 128 rows at a time", metric="partition_utilisation",
                 value=u, reference=su)
    fmin = float(R.t("hardware", "median_free_elements_min"))
    sf = sol.median_free_elements if sol else None
    if hw.compute_instructions and hw.median_free_elements < fmin and (sf is None or sf >= fmin):
        flag(minor, f"median compute instruction touches {hw.median_free_elements:.0f} elements per partition"
                    f"{sol_txt(sf, '{:.0f}')}",
             f">= {fmin:.0f} elements per partition to amortise the ~60-100 cycle fixed cost of an instruction",
             "widen the free dimension of each tile (hundreds to thousands of elements)",
             metric="median_free_elements", value=hw.median_free_elements, reference=sf)
    dmin = float(R.t("hardware", "dma_bytes_per_partition_min"))
    dsev = float(R.t("hardware", "dma_bytes_per_partition_severe"))
    sd = sol.dma_median_bytes_per_partition if sol else None
    d = hw.dma_median_bytes_per_partition
    if hw.dma_count and (sd is None or sd >= dmin):
        if d < dsev:
            flag(major, f"median DMA moves {d:.0f} bytes per partition{sol_txt(sd, '{:.0f}')}",
                 ">= 2 KiB per partition per DMA (below 512 B a DMA is dominated by its ~1.3 us fixed cost)",
                 "load and store whole tiles: one DMA for [128, F] with F*itemsize >= 2 KiB",
                 metric="dma_median_bytes_per_partition", value=d, reference=sd)
        elif d < dmin:
            flag(minor, f"median DMA moves {d:.0f} bytes per partition{sol_txt(sd, '{:.0f}')}",
                 ">= 2 KiB per partition per DMA", "make tiles wider along the free dimension",
                 metric="dma_median_bytes_per_partition", value=d, reference=sd)
    rf = hw.reload_factor
    srf = sol.reload_factor if sol else None
    rmax = float(R.t("hardware", "reload_factor_max"))
    limit = max(rmax, rmax * srf) if srf else rmax
    if rf is not None and rf > limit:
        flag(major, f"HBM reads are {rf:.2f}x the inputs' size{sol_txt(srf, '{:.2f}x')}",
             f"each input read about once (<= {limit:.2f}x)",
             "hoist loads out of inner loops and keep reused tiles in SBUF; order loops so the largest operand is "
             "streamed once", metric="reload_factor", value=rf, reference=srf)
    wf = hw.write_factor
    swf = sol.write_factor if sol else None
    wmax = float(R.t("hardware", "write_factor_max"))
    wlimit = max(wmax, wmax * swf) if swf else wmax
    if wf is not None and wf > wlimit:
        flag(major, f"HBM writes are {wf:.2f}x the outputs' size{sol_txt(swf, '{:.2f}x')}: intermediate results "
                    "make a round trip through HBM",
             f"each output written once (<= {wlimit:.2f}x) and intermediates kept in SBUF/PSUM",
             "fuse the follow-up step (bias, activation, normalisation) into the pass that produces the tile, "
             "before its single store", metric="write_factor", value=wf, reference=swf)
    contraction = bool(ev.task.perf.flops)  # a broadcast done with a matmul is not a contraction
    if contraction and sol and sol.matmul_count and not hw.matmul_count:
        flag(major, "no nc_matmul: the contraction runs on the Vector/Scalar engines",
             "contractions on the Tensor engine (nisa.nc_matmul), which provides >90% of the core's FLOPs",
             "put K on the partition axis of both operands and use nc_matmul with PSUM accumulation",
             metric="matmul_count", value=0, reference=sol.matmul_count)
    if contraction and sol and sol.matmul_accumulating and hw.matmul_count and not hw.matmul_accumulating:
        flag(minor, f"{hw.matmul_count} matmuls, none accumulating in PSUM "
                    f"(expert: {sol.matmul_accumulating} of {sol.matmul_count})",
             "partial products over K tiles accumulated in PSUM by consecutive nc_matmul calls",
             "issue the K-tile matmuls into the same PSUM tile instead of adding partial results on VectorE",
             metric="matmul_accumulating", value=0, reference=sol.matmul_accumulating)
    frac = hw.peak_sbuf_bytes / hw.sbuf_capacity if hw.sbuf_capacity else 0.0
    if frac > float(R.t("hardware", "sbuf_peak_fraction_max")):
        flag(minor, f"SBUF peak {hw.peak_sbuf_bytes} bytes per partition ({frac:.0%} of capacity)",
             "headroom in SBUF for double buffering", "release tiles earlier or tile the free dimension",
             metric="peak_sbuf_bytes", value=hw.peak_sbuf_bytes)
    ratio_max = float(R.t("hardware", "instruction_ratio_max"))
    if sol and sol.instructions and hw.instructions > ratio_max * sol.instructions:
        hot = ", ".join(f"{loc} ({n})" for loc, n in hw.hot_lines)
        flag(minor, f"{hw.instructions} instructions vs {sol.instructions} for the expert solution "
                    f"({hw.instructions / sol.instructions:.1f}x); busiest lines: {hot}",
             f"<= {ratio_max:.0f}x the expert's instruction count",
             "process whole tiles per instruction; fuse elementwise steps (activation with scale/bias)",
             metric="instructions", value=hw.instructions, reference=sol.instructions)
    if hw.warnings:
        w = hw.warnings[0]
        flag(minor, f"simulator warning: {w.get('message')}", "no behaviour undefined on hardware",
             "fix the construct at the location shown", metric="warnings", value=len(hw.warnings),
             location=w.get("location"))
    level = max(0, 4 - penalty)
    summary = (f"partitions {hw.partition_utilisation * P:.0f}/{P}, median DMA {hw.dma_median_bytes_per_partition:.0f} "
               f"B/partition, reload {hw.reload_factor or 0:.2f}x, {hw.instructions} instructions"
               + (f", {hw.matmul_count} matmuls ({hw.matmul_accumulating} accumulating)" if hw.matmul_count else ""))
    return CriterionResult(crit.id, crit.title, crit.weight, _verdict(level), level, summary, fb,
                           evidence={"case": case.case if case else None, **hw.to_dict()})


# ------------------------------------------------------------------------------ performance
def score_performance(ev: Evidence, crit: Criterion) -> CriterionResult:
    if ev.perf is None:
        return CriterionResult(crit.id, crit.title, crit.weight, "not-assessed", None,
                               f"not assessed: nkieval.perf {ev.perf_reason or 'produced no estimate'}")
    R = ev.rubric
    cand = ev.perf["candidate"]["_total_time"]
    base = (ev.perf.get("baseline") or {}).get("_total_time")
    sol = (ev.perf.get("solution") or {}).get("_total_time")
    evd = {**(_case_ev(ev.hw_case) if ev.hw_case else {}), "metric": "total_time", "value": cand,
           "baseline": base, "solution": sol, "target": ev.target}
    speedup = base / cand if base else None
    expert = sol / cand if sol else None
    if expert is not None and expert >= float(R.t("performance", "expert_fraction_for_4")):
        level = 4
    elif speedup is None:
        level = 3 if expert is None else 2
    elif speedup >= float(R.t("performance", "baseline_speedup_for_3")):
        level = 3
    elif speedup >= float(R.t("performance", "baseline_speedup_for_2")):
        level = 2
    elif speedup >= float(R.t("performance", "baseline_speedup_for_1")):
        level = 1
    else:
        level = 0
    txt = f"estimated {cand * 1e6:.2f} us on {ev.target}"
    if base:
        txt += f"; baseline {base * 1e6:.2f} us ({speedup:.2f}x)"
    if sol:
        txt += f"; expert {sol * 1e6:.2f} us ({expert:.0%} of expert speed)"
    summ = ev.perf["candidate"].get("summary") or {}
    spilled = int(summ.get("spill_save_bytes", 0) or 0) + int(summ.get("spill_reload_bytes", 0) or 0)
    if spilled:  # the kernel keeps more live in SBUF than it holds: its estimate carries the spill traffic
        txt += (f"; includes {spilled / 1e6:.2f} MB of SBUF spill traffic (peak "
                f"{summ.get('sbuf_peak_bytes_per_partition')} B/partition over the usable "
                f"{summ.get('sbuf_usable_bytes_per_partition')})")
    psum_over = float(summ.get("psum_peak_percent", 0) or 0) > 100.0
    if psum_over:  # a PSUM excess is not modelled: the estimate schedules it as if it fit
        txt += (f"; its PSUM peak {summ.get('psum_peak_bytes_per_partition')} B/partition exceeds the PSUM, which the "
                "model does not charge for (optimistic)")
    fb = []
    if level < 4:
        bottleneck = ev.perf["candidate"].get("bottleneck")
        if isinstance(bottleneck, dict):
            bottleneck = bottleneck.get("engine") or bottleneck.get("kind") or bottleneck.get("name") or \
                ", ".join(f"{k}={v}" for k, v in list(bottleneck.items())[:3])
        fb.append(Feedback("performance", "warning" if level >= 2 else "error", txt,
                           f">= {float(R.t('performance', 'expert_fraction_for_4')):.0%} of the expert solution's speed",
                           ("keep the live tiles within the usable SBUF (smaller blocks, or free tiles sooner) so "
                            "the compiler need not spill; " if spilled else "")
                           + ("keep at most the PSUM's banks of accumulators live at once; " if psum_over else "")
                           + (f"the model names {bottleneck} as the bottleneck; see Hardware appropriateness for the "
                              "specific defects" if bottleneck else "see Hardware appropriateness for the specific "
                              "defects"), evd))
    excess = _matmul_work_feedback(ev)
    if excess is not None:
        fb.append(excess)
    return CriterionResult(crit.id, crit.title, crit.weight, _verdict(level), level, txt, fb, evidence=evd)


def _matmul_work_feedback(ev: Evidence) -> Feedback | None:
    """A line when the traced case's Tensor-engine matmuls execute clearly more FLOPs than the task needs
    (``[perf] flops`` at that case's shape): redundant work, e.g. blocks a causal mask zeroes computed anyway.
    Transposes on the PE array are not counted (the trace's ``model_flops``). Clear means at least the rubric's
    ``matmul_work_factor_max`` times the task's count and, when the expert was reviewed alongside, that factor
    over the expert's own executed FLOPs too (a task whose count leaves out work every kernel does is not the
    candidate's fault). Tasks whose work is data-dependent (physics.DATA_DEPENDENT_TAGS) are not judged."""
    from nkieval.review.physics import DATA_DEPENDENT_TAGS

    if ev.task is None or ev.hw_case is None or ev.perf is None or DATA_DEPENDENT_TAGS & set(ev.task.tags):
        return None
    done = (ev.perf["candidate"].get("summary") or {}).get("model_flops")
    need = ev.task.model_flops(ev.hw_case.shape) if ev.task.perf.flops else None
    if not isinstance(done, int | float) or not need:
        return None
    factor = float(ev.rubric.t("performance", "matmul_work_factor_max"))
    expert = ((ev.perf.get("solution") or {}).get("summary") or {}).get("model_flops")
    ratio = done / need
    if ratio < factor or (isinstance(expert, int | float) and expert and done < factor * expert):
        return None
    shape = ", ".join(f"{k}={v}" for k, v in ev.hw_case.shape.items())
    sol = (f"; the expert executes {expert / need:.2f}x" if isinstance(expert, int | float) and expert else "")
    return Feedback("performance", "warning",
                    f"executes {ratio:.2f}x the matmul FLOPs the task needs ({done / 1e9:.3g} GFLOP on the Tensor "
                    f"engine against the task's {need / 1e9:.3g} GFLOP at {shape}{sol}): redundant matmul work",
                    f"matmul work close to the task's FLOP count (below {factor:g}x)",
                    "skip the tiles whose result is discarded or masked away (e.g. key blocks entirely above a causal "
                    "diagonal) and compute each product once",
                    {**_case_ev(ev.hw_case), "metric": "model_flops", "value": done, "reference": need},
                    confidence="measured", key="performance:matmul_work", brief=f"{ratio:.2f}x the task's matmul FLOPs")


# ------------------------------------------------------------------------------ migration
def score_migration(ev: Evidence, crit: Criterion, correctness: CriterionResult,
                    numerics: CriterionResult) -> CriterionResult:
    task = ev.task
    if task.cuda_file is None:
        return CriterionResult(crit.id, crit.title, crit.weight, "not-applicable", None,
                               "not applicable: the task has no CUDA source")
    R = ev.rubric
    start = 4 if ev.migration is not None else int(R.t("migration", "cap_without_static"))
    fb: list[Feedback] = []
    if correctness.level == 0:
        return CriterionResult(crit.id, crit.title, crit.weight, "fail", 0,
                               "the port does not run or does not implement the CUDA kernel's function")
    level = start
    failing = [(c, _tail_failure(c, ev.task, _partitions(ev.target))) for c in ev.cases if c.hidden and not c.correct]
    # (a mismatch on a shape smaller than a tile cannot tell; it counts when another case shows the tail)
    hidden_fail = [c for c, t in failing if t] + [c for c, t in failing if t is None and any(t for _, t in failing)]
    public_ok = all(c.correct for c in ev.cases if not c.hidden)
    bounds_broken = bool(hidden_fail and public_ok)
    num_only = [c for c in ev.cases if c.correct and c.numerics and _num_status(c) == "fail"]
    num_failed = any(c.numerics and _num_status(c) == "fail" for c in ev.cases)
    hw, sol = ev.hw, ev.hw_solution
    literal = bool(hw and sol and sol.partition_utilisation >= 0.5 and (
        hw.partition_utilisation < 0.25 or (sol.instructions and hw.instructions > 8 * sol.instructions)))
    # The static cross-check (MIG rules) names *which* CUDA clause a finding is about; the run-time
    # evidence says whether it actually broke. A finding the runs confirm is cited in the same
    # feedback line as its dynamic evidence (no double penalty); one the runs contradict is kept
    # as an info line without penalty; one the runs cannot test (math functions, atomics, tile
    # sizes) counts on its own.
    static = ev.migration or []
    cite = _static_citer(static)
    if bounds_broken:
        level -= 2
        fb.append(_bounds_feedback(ev, hidden_fail[0], cite("MIG002")))
    if num_only:
        level -= 1
        fb.append(_precision_feedback(numerics, cite("MIG003") or cite("MIG004")))
    if literal and hw and sol:
        level -= 2
        fb.append(_literal_feedback(ev, hw, sol, cite("MIG001")))
    confirmed = {"MIG002": bounds_broken, "MIG003": num_failed, "MIG004": num_failed, "MIG001": literal}
    all_correct = all(c.correct for c in ev.cases)
    # Run-time evidence able to contradict a finding: every (hidden, ragged) case correct for bounds;
    # a numerics pass on every case for accumulator/stability; a 128-partition trace for thread ports.
    contradicted = {"MIG002": all_correct, "MIG003": not num_failed and any(c.numerics for c in ev.cases),
                    "MIG004": not num_failed and any(c.numerics for c in ev.cases),
                    "MIG001": bool(hw and not literal)}
    level = _unconfirmed_static_feedback(static, confirmed, contradicted, fb, level)
    level = _fusion_feedback(ev, fb, level)
    level = _differential_feedback(ev, fb, level)
    level = max(0, min(level, start))
    defects = [f for f in fb if f.severity != "info"]
    note = "" if ev.migration is not None else \
        f" (static CUDA cross-check not assessed: {ev.migration_reason}; capped at {start})"
    return CriterionResult(crit.id, crit.title, crit.weight, _verdict(level), level,
                           ("contract kept and idiomatic" if not defects else f"{len(defects)} fidelity defect(s)")
                           + (f"; static cross-check: {len(static)} finding(s)" if ev.migration is not None else "")
                           + note, fb)


def _static_citer(static: list[dict[str, Any]]) -> Callable[[str], dict[str, Any]]:
    """``cite(rule)``: the evidence fields naming the static check's first finding of ``rule`` (its rule, line and
    message), or {} when the static check made none."""
    by_rule: dict[str, list[dict[str, Any]]] = {}
    for f in static:
        by_rule.setdefault(str(f.get("rule")), []).append(f)

    def cite(rule: str) -> dict[str, Any]:
        f = (by_rule.get(rule) or [None])[0]
        return {"static_rule": rule, "static_line": f.get("line"), "static_message": f.get("message")} if f else {}
    return cite


def _bounds_feedback(ev: Evidence, c: Any, st: dict[str, Any]) -> Feedback:
    """A hidden ragged shape fails while the public ones pass: the port dropped a CUDA bounds guard (``st``: the
    static check's MIG002 finding, cited when it made one)."""
    task = ev.task
    return Feedback("migration", "error",
                    f"{_shape(c)} fails ({(c.mismatch or {}).get('kind', c.status)}): the port drops a case the "
                    "CUDA kernel's bounds guard handles"
                    + (f"; static check {st['static_rule']} (candidate line {st['static_line']}) agrees" if st
                       else ""),
                    "every CUDA bounds guard (i < n) has a matching tail treatment in NKI",
                    "add the tail tile (min()-clamped slice) for the guarded dimension", {**_case_ev(c), **st},
                    cause="the port drops the CUDA bounds guard", confidence="matched-pattern",
                    key=_group_key(c, task, _tail_seen(ev.cases, task)), brief="the port drops a case the CUDA bounds guard handles"
                    + (f" (static check {st['static_rule']} line {st['static_line']} agrees)" if st else ""))


def _precision_feedback(numerics: CriterionResult, st: dict[str, Any]) -> Feedback:
    """Correct cases that fail the numerical standard: the port does not keep the CUDA kernel's precision (``st``:
    the static check's MIG003 or MIG004 finding, cited when it made one)."""
    return Feedback("migration", "error", f"numerical standard: {numerics.summary}"
                    + (f"; static check {st['static_rule']} line {st['static_line']}: {st['static_message']}"
                       if st else ""),
                    "the port keeps the CUDA kernel's precision (fp32 accumulation where CUDA accumulates in float)",
                    "match the CUDA accumulator and math functions", {**numerics.evidence, **st},
                    key=numerics.feedback[0].key if numerics.feedback else "",
                    brief="the port does not keep the CUDA kernel's precision"
                    + (f" (static check {st['static_rule']} line {st['static_line']})" if st else ""))


def _literal_feedback(ev: Evidence, hw: Any, sol: Any, st: dict[str, Any]) -> Feedback:
    """A trace of few partitions per instruction, or many times the expert's instructions: a literal
    thread-by-thread port (``st``: the static check's MIG001 finding, cited when it made one)."""
    parts = _partitions(ev.target)
    return Feedback("migration", "error",
                    f"literal port: {hw.partition_utilisation * parts:.0f}/{parts} partitions "
                    "per instruction and "
                    f"{hw.instructions} instructions ({hw.instructions / max(1, sol.instructions):.0f}x the expert)"
                    + (f"; static check {st['static_rule']} line {st['static_line']} agrees" if st else ""),
                    "the CUDA grid/block decomposition re-derived as 128-partition tiles, not transliterated",
                    "map CUDA threads to lanes of a [128, F] tile and blocks to tiles; drop the per-block loop",
                    {"metric": "partition_utilisation", "value": hw.partition_utilisation,
                     "instructions": hw.instructions, "reference_instructions": sol.instructions, **st},
                    cause="a literal thread-by-thread port", confidence="matched-pattern",
                    key="layout:partitions", brief="a literal port of the CUDA threads"
                    + (f" (static check {st['static_rule']} line {st['static_line']} agrees)" if st else ""))


def _unconfirmed_static_feedback(static: list[dict[str, Any]], confirmed: dict[str, bool],
                                 contradicted: dict[str, bool], fb: list[Feedback], level: int) -> int:
    """The static findings the runs did not confirm, into ``fb``; the level after them. One the runs contradict is
    kept in one info line for all of them, without penalty; one they cannot test counts on its own (an error -1,
    at most two; a warning caps the level at 3)."""
    untestable_errs = untestable_warns = 0
    refuted: list[tuple[str, dict[str, Any]]] = []
    for f in static:
        rule, sev = str(f.get("rule")), f.get("severity")
        if sev not in ("error", "warning") or confirmed.get(rule):
            continue
        loc = {"rule": rule, "line": f.get("line"), "location": f"candidate.py:{f.get('line')}"}
        if contradicted.get(rule):
            refuted.append((f"static check {rule} line {f.get('line')}: {f.get('message')}", loc))
            continue
        if sev == "error" and untestable_errs < 2:
            untestable_errs += 1
            level -= 1
        elif sev == "warning" and not untestable_warns:
            untestable_warns += 1
            level = min(level, 3)
        else:
            continue
        fb.append(Feedback("migration", sev, f"{rule} line {f.get('line')}: {f.get('message')}",
                           "the CUDA contract kept", f.get("suggestion") or "see the rule", loc))
    if refuted:  # one line for every static finding the runs contradict
        fb.append(Feedback("migration", "info", "; ".join(t for t, _ in refuted),
                           "a static finding the run-time evidence confirms",
                           "none: the runs on every shape contradict "
                           + ("it" if len(refuted) == 1 else "them") + " (kept for the record)",
                           {**refuted[0][1], "contradicted_by": "run-time evidence",
                            "rules": [x["rule"] for _, x in refuted]}, key="migration:contradicted"))
    return level


def _sig3(x: Any) -> str:
    """A number to 3 significant digits (as every figure of a finding), anything else as it is."""
    return f"{x:.3g}" if isinstance(x, int | float) and not isinstance(x, bool) else repr(x)


def _fusion_feedback(ev: Evidence, fb: list[Feedback], level: int) -> int:
    """Fusion lost: the CUDA source computes in one kernel launch, and the port writes more to HBM than its
    outputs (intermediates making a round trip), past the hardware criterion's write-factor limit. A
    migration finding of one level: the port changed the CUDA kernel's dataflow, whatever its values."""
    hw, sol = ev.hw, ev.hw_solution
    cuda = ev.task.cuda_file
    if hw is None or hw.write_factor is None or cuda is None:
        return level
    launches = cuda.read_text().count("<<<")
    wmax = float(ev.rubric.t("hardware", "write_factor_max"))
    limit = max(wmax, wmax * sol.write_factor) if sol is not None and sol.write_factor else wmax
    if launches != 1 or hw.write_factor <= limit:
        return level
    fb.append(Feedback("migration", "error",
                       f"fusion lost: the CUDA source computes in one kernel launch, the port writes "
                       f"{hw.write_factor:.2f}x its outputs' size to HBM (intermediate results make a round trip "
                       "through HBM)",
                       "the CUDA kernel's fusion kept: intermediates stay in SBUF/PSUM, each output written once",
                       "keep the intermediate tile in SBUF and apply the next step before the single store",
                       {"metric": "write_factor", "value": hw.write_factor, "limit": limit, "cuda_launches": launches},
                       key="migration:fusion"))
    return level - 1


def _differential_feedback(ev: Evidence, fb: list[Feedback], level: int) -> int:
    """The port against the CUDA source run on the same inputs (stages.differential): a cause confirmed by
    re-running the CUDA kernel with the port's constant (or a mutation: formula, order, indexing, precision)
    costs two levels; a disagreement whose cause is not
    identified is reported per output (one level when no other migration defect explains it and the port
    also fails the reference there); the GPU-vs-Trainium envelope is stated for every output."""
    d = ev.differential
    if d is None:
        if ev.differential_reason:
            fb.append(Feedback("migration", "info", f"differential check against the CUDA source not assessed: "
                               f"{ev.differential_reason}", "the port and the CUDA kernel run on the same inputs",
                               "none", {}))
        return level
    for race in d.get("cuda_races", []):  # about the CUDA source, not the port: no level is charged
        fb.append(Feedback("migration", "info", f"the CUDA source has a data race: {race}; its result depends "
                           "on the order in which the GPU runs the block's threads, so the differential check "
                           "compares against one of the possible results",
                           "the CUDA kernel synchronises (__syncthreads) between a shared-memory write and "
                           "another thread's read", "none for the port; the CUDA source needs a barrier there",
                           {"race": race}, key="migration:cuda-race"))
    if d.get("causes"):
        level -= 2
    for c in d.get("causes", []):
        constant = c.get("kind", "constant") == "constant"
        fb.append(Feedback("migration", "error",
                           f"semantic infidelity{'' if constant else ' (' + c['kind'] + ')'}: {c['summary']}",
                           "the port computes the CUDA kernel's formula with its constants",
                           f"use {c['cuda_text']} as the CUDA source does" if constant else
                           f"compute what kernel.cu:{c['cuda_line']} computes (`{c['cuda_text']}`), not the variant "
                           f"{c.get('mutation')}", {
                               "cuda_location": f"kernel.cu:{c['cuda_line']}" if c.get("cuda_line") else None,
                               "port_location": f"candidate.py:{c['port_line']}" if c.get("port_line") else None,
                               "case": c["case"], "kind": c.get("kind", "constant"),
                               "reproduced": c["reproduced"]}))
    unexplained = [o for o in d.get("outputs", [])
                   if o["verdict"] == "disagree" and o["output"] in d.get("unexplained", [])]
    if unexplained:  # one finding for every output whose disagreement has no identified cause
        sev = "error" if any(not c.correct for c in ev.cases) and not any(f.severity != "info" for f in fb) \
            else "warning"
        level -= 1 if sev == "error" else 0
        names = ", ".join(o["output"] for o in unexplained)
        several = len(unexplained) > 1
        fb.append(Feedback("migration", sev,
                           f"output{'s' if several else ''} {names} disagree{'' if several else 's'} with the CUDA "
                           f"kernel run on the same inputs ({'; '.join(_disagreement(o, several) for o in unexplained)})"
                           "; cause not identified",
                           "every output agrees with the CUDA kernel within the task's tolerance",
                           f"compare the port's formula for th{'ese outputs' if several else 'is output'} with the "
                           "CUDA source line by line",
                           {"output": unexplained[0]["output"], **(unexplained[0].get("worst") or {}),
                            "outputs": [o["output"] for o in unexplained]}))
    for o in d.get("outputs", []):
        if o in unexplained or o.get("envelope") is None:
            continue
        build = d.get("gpu_build") or {}
        fb.append(Feedback("migration", "info",
                           f"output {o['output']}: GPU (CUDA source{', fast-math' if build.get('fast_math') else ''}) "
                           f"vs this port, observed max difference {_observed(o['observed'])}, expected envelope "
                           f"{o['envelope']:.3g} (GPU error + port error against "
                           f"{_envelope_pivot(d)}, {o['cases']} case(s){_envelope_sides(o)}"
                           f"{'; ' + o['envelope_scope'] if o.get('envelope_scope') else ''}); verdict {o['verdict']}"
                           f"{'; ' + o['envelope_cause'] if o.get('envelope_cause') else ''}",
                           "GPU and Trainium results within the envelope of their own errors",
                           "none", {"output": o["output"], "observed": o["observed"], "envelope": o["envelope"],
                                    "envelope_all": o.get("envelope_all"), "envelope_bands": o.get("envelope_bands"),
                                    "envelope_causes": o.get("envelope_causes"), "verdict": o["verdict"]}))
    return level


def _disagreement(o: dict[str, Any], named: bool) -> str:
    """One output's worst disagreement with the CUDA kernel (its name first when several are listed)."""
    w = o.get("worst") or {}
    text = (f"{o['output'] + ' on ' if named else ''}{w.get('case')}: {o['tol_ratio']:.3g}x the tolerance at "
            f"{w.get('index')}, GPU {_sig3(w.get('gpu'))} vs port {_sig3(w.get('port'))}")
    u = o.get("unwritten")
    if u:
        text += (f", the port leaves {u['count']} of {u['total']} elements unwritten (NaN) on {u['case']}, from index "
                 f"{u['first_index']}, where the CUDA kernel writes values")
    return text


def _observed(diff: float) -> str:
    """The observed GPU-vs-port difference; 0 is said as what it is (a ratio to the envelope is undefined)."""
    return "0 (bitwise equal)" if diff == 0 else f"{diff:.3g}"


def _envelope_sides(o: dict[str, Any]) -> str:
    """Which side the envelope comes from: the GPU kernel's own error and the port's (stages.differential)."""
    g, p = o.get("envelope_gpu_error"), o.get("envelope_port_error")
    return "" if g is None or p is None else f": the GPU kernel's own error up to {g:.3g}, the port's up to {p:.3g}"


def _envelope_pivot(d: dict[str, Any]) -> str:
    """What the envelope's errors are measured against (stages.differential)."""
    n, of = d.get("envelope_exact_cases") or 0, d.get("envelope_cases") or 0
    if not n:
        return "the fp64 reference"
    where = "" if n >= of else f", on the {n} of {of} cases it ran on"
    return f"the fp64 reference or the CUDA recipe in near-exact arithmetic, whichever bounds tighter{where}"


# ------------------------------------------------------------------------------ code quality
#: static rules that name the source of a trace defect another criterion measures: one finding for both
_CODE_KEYS = {"NKI016": "layout:partitions", "NKI014": "dma:small"}


def score_code_quality(ev: Evidence, crit: Criterion) -> CriterionResult:
    if ev.analysis is None:
        return CriterionResult(crit.id, crit.title, crit.weight, "not-assessed", None,
                               f"not assessed: nkieval.analysis {ev.analysis_reason}")
    errs = [f for f in ev.analysis if f.get("severity") == "error"]
    warns = [f for f in ev.analysis if f.get("severity") == "warning"]
    if any(f.get("category") == "integrity" for f in errs):
        level = 0
    elif errs:
        level = 1
    elif len(warns) > 2:
        level = 2
    elif warns:
        level = 3
    else:
        level = 4
    by_rule: dict[str, list[dict[str, Any]]] = {}
    for f in errs + warns:  # one line per rule: the first finding quoted, the other lines listed
        by_rule.setdefault(str(f["rule"]), []).append(f)
    fb = []
    for rule, fs in list(by_rule.items())[:6]:
        f = fs[0]
        more = (f"; the same at line(s) {', '.join(str(x['line']) for x in fs[1:])}" if len(fs) > 1 else "")
        line = Feedback("code_quality", f["severity"], f"candidate.py:{f['line']} [{rule}] {f['message']}{more}",
                        "no findings above info", f.get("suggestion") or "see the rule's documentation",
                        {"rule": rule, "location": f"candidate.py:{f['line']}",
                         "lines": [x["line"] for x in fs]},
                        cause=f"static rule {rule}", confidence="matched-pattern", key=_CODE_KEYS.get(rule, ""))
        line.brief = f"[{rule}] at line(s) {', '.join(str(x['line']) for x in fs)}"
        fb.append(line)
    return CriterionResult(crit.id, crit.title, crit.weight, _verdict(level), level,
                           f"{len(errs)} error(s), {len(warns)} warning(s) from static analysis", fb)


# ------------------------------------------------------------------------------ the reward
def total_score(crits: list[CriterionResult], verdict: str, message: str = "") -> float:
    """The review's score (0-100): the weighted mean level of the assessed criteria, except that an
    integrity verdict (``verdict.INTEGRITY_VERDICTS``) and ``harness-error`` score exactly 0.0 and
    every criterion's level is set to 0 (its reward contribution), with the verdict as the cap's
    reason; the feedback lines are kept. This is the property the RL reward rests on:
    ``tests/review/test_reward_semantics.py`` checks that no integrity verdict can score above 0.
    """
    from nkieval.review.verdict import INTEGRITY_VERDICTS

    if verdict in INTEGRITY_VERDICTS or verdict == "harness-error":
        for c in crits:
            if c.level is not None and c.level > 0:
                c.uncapped_level = c.level if c.uncapped_level is None else c.uncapped_level
                c.level = 0
                c.verdict = "fail"
                c.capped_by = f"verdict {verdict}" + (f": {message}" if message else "")
        return 0.0
    assessed = [c for c in crits if c.level is not None]
    wsum = sum(c.weight for c in assessed)
    score = 100.0 * sum(c.weight * c.level / 4 for c in assessed if c.level is not None) / wsum if wsum else 0.0
    return max(0.0, min(100.0, score))


SCORERS: dict[str, Callable[..., CriterionResult]] = {
    "correctness": score_correctness,
    "numerics": score_numerics,
    "hardware": score_hardware,
    "performance": score_performance,
    "code_quality": score_code_quality,
}


def score_all(ev: Evidence) -> list[CriterionResult]:
    """Score every criterion of the rubric, then apply its gates in order."""
    results: dict[str, CriterionResult] = {}
    for crit in ev.rubric.criteria:
        if crit.id == "migration":
            continue
        if crit.id not in SCORERS:
            raise KeyError(f"rubric criterion {crit.id!r} has no scoring function")
        results[crit.id] = SCORERS[crit.id](ev, crit)
    for crit in ev.rubric.criteria:
        if crit.id == "migration":
            results["migration"] = score_migration(ev, crit, results["correctness"], results["numerics"])
    hw, perf = results.get("hardware"), results.get("performance")
    if hw is not None and perf is not None and not hw.feedback:  # no trace defect to point to
        for f in perf.feedback:
            f.suggestion = f.suggestion.replace("; see Hardware appropriateness for the specific defects", "") \
                .replace("see Hardware appropriateness for the specific defects",
                         "compare the engine timeline with the expert's (nkieval profile --trace)")
    for gate in ev.rubric.gates:
        src = results.get(gate.criterion)
        if src is None or src.level is None or src.level >= gate.below:
            continue
        for cid, cap in gate.cap.items():
            r = results.get(cid)
            if r is not None and r.level is not None and r.level > cap:
                r.uncapped_level = r.level if r.uncapped_level is None else r.uncapped_level
                r.level = cap
                r.verdict = _verdict(cap)
                r.capped_by = f"{gate.criterion} < {gate.below}: {gate.reason}"
    return [results[c.id] for c in ev.rubric.criteria]
