"""The review pipeline: task + candidate source → :class:`~nkieval.review.model.Review`.

Order of work: integrity scan → sandboxed run of every (shape, input family) case → reference
outputs in the harness (never shown to the candidate) → correctness per case → numerics
verdict per case → trace evidence on the largest shape, next to the baseline's and the expert
solution's on the same shape → performance estimates → static analysis → rubric scoring and
gates. Any candidate fault ends up as a case status and a feedback line; only a malformed task
or rubric raises.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nkieval.review import adapters, npzio
from nkieval.review.cache import CASE_CACHE, MAX_KEPT_ELEMENTS, CaseData, new_case_data, task_fingerprint
from nkieval.review.compare import compare_outputs
from nkieval.review.evidence import HardwareEvidence, trace_evidence
from nkieval.review.integrity import scan
from nkieval.review.model import CaseResult, Review
from nkieval.review.rubric import DEFAULT_RUBRIC, Rubric, load_rubric
from nkieval.review.sandbox import CaseJob, CaseRun, Isolation, SandboxLimits, run_candidate
from nkieval.review.scoring import Evidence, score_all
from nkieval.tasks import Task, load_reference, load_reference_variants, load_task, reference_outputs
from nkieval.tasks.inputs import derive_seed, generate_inputs, is_random

#: Failing cases per review whose numerics failure is diagnosed (likely causes named); the
#: rubric's feedback cites at most this many (scoring.score_numerics).
DIAGNOSED_FAILURES = 3


@dataclass(frozen=True)
class _Case:
    label: str
    dims: dict[str, int]
    hidden: bool
    family: str
    seed: int
    want_trace: bool


def _evidence_key(task: Task, c: _Case) -> tuple[int, bool]:
    """Which case's trace is the hardware evidence: the most compulsory HBM traffic, public first."""
    return sum(task.compulsory_bytes(c.dims)), not c.hidden


def _cases(task: Task, base_seed: int, families: tuple[str, ...], shapes: str) -> list[_Case]:
    out = []
    for s in task.shapes:
        if shapes == "public" and s.hidden:
            continue
        for fam in families:
            out.append(_Case(f"{s.label}/{fam}", dict(s.dims), s.hidden, fam, derive_seed(base_seed, s.label, fam),
                             want_trace=False))
    if out:
        # Only one trace is ever used (the largest shape's, first family): the child serialises and
        # ships no other, which on large traces costs more than the simulation itself.
        best = max(out, key=lambda c: _evidence_key(task, c))
        out[out.index(best)] = _Case(best.label, best.dims, best.hidden, best.family, best.seed, want_trace=True)
    return out


def _inputs(task: Task, case: _Case) -> dict[str, np.ndarray]:
    specs = [(t.name, t.concrete(case.dims), t.dtype, t.family) for t in task.inputs]
    return generate_inputs(specs, case.family, case.seed, case.label)


def _case_data(task: Task, c: _Case, fingerprint: str | None) -> tuple[CaseData, tuple[Any, ...] | None]:
    """The case's candidate-independent data: from the cross-review cache when ``fingerprint`` is set."""
    key = None
    if fingerprint is not None:
        key = (fingerprint, c.label, tuple(sorted(c.dims.items())), c.family, c.seed)
        hit = CASE_CACHE.get(key)
        if hit is not None:
            return hit, key
    inp = _inputs(task, c)
    data = new_case_data(inp, npzio.dumps(inp))
    if key is not None:
        CASE_CACHE.put(key, data)
    return data, key


def _load_source(candidate: str | Path) -> tuple[str, str]:
    """(source text, display name): a path to a .py file, or the source itself."""
    if isinstance(candidate, Path) or (isinstance(candidate, str) and "\n" not in candidate
                                        and candidate.endswith(".py") and Path(candidate).is_file()):
        p = Path(candidate)
        return p.read_text(), p.name
    return str(candidate), "candidate.py"


# Reference kernels (baseline, expert) are trusted and deterministic in their trace: their
# evidence and estimates per (file content, target, shape) are computed once per process.
_REF_CACHE: dict[tuple[str, str, str, tuple[tuple[str, int], ...]], tuple[HardwareEvidence | None,
                                                                           dict[str, Any] | None]] = {}
_REF_LOCK = threading.Lock()


