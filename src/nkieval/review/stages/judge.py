"""Stage 4, judge: per case, the reference outputs (never shown to the candidate), correctness and the
numerics verdict; the diagnosis of the first failing cases; then the cases in report form.

Everything here is single-case work or pure bookkeeping: which thread runs it, and when, is
:mod:`nkieval.review.stages.overlap`'s business.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from nkieval.review import adapters
from nkieval.review.cache import CASE_CACHE, MAX_KEPT_ELEMENTS
from nkieval.review.compare import allowance_floor, compare_each
from nkieval.review.model import CaseResult
from nkieval.review.sandbox import CaseRun
from nkieval.review.stages.load import Loaded
from nkieval.review.stages.timing import Timings, timed
from nkieval.review.verdict import JudgeError
from nkieval.tasks import Task, load_reference, load_reference_variants
from nkieval.tasks.inputs import is_random
from nkieval.tasks.loader import checked_reference_outputs

#: Failing cases per review whose numerics failure is diagnosed (likely causes named); the
#: rubric's feedback cites at most this many (scoring.score_numerics).
DIAGNOSED_FAILURES = 3


@dataclass(frozen=True)
class JudgeKit:
    """What judging a case needs besides its run: the task's reference code and the numerics."""

    loaded: Loaded
    reference: Callable[..., Any]
    oracle: Callable[..., Any] | None
    variants: list[Any]
    numerics_ok: bool
    numerics_reason: str | None
    #: float64 oracles of the outputs after the first (reference.py's ``oracle_<output name>``)
    output_oracles: Mapping[str, Callable[..., Any]] | None = None
    #: a brief review (``review(..., brief=True)``): passing outputs get lean numerics verdicts
    #: (``PreparedCheck.check(lean=True)``: the same status, margin, deciding gate and gates, the report-only
    #: statistics not gathered)
    brief: bool = False


@dataclass(frozen=True)
class JudgedCase:
    """One case judged: its report record, the numerics verdict object (None: none), the output it
    judged and why there is no verdict."""

    result: CaseResult
    verdict: Any
    actual: np.ndarray | None
    reason: str | None
    #: outputs after the first that fail their own oracle: (output index, prepared check, verdict, output),
    #: diagnosed by :func:`collect` for the first failing cases
    others: tuple[tuple[int, Any, Any, np.ndarray], ...] = ()
    #: the prepared check that gave ``verdict``, which its diagnosis uses (the case cache may have dropped it
    #: meanwhile: :class:`~nkieval.review.cache.CaseCache`)
    prepared: Any = None

    @property
    def failing(self) -> bool:
        return self.verdict is not None and self.verdict.status == "fail"


def prepare_judge(loaded: Loaded, brief: bool = False) -> JudgeKit:
    """The task's reference code (cached per content) and the numerics' availability (timed as ``setup_s``).
    ``brief``: :attr:`JudgeKit.brief`."""
    ref_fn, oracle, variants = task_code(loaded.task, loaded.fingerprint)
    num_ok, num_reason = adapters.numerics_available()
    return JudgeKit(loaded, ref_fn, oracle, variants, num_ok, num_reason,
                    output_oracles_of(loaded.task, oracle), brief)


def needs_prefetch(kit: JudgeKit, i: int) -> bool:
    """On a cold cache: the case's reference or prepared check is still to be built."""
    d = kit.loaded.data[i]
    return d.reference is None or (kit.numerics_ok and not d.prepared_done)


def _reference(kit: JudgeKit, i: int) -> list[np.ndarray]:
    return kit.loaded.data[i].get_reference(lambda: checked_reference_outputs(
        kit.loaded.task, kit.reference, kit.loaded.data[i].inputs, dict(kit.loaded.cases[i].dims)))


def _prepared(kit: JudgeKit, i: int, ref: list[np.ndarray]) -> tuple[Any, str | None]:
    lo = kit.loaded
    c, data, key = lo.cases[i], lo.data[i], lo.keys[i]
    keep = key is not None and ref[0].size <= MAX_KEPT_ELEMENTS
    return data.get_prepared(lambda: adapters.numerics_prepare(
        lo.task, data.inputs, c.family, is_random(c.family), kit.oracle, c.dims, keep_blocks=keep,
        variants=kit.variants))


def _grew(kit: JudgeKit, i: int) -> None:
    key = kit.loaded.keys[i]
    if key is not None:
        CASE_CACHE.update(key, kit.loaded.data[i])  # its size grew by the reference and the prepared check