def _reference_kernel_evidence(task: Task, path: Path | None, target: str, dims: dict[str, int],
                               isolation: Isolation) -> tuple[HardwareEvidence | None, dict[str, Any] | None]:
    if path is None:
        return None, None
    src = path.read_text()
    key = (hashlib.sha256(src.encode()).hexdigest(), task.id, target, tuple(sorted(dims.items())))
    with _REF_LOCK:
        if key in _REF_CACHE:
            return _REF_CACHE[key]
    case = _Case("ref", dims, False, task.families[0], 0, True)
    runs = run_candidate(src, task.kernel, [CaseJob("ref", _inputs(task, case), dict(task.params), len(task.outputs))],
                         target=target, limits=_limits(task), isolation=isolation)
    hw = perf = None
    if runs[0].status == "ok" and runs[0].trace_json:
        hw, perf, _ = _trace_facts(task, runs[0], target, dims)
    with _REF_LOCK:
        _REF_CACHE[key] = (hw, perf)
    return hw, perf


def _trace_facts(task: Task, run: CaseRun, target: str, dims: dict[str, int]
                 ) -> tuple[HardwareEvidence, dict[str, Any] | None, str | None]:
    """Hardware evidence and the performance estimate from one trace, parsed once."""
    from nkieval.hardware import get_target
    from nkieval.sim.trace import Trace

    trace = Trace.from_json(run.trace_json or "")
    rd, wr = task.compulsory_bytes(dims)
    hw = trace_evidence(trace, target=get_target(target), compulsory_read=rd, compulsory_write=wr)
    perf, why = adapters.perf_estimate(trace, target)
    return hw, perf, why


def _limits(task: Task) -> SandboxLimits:
    return SandboxLimits(timeout_s=task.limits.timeout_s, memory_mb=task.limits.memory_mb,
                         max_instructions=task.limits.max_instructions)