def prefetch_case(kit: JudgeKit, i: int, timings: Timings) -> None:
    """The case's reference outputs and prepared numerics check (candidate-independent; cached)."""
    with timed(timings, "prefetch_s"):
        ref = _reference(kit, i)
        if kit.numerics_ok:
            _prepared(kit, i, ref)
            # the later outputs' checks right after the first's: an oracle that computes every output at once
            # can then serve them all from one evaluation per (perturbed) input
            for j, spec in enumerate(kit.loaded.task.outputs[1:], start=1):
                fn = (kit.output_oracles or {}).get(spec.name)
                if fn is not None and j < len(ref):
                    _other_prepared(kit, i, j, fn, ref[j].size)
        _grew(kit, i)


def judge_case(kit: JudgeKit, i: int, run: CaseRun, timings: Timings) -> JudgedCase:
    """Reference, correctness and numerics verdict of one case (harness side; the candidate never sees them)."""
    c = kit.loaded.cases[i]
    with timed(timings, "reference_and_compare_s"):
        cr = CaseResult(c.label, c.dims, c.hidden, c.family, c.seed, run.status, error=dict(run.error),
                        instructions=run.n_instructions, sim_s=run.sim_s)
        if run.warnings:
            cr.error["warnings"] = run.warnings
        if run.status != "ok":
            cr.correct = False
            return JudgedCase(cr, None, None, None)
        task = kit.loaded.task
        ref = _reference(kit, i)
        try:
            cr.mismatch, cr.outputs = compare_each(run.outputs, ref, task.outputs, task.rtol, task.atol,
                                                   run.unwritten, _allowance_floors(kit, i, ref))
        except Exception as e:  # outputs the sandbox read back are checked arrays: a raise is the judge's
            raise JudgeError("compare", f"comparing the outputs raised {type(e).__name__}: {e}") from e
        cr.correct = cr.mismatch is None
    verdict, reason, pc = None, None, None
    others: tuple[tuple[int, Any, Any, np.ndarray], ...] = ()
    if kit.numerics_ok and (cr.mismatch is None or cr.mismatch["kind"] in ("mismatch", "unwritten", "nonfinite")):
        with timed(timings, "numerics_s"):
            pc, reason = _prepared(kit, i, ref)
            if pc is not None:
                verdict, reason = adapters.numerics_check(pc, run.outputs[0], lean=_lean(kit, cr.mismatch))
                if verdict is not None:
                    # the report's form, here in the worker (a diagnosis replaces it)
                    cr.numerics = adapters.numerics_dict(verdict)
            others = _judge_other_outputs(kit, i, run, cr)
    with timed(timings, "reference_and_compare_s"):
        _grew(kit, i)
    return JudgedCase(cr, verdict, run.outputs[0] if verdict is not None else None, reason, others, pc)


def _lean(kit: JudgeKit, mismatch: dict[str, Any] | None) -> bool:
    """Whether an output gets a lean numerics verdict: in a brief review, where Correctness found it within
    tolerance. A lean check pays off only for an output that passes (any other is judged in full after the
    lean stream gives up, wasting the blocks it streamed), and an output Correctness rejects rarely does;
    either way the verdict's outcome is the full one's (``PreparedCheck.check``)."""
    return kit.brief and mismatch is None


def _allowance_floors(kit: JudgeKit, i: int, ref: list[np.ndarray]) -> tuple[float | None, ...] | None:
    """Each reference output's least tolerance allowance (:func:`~nkieval.review.compare.allowance_floor`), kept
    with the case's reference where the case is kept across reviews (a function of the reference and the task's
    tolerances, both fixed by the case's key); None for a case not kept (computing it would cost what it saves)."""
    if kit.loaded.keys[i] is None:
        return None
    task = kit.loaded.task
    key = f"compare.allowance_floor/{task.rtol!r}/{task.atol!r}"
    return kit.loaded.data[i].get_derived(key, lambda: ([], tuple(allowance_floor(r, task.rtol, task.atol)
                                                                  for r in ref)))[1]


def _judge_other_outputs(kit: JudgeKit, i: int, run: CaseRun, cr: CaseResult
                         ) -> tuple[tuple[int, Any, Any, np.ndarray], ...]:
    """The numerics verdict of each output after the first that has its own oracle; the others say why they
    are judged by Correctness only. Returns the failing ones, for :func:`collect` to diagnose."""
    task = kit.loaded.task
    failing: list[tuple[int, Any, Any, np.ndarray]] = []
    for j, rec in enumerate(cr.outputs):
        if j == 0:
            if cr.numerics is not None:
                rec["numerics"] = _brief(cr.numerics)
            continue
        spec = task.outputs[j]
        fn = (kit.output_oracles or {}).get(spec.name)
        if fn is None:
            rec["numerics_note"] = ("an integer output: exact, judged by Correctness" if "int" in spec.dtype else
                                    "the task gives no float64 oracle for this output: judged by Correctness only")
            continue
        if (rec.get("mismatch") or {}).get("kind") in ("shape", "dtype"):
            continue
        pc, _ = _other_prepared(kit, i, j, fn, run.outputs[j].size)
        if pc is None:
            continue
        v, _ = adapters.numerics_check(pc, run.outputs[j], lean=_lean(kit, rec.get("mismatch")))
        if v is not None:
            rec["numerics"] = _brief(adapters.numerics_dict(v))
            if v.status == "fail":
                failing.append((j, pc, v, run.outputs[j]))
    return tuple(failing)


def _other_prepared(kit: JudgeKit, i: int, j: int, fn: Callable[..., Any], size: int) -> tuple[Any, str | None]:
    """The prepared numerics check of output ``j`` (after the first) on case ``i``, against its own oracle ``fn``."""
    task, lo = kit.loaded.task, kit.loaded
    c, data, spec = lo.cases[i], lo.data[i], task.outputs[j]
    keep = lo.keys[i] is not None and size <= MAX_KEPT_ELEMENTS
    vs, recipe = output_variants(kit.variants, spec.name), output_recipe(task, j)
    return data.get_extra_prepared(spec.name, lambda: adapters.numerics_prepare(
        task, data.inputs, c.family, is_random(c.family), fn, c.dims, keep_blocks=keep, variants=vs, recipe=recipe))


def output_variants(variants: list[Any], name: str) -> list[Any]:
    """The task's known wrong formulas as they change the later output ``name`` (a variant's
    ``outputs[name]``): the diagnosis of that output tries the same task-specific causes as the first's."""
    return [replace(v, fn=v.outputs[name], outputs={}) for v in variants if name in getattr(v, "outputs", {})]


def output_recipe(task: Task, j: int) -> dict[str, Any]:
    """The recipe output ``j`` is judged under: the task's, rounded to that output's own dtype (fp8_quantize's
    fp32 ``scale`` is not bounded by the fp8 rounding of ``q``)."""
    recipe = dict(task.numerics.recipe)
    dtype = task.outputs[j].dtype
    if "int" not in dtype:
        recipe["output"] = dtype
    return recipe


def _brief(n: dict[str, Any]) -> dict[str, Any]:
    """An output's numerics verdict in a few fields (the first output's full record is ``CaseResult.numerics``)."""
    return {k: n.get(k) for k in ("status", "margin", "deciding_gate")}


def diagnose_case(kit: JudgeKit, i: int, judged: JudgedCase, hint: str | None, timings: Timings
                  ) -> tuple[dict[str, Any] | None, str | None]:
    """Likely causes of case ``i``'s numerics failure, in report form: (record, None), or (None, why) when the
    diagnosis gave no verdict (the case then has no numerics; see :meth:`DiagnosisPlan.finished`)."""
    with timed(timings, "diagnosis_s"):
        dv, why = adapters.numerics_diagnose(judged.prepared, judged.actual, judged.verdict, hint)
        return (None, why) if dv is None else (adapters.numerics_dict(dv), None)


@dataclass
class DiagnosisPlan:
    """Which failing cases are diagnosed, and when. Naming likely causes of a numerics failure costs more
    than the verdict; the feedback cites the first :data:`DIAGNOSED_FAILURES` failing cases (in case order)
    only, so only those are diagnosed, as soon as it is known which cases they are (every earlier case
    judged). The first failing case (the lead) gets the full search; the others try the lead's top cause
    first (``hint``) and get the full search only if it does not reproduce their output decisively: one
    kernel's flaw usually explains all its failing cases, and that test is a fraction of the full search.

    Pure bookkeeping: the caller holds its lock around :meth:`due` and :meth:`finished`."""

    pending: int | None = None  # the lead, while its diagnosis runs
    done: bool = False
    hint: str | None = None

    def due(self, judged: Mapping[int, JudgedCase], diagnosed: Container[int], n_cases: int) -> list[int]:
        """The cases whose diagnosis can start now, in order (the caller starts them and records them)."""
        out: list[int] = []
        n = 0
        for j in range(n_cases):
            if j not in judged:
                return out
            if judged[j].failing:
                n += 1
                if j not in diagnosed:
                    if not self.done:
                        if self.pending is not None:
                            return out  # the others wait for the lead's cause
                        self.pending = j
                    out.append(j)
                if n >= DIAGNOSED_FAILURES:
                    return out
        return out

    def current_hint(self) -> str | None:
        return self.hint if self.done else None

    def finished(self, i: int, record: dict[str, Any] | None) -> None:
        """Case ``i``'s diagnosis ended with ``record`` (None: no verdict)."""
        if self.pending == i:
            self.pending = None
            if record is not None:
                self.done = True
                top = (record.get("findings") or [None])[0]
                self.hint = top.get("id") if isinstance(top, dict) else None