def review(task: Task | str | Path, candidate: str | Path, *, target: str | None = None, seed: int | None = None,
           rubric: Rubric | str = DEFAULT_RUBRIC, families: tuple[str, ...] | None = None, shapes: str = "all",
           isolation: Isolation = "forkserver", limits: SandboxLimits | None = None,
           progress: Callable[[str], None] | None = None, compare_references: bool = True,
           cache: bool | None = None) -> Review:
    """Review one candidate kernel (a path or its source text) against a task.

    ``seed`` None draws a fresh secret seed (recorded in the report); ``families`` restricts the
    input families (default: the task's); ``shapes="public"`` skips hidden shapes (for authors'
    quick checks, never for scoring); ``compare_references=False`` skips running the baseline and
    expert solution (no relative hardware/performance evidence).

    ``cache`` (default: on when ``seed`` is given) keeps each case's inputs, reference outputs
    and prepared numerics check in the harness process for the next review of the same task,
    shape, family and seed (:mod:`nkieval.review.cache`); the report is the same either way.
    """
    t0 = time.perf_counter()
    timings: dict[str, float] = {}
    task = task if isinstance(task, Task) else load_task(task)
    rub = rubric if isinstance(rubric, Rubric) else load_rubric(rubric)
    target = target or task.default_target
    source, name = _load_source(candidate)
    base_seed = secrets.randbits(63) if seed is None else int(seed)
    fams = tuple(families) if families else task.families
    cases = _cases(task, base_seed, fams, shapes)
    integrity = scan(source)
    use_cache = (seed is not None) if cache is None else bool(cache)

    # Static analysis needs only the source: it runs in a harness thread while the sandbox simulates.
    analysis_box: dict[str, Any] = {}

    def run_analysis() -> None:
        ta = time.perf_counter()
        try:
            analysis_box["nki"] = adapters.nki_findings(source, target)
            analysis_box["mig"] = ((None, None) if task.cuda_file is None else
                                   adapters.migration_findings(task.cuda_file.read_text(), source, target=target))
        except BaseException as e:  # re-raised in the caller's thread
            analysis_box["error"] = e
        analysis_box["s"] = time.perf_counter() - ta

    analysis_thread = threading.Thread(target=run_analysis, name="nkieval-analysis", daemon=True)
    analysis_thread.start()

    fingerprint = task_fingerprint(task) if use_cache else None
    data_keys = [_case_data(task, c, fingerprint) for c in cases]
    inputs = [d.inputs for d, _ in data_keys]
    jobs = [CaseJob(c.label, d.inputs, dict(task.params), len(task.outputs), c.want_trace, npz=d.npz)
            for c, (d, _) in zip(cases, data_keys)]
    timings["inputs_s"] = time.perf_counter() - t0
    ref_fn = load_reference(task)
    oracle = _oracle(task)
    variants = load_reference_variants(task)
    num_ok, num_reason = adapters.numerics_available()
    index = {c.label: i for i, c in enumerate(cases)}
    judged: dict[int, tuple[CaseResult, float, float, str | None]] = {}
    # Naming likely causes (numerics diagnosis) costs more than the verdict; feedback cites the
    # first failing cases only, so only those are diagnosed (cases are judged in order).
    diagnose_left = [DIAGNOSED_FAILURES]
    trace_futures: dict[int, Any] = {}

    def judge(i: int, run: CaseRun) -> tuple[CaseResult, float, float, str | None]:
        """Reference, correctness and numerics of one case (harness side; the candidate never sees them)."""
        c, inp = cases[i], inputs[i]
        ta = time.perf_counter()
        cr = CaseResult(c.label, c.dims, c.hidden, c.family, c.seed, run.status, error=dict(run.error),
                        instructions=run.n_instructions, sim_s=run.sim_s)
        if run.warnings:
            cr.error["warnings"] = run.warnings
        reason = None
        t_num = 0.0
        if run.status == "ok":
            data, key = data_keys[i]
            ref = data.get_reference(lambda: reference_outputs(task, ref_fn, inp))
            cr.mismatch = compare_outputs(run.outputs, ref, task.outputs, task.rtol, task.atol, run.unwritten)
            cr.correct = cr.mismatch is None
            if num_ok and (cr.mismatch is None or cr.mismatch["kind"] in ("mismatch", "unwritten", "nonfinite")):
                tn = time.perf_counter()
                keep = key is not None and ref[0].size <= MAX_KEPT_ELEMENTS
                pc, reason = data.get_prepared(lambda: adapters.numerics_prepare(
                    task, inp, c.family, is_random(c.family), oracle, c.dims, keep_blocks=keep, variants=variants))
                if pc is not None:
                    diag = diagnose_left[0] > 0
                    cr.numerics, reason = adapters.numerics_judge(pc, run.outputs[0], diagnose=diag)
                    if cr.numerics is not None and cr.numerics.get("status") == "fail":
                        if diag:
                            diagnose_left[0] -= 1
                        else:
                            cr.numerics["diagnosis"] = (f"skipped: the likely causes are named for the first "
                                                        f"{DIAGNOSED_FAILURES} failing cases only")
                t_num = time.perf_counter() - tn
            if key is not None:
                CASE_CACHE.update(key, data)  # its size grew by the reference and the prepared check
        else:
            cr.correct = False
        return cr, t_num, time.perf_counter() - ta - t_num, reason

    t1 = time.perf_counter()
    if integrity:
        runs = [CaseRun(c.label, "not-run", error={"message": "not run: the integrity scan rejected the source"})
                for c in cases]
    else:
        # Judge each case as soon as its result arrives, in a harness thread, while the sandboxed
        # child simulates the next one: the two are independent, so running them one after the
        # other only adds up their times.
        from concurrent.futures import Future, ThreadPoolExecutor

        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nkieval-judge")
        futures: dict[int, Future[tuple[CaseResult, float, float, str | None]]] = {}

        def on_case(r: CaseRun) -> None:
            i = index.get(r.label)
            if i is not None and i not in futures:
                futures[i] = pool.submit(judge, i, r)
                if cases[i].want_trace and r.status == "ok" and r.trace_json and i not in trace_futures:
                    # the evidence trace: parse it and estimate while the child runs the next case
                    trace_futures[i] = pool.submit(_trace_facts, task, r, target, cases[i].dims)
            if progress:
                progress(r.label)

        try:
            runs = run_candidate(source, task.kernel, jobs, target=target, limits=limits or _limits(task),
                                 isolation=isolation, on_case=on_case)
            for i, f in futures.items():
                judged[i] = f.result()
        finally:
            pool.shutdown(wait=True)
    timings["sandbox_s"] = time.perf_counter() - t1
    timings["simulation_s"] = sum(r.sim_s for r in runs)

    t2 = time.perf_counter()
    results: list[CaseResult] = []
    t_num = t_ref = 0.0
    for i, run in enumerate(runs):
        cr, tn, tr, reason = judged[i] if i in judged else judge(i, run)
        t_num += tn
        t_ref += tr
        num_reason = num_reason or reason
        results.append(cr)
    timings["numerics_s"] = t_num
    timings["reference_and_compare_s"] = t_ref
    timings["judge_after_sandbox_s"] = time.perf_counter() - t2

    t3 = time.perf_counter()
    traced = [(c, r) for c, r in zip(cases, runs) if r.status == "ok" and r.trace_json]
    if not traced:
        # The case chosen for evidence did not run to completion: trace the largest case that did.
        ok = [(c, inp) for c, inp, r in zip(cases, inputs, runs) if r.status == "ok"]
        if ok:
            c, inp = max(ok, key=lambda ci: _evidence_key(task, ci[0]))
            again = run_candidate(source, task.kernel, [CaseJob(c.label, inp, dict(task.params), len(task.outputs))],
                                  target=target, limits=limits or _limits(task), isolation=isolation)
            if again[0].status == "ok" and again[0].trace_json:
                traced = [(c, again[0])]
    hw = hw_sol = hw_base = None
    hw_case = None
    perf: dict[str, Any] | None = None
    perf_reason: str | None = None
    if traced:
        c, r = max(traced, key=lambda cr: _evidence_key(task, cr[0]))
        hw_case = next(x for x in results if x.case == c.label)
        i_tr = index.get(c.label)
        if i_tr in trace_futures and runs[i_tr] is r:
            hw, perf_c, perf_reason = trace_futures[i_tr].result()
        else:
            hw, perf_c, perf_reason = _trace_facts(task, r, target, c.dims)
        if compare_references:
            hw_sol, perf_s = _reference_kernel_evidence(task, task.solution_file, target, c.dims, isolation)
            hw_base, perf_b = _reference_kernel_evidence(task, task.baseline_file, target, c.dims, isolation)
        else:
            perf_s = perf_b = None
        if perf_c is not None:
            perf = {"candidate": perf_c, "baseline": perf_b, "solution": perf_s}
    timings["evidence_s"] = time.perf_counter() - t3

    t4 = time.perf_counter()
    analysis_thread.join()
    if "error" in analysis_box:
        raise analysis_box["error"]
    analysis, analysis_reason = analysis_box["nki"]
    migration, migration_reason = analysis_box["mig"]
    timings["analysis_s"] = analysis_box["s"]
    timings["analysis_wait_s"] = time.perf_counter() - t4

    ev = Evidence(task=task, rubric=rub, target=target, cases=results, integrity=integrity, hw=hw, hw_case=hw_case,
                  hw_solution=hw_sol, hw_baseline=hw_base, perf=perf, perf_reason=perf_reason,
                  numerics_reason=None if num_ok else num_reason, analysis=analysis, analysis_reason=analysis_reason,
                  migration=migration, migration_reason=migration_reason)
    crits = score_all(ev)
    assessed = [c for c in crits if c.level is not None]
    wsum = sum(c.weight for c in assessed)
    score = 100.0 * sum(c.weight * c.level / 4 for c in assessed) / wsum if wsum else 0.0
    not_assessed = [f"{c.id}: {c.summary}" for c in crits if c.verdict == "not-assessed"]
    timings["total_s"] = time.perf_counter() - t0
    return Review(
        task=task.id, task_title=task.title, candidate=name, candidate_sha256=hashlib.sha256(source.encode()).hexdigest(),
        target=target, rubric=rub.id, rubric_version=rub.version, verdict=_overall(crits, results, integrity),
        score=score, score_complete=not not_assessed, criteria=crits, cases=results, seed=base_seed,
        hardware={"candidate": hw.to_dict() if hw else None, "solution": hw_sol.to_dict() if hw_sol else None,
                  "baseline": hw_base.to_dict() if hw_base else None,
                  "case": hw_case.case if hw_case else None},
        performance=perf or {"not_assessed": perf_reason or "no successful run"},
        not_assessed=not_assessed, timings=timings, versions=_versions())


def _oracle(task: Task) -> Callable[..., Any] | None:
    import runpy

    ns = runpy.run_path(str(task.reference_file))
    fn = ns.get("oracle")
    return fn if callable(fn) else None


def _overall(crits: list[Any], cases: list[CaseResult], integrity: list[Any]) -> str:
    """One word for scripts: pass, fail, or the specific reason nothing could be judged."""
    if integrity or any(c.status == "bad-output" for c in cases):
        return "hack-suspected"
    statuses = {c.status for c in cases}
    if "ok" not in statuses:
        for s in ("timeout", "memory-limit", "crash", "rule-violation", "import-error", "exception",
                  "instruction-limit", "infra-error"):
            if s in statuses:
                return s
    by = {c.id: c for c in crits}
    corr = by["correctness"].level or 0
    num = by.get("numerics")
    if corr >= 3 and (num is None or num.level is None or num.level >= 3):
        return "pass"
    return "fail"


def _versions() -> dict[str, str]:
    import platform
    from importlib.metadata import PackageNotFoundError, version

    try:
        v = version("nkieval")
    except PackageNotFoundError:
        v = "unknown"
    return {"nkieval": v, "python": platform.python_version(), "numpy": np.__version__}