def without_numerics(judged: JudgedCase, why: str | None) -> JudgedCase:
    """A case whose diagnosis gave no verdict: as a one-step check that did, no numerics for it (the next
    failing case takes its place among the diagnosed ones)."""
    return replace(judged, verdict=None, actual=None, reason=why)


@dataclass(frozen=True)
class Judgement:
    """Stage 4's output: the cases in report form, and why numerics is not assessed (None: it is)."""

    cases: list[CaseResult]
    numerics_reason: str | None


def collect(kit: JudgeKit, judged: Mapping[int, JudgedCase],
            diagnosis: Callable[[int], dict[str, Any] | None]) -> Judgement:
    """The cases in report form: each failing case among the first :data:`DIAGNOSED_FAILURES` gets its
    diagnosis (``diagnosis(i)``, which re-raises a diagnosis that raised), later ones say it was skipped."""
    results: list[CaseResult] = []
    n_failing = 0
    num_reason = kit.numerics_reason
    for i in range(len(kit.loaded.cases)):
        jc = judged[i]
        cr = jc.result
        if jc.verdict is None:
            cr.numerics = None  # none, or a diagnosis raised (reported as the reason)
            if cr.outputs:
                cr.outputs[0].pop("numerics", None)
        elif jc.verdict.status == "fail":
            n_failing += 1
            if n_failing <= DIAGNOSED_FAILURES:
                cr.numerics = diagnosis(i)
            else:
                assert cr.numerics is not None
                cr.numerics["diagnosis"] = (f"skipped: the likely causes are named for the first "
                                            f"{DIAGNOSED_FAILURES} failing cases only")
        num_reason = num_reason or jc.reason
        results.append(cr)
    _diagnose_other_outputs(kit, [judged[i] for i in range(len(kit.loaded.cases))])
    return Judgement(results, None if kit.numerics_ok else num_reason)


def _diagnose_other_outputs(kit: JudgeKit, judged: list[JudgedCase]) -> None:
    """Likely causes for the outputs after the first that fail their own oracle, on the first
    :data:`DIAGNOSED_FAILURES` cases where one does (in case order); each later case tries the cause found for
    the same output first. The causes go into the output's record (``outputs[j]["numerics"]["findings"]``)."""
    hints: dict[int, str] = {}
    n = 0
    for jc in judged:
        if not jc.others:
            continue
        n += 1
        if n > DIAGNOSED_FAILURES:
            return
        for j, pc, verdict, actual in jc.others:
            dv, _why = adapters.numerics_diagnose(pc, actual, verdict, hints.get(j))
            if dv is None:
                continue
            found = [{k: f.get(k) for k in ("id", "cause", "evidence", "action")}
                     for f in adapters.numerics_dict(dv).get("findings") or [] if isinstance(f, dict)][:3]
            jc.result.outputs[j].setdefault("numerics", {})["findings"] = found
            if found and found[0].get("id"):
                hints.setdefault(j, str(found[0]["id"]))


# What a review loads from the task's reference.py (the reference, the oracle, the known wrong
# formulas), kept per content fingerprint when the case cache is on: reference.py is trusted,
# its functions pure, and running it again per review only costs time.
_TASK_CODE: dict[str, tuple[Callable[..., Any], Callable[..., Any] | None, list[Any]]] = {}
_TASK_CODE_LOCK = threading.Lock()


def task_code(task: Task, fingerprint: str | None) -> tuple[Callable[..., Any], Callable[..., Any] | None, list[Any]]:
    if fingerprint is not None:
        with _TASK_CODE_LOCK:
            hit = _TASK_CODE.get(fingerprint)
        if hit is not None:
            return hit
    code = (load_reference(task), oracle_of(task), load_reference_variants(task))
    if fingerprint is not None:
        with _TASK_CODE_LOCK:
            _TASK_CODE[fingerprint] = code
    return code


def output_oracles_of(task: Task, oracle: Callable[..., Any] | None = None) -> dict[str, Callable[..., Any]]:
    """reference.py's float64 oracles of the outputs after the first: ``oracle_<output name>``."""
    import runpy

    if len(task.outputs) < 2 or task.numerics.op != "reference":
        return {}
    # the run of reference.py the first output's oracle comes from, when it is given: the oracles then share
    # that module's state (an oracle imported from elsewhere has another module's globals: run the file)
    ns = getattr(oracle, "__globals__", None)
    if not ns or ns.get("__file__") != str(task.reference_file):
        ns = runpy.run_path(str(task.reference_file))
    return {o.name: ns[f"oracle_{o.name}"] for o in task.outputs[1:] if callable(ns.get(f"oracle_{o.name}"))}


def oracle_of(task: Task) -> Callable[..., Any] | None:
    import runpy

    ns = runpy.run_path(str(task.reference_file))
    fn = ns.get("oracle")
    return fn if callable(fn) else None
