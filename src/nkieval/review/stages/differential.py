"""Differential port checking: the task's CUDA source (run by :mod:`nkieval.cuda`) and the port on the same
inputs, a verdict for every output, and disagreements attributed.

* **Same inputs.** The review's own cases (the smallest first, within a time budget for the executor) and
  edge inputs derived from the CUDA source (rows of tiny variance where the kernel normalises by a
  square root; large magnitudes where it exponentiates), on which the port is run once more in the sandbox.
* **A verdict for every output**: agree when ``|port - cuda| <= atol + rtol * |cuda|`` everywhere (the
  task's tolerance), else disagree, with the case and the worst element.
* **Causes are re-evaluated, never guessed.** A literal constant of the CUDA source (or a float parameter)
  that the port does not use, paired with a constant the port uses and the CUDA source does not, is a
  hypothesis; it is stated only when re-running the CUDA kernel with the port's constant reproduces the
  port's outputs (the disagreement shrinks at least tenfold to within tolerance). Otherwise the
  disagreement is reported with "cause not identified".
* **Beyond constants** (:mod:`.mutation_causes`): when no constant explains a disagreement, mutations of
  the CUDA source (an operator, a dropped term or statement, a reordering, an index off by one, a bf16
  rounding) are the hypotheses, stated only when the mutated kernel reproduces the port's outputs on two
  different inputs.
* **GPU vs Trainium numerics from the real code**: per output, the observed port-vs-GPU difference next
  to the envelope ``|GPU_i - X_i| + |port_i - X_i|`` per element (the GPU kernel's own error in its order
  and precision, fast-math if built with it, plus the port's), on the review's cases, where X is the CUDA
  kernel's recipe in near-exact arithmetic (:mod:`nkieval.cuda.exact`) or the task's reference, whichever
  bounds tighter (both bound the difference); summarised per magnitude band and stated over the magnitudes
  where the two sides differ (:func:`_envelope`).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from nkieval.review.cache import CaseData, task_fingerprint
from nkieval.review.sandbox import CaseJob, CaseRun, run_candidate
from nkieval.review.stages.kept_runs import inputs_digest, kept_cuda_run, store_for
from nkieval.review.stages.load import Loaded
from nkieval.review.stages.mutation_causes import mutation_causes
from nkieval.review.stages.port_lines import find_port_line
from nkieval.sim.program.codec import DEFAULT_MAX_INSTRUCTIONS

#: executor work per review for the review's own cases and their exact pivots (the edge case always runs), in
#: seconds of CPU at the calibration: the budget is :func:`nkieval.cuda.work_units` of it, and every decision is
#: made in work units (:func:`nkieval.cuda.executor_work`, counted by the interpreter), so the cases a review
#: covers, and its report, are the same on any machine under any load
EXECUTOR_BUDGET_S = 6.0
#: the least work a case's run (or an exact pivot) is given however little of the budget is left (calibrated
#: seconds, as above)
MIN_RUN_S = 0.5
#: cases larger than this (elements of inputs and outputs) are not run on the executor
MAX_ELEMENTS = 400_000
MAX_HYPOTHESES = 16
#: the port's instruction records read for its matmul contractions (:func:`_shared_chains`): a replay stops at the
#: default instruction budget, so a traced case has no more
MAX_TRACE_RECORDS = DEFAULT_MAX_INSTRUCTIONS
#: a difference (in units of the task's tolerance) below this is rounding noise: never attributed
MIN_ATTRIBUTED = 2e-3


@dataclass(frozen=True)
class _Lit:
    value: float
    text: str
    line: int
    start: int = -1
    end: int = -1


def differential(loaded: Loaded, runs: list[CaseRun], judged: list[Any] | None = None
                 ) -> tuple[dict[str, Any] | None, str | None]:
    """The differential record for the migration criterion, or (None, why not). ``judged``: the cases in
    report form (a numerics failure there makes the attribution look at outputs that agree within
    tolerance too: a systematic deviation the numerics standard caught)."""
    record, why, search = differential_before_causes(loaded, runs, judged)
    return (search() if search is not None else record), why


#: the record's ``cause_search`` while the cause search has not run (``differential_before_causes``)
CAUSES_PENDING = "pending"


def differential_before_causes(loaded: Loaded, runs: list[CaseRun], judged: list[Any] | None = None,
                               explain: bool = True) -> tuple[dict[str, Any] | None, str | None,
                                                              Callable[[], dict[str, Any]] | None]:
    """As :func:`differential`, without its cause search (the constants, then the mutations of the CUDA source:
    the part that can take seconds): (record, why not, search). ``search`` is None when there is nothing to
    search; else the record has no causes yet (``cause_search`` is :data:`CAUSES_PENDING`, every disagreeing
    output unexplained) and ``search()`` runs it and returns the complete record, the one :func:`differential`
    returns. A caller that knows no cause can change what it needs may leave it pending (the brief review).
    ``explain`` False leaves out the envelope (its near-exact CUDA runs and bands) and what an agreeing output's
    difference comes from (:func:`_explain_differences`: report text only, and its port-side replays are the
    candidate's own work), as the brief review does."""
    task = loaded.task
    if task.cuda_file is None:
        return None, "the task has no CUDA source", None
    try:
        from nkieval.cuda import CudaError
    except ImportError as e:  # pragma: no cover - part of the package
        return None, f"the CUDA executor is unavailable: {e}", None
    cuda_src = task.cuda_file.read_text()
    outputs = [s.name for s in task.outputs]
    per_out: dict[str, dict[str, Any]] = {o: {"output": o, "verdict": "agree", "cases": 0, "worst": None,
                                              "tol_ratio": 0.0, "max_abs_diff": 0.0, "envelope": None,
                                              "envelope_all": None, "envelope_bands": [], "envelope_scope": None,
                                              "observed": 0.0} for o in outputs}
    try:
        gpu_runs = _case_runs(loaded, runs, cuda_src, per_out)
    except CudaError as e:
        return None, f"the CUDA source could not be run: {e}", None
    runs_gpu, ran, options, races = gpu_runs.runs, gpu_runs.ran, gpu_runs.options, gpu_runs.races
    if not runs_gpu:
        return None, "no case both ran and fits the executor's budget", None
    # (report text only: an info line of Migration fidelity, which no level reads; left out with the rest of the
    # explaining)
    exact_cases = _fold_envelope(loaded, runs, cuda_src, gpu_runs, per_out) if explain else 0
    edge = _edge_runs(loaded, cuda_src, runs_gpu[0][1], _epsilon_dims(task, [r[1] for r in runs_gpu]))
    for label, _d, _i, gpu, port in edge:
        _compare(task, label, gpu, port, None, per_out)
    # (after the edge inputs' verdicts: an output that disagrees on one has its cause search, not an ablation)
    if explain:
        _explain_differences(loaded, cuda_src, [(loaded.cases[i], loaded.data[i], r) for i, r in zip(ran, runs_gpu)],
                             per_out, {loaded.cases[i].label: runs[i].n_instructions for i in ran})
    disagreeing = [o for o in outputs if per_out[o]["verdict"] == "disagree"]
    numerics_failed = any(getattr(c, "numerics", None) and c.numerics.get("status") == "fail" for c in judged or [])

    def with_causes(causes: list[dict[str, Any]], searched: str) -> dict[str, Any]:
        explained = {o for c in causes for o in c["outputs"]}
        for o in disagreeing:
            per_out[o]["cause"] = next((c["summary"] for c in causes if o in c["outputs"]),
                                       "cause not identified" if searched == "done" else "cause not searched")
        return {"outputs": [dict(per_out[o]) for o in outputs], "disagree": disagreeing,
                "unexplained": [o for o in disagreeing if o not in explained], "causes": causes, **record,
                "cause_search": searched}

    def search() -> dict[str, Any]:
        causes = _attribute(loaded, cuda_src, [*edge, *runs_gpu], disagreeing or outputs)
        explained = {o for c in causes for o in c["outputs"]}
        if [o for o in disagreeing if o not in explained] and not causes:
            # (no constant explains it: a formula, order, indexing or precision mutation of the CUDA source may)
            causes = mutation_causes(task, cuda_src, [*runs_gpu, *edge], disagreeing,
                                     locate=lambda m: find_port_line(task, cuda_src, _port_trace(runs), m,
                                                                      loaded.source), keep=loaded.use_cache,
                                     also=_disagreeing_edges(task, edge, disagreeing))
        return with_causes(causes, "done")

    record: dict[str, Any] = {
        "cases": [r[0] for r in runs_gpu] + [r[0] for r in edge],
        "gpu_build": None if options is None else {"fast_math": options.fast_math, "ftz": options.ftz,
                                                    "fmad": options.fmad},
        "cuda_races": races,
        # (the envelope's pivot on that many of the review's cases: the CUDA recipe in near-exact arithmetic;
        # on the others, the task's reference)
        "envelope_exact_cases": exact_cases,
        "envelope_cases": len(runs_gpu),
    }
    if disagreeing or numerics_failed:
        return with_causes([], CAUSES_PENDING), None, search
    return with_causes([], "done"), None, None


class _CaseRuns:
    """The CUDA kernel's runs on the review's cases (:func:`_case_runs`): per case run, smallest first, ``(label,
    dims, inputs, GPU outputs, port outputs)``, the indices of those cases, the build options of the last run,
    the executor's shared-memory race warnings (a finding about the CUDA source itself: its output depends on
    thread order), and the executor work spent of the review's budget."""

    __slots__ = ("budget", "options", "races", "ran", "runs", "spent")

    def __init__(self, budget: int) -> None:
        self.runs: list[tuple[str, dict[str, int], dict[str, np.ndarray], list[np.ndarray], list[np.ndarray]]] = []
        self.ran: list[int] = []
        self.options: Any = None
        self.races: list[str] = []
        self.budget, self.spent = budget, 0


def _case_runs(loaded: Loaded, runs: list[CaseRun], cuda_src: str, per_out: dict[str, dict[str, Any]]) -> _CaseRuns:
    """The CUDA kernel on each case the port ran, smallest first, within the review's executor budget (a case over
    :data:`MAX_ELEMENTS` is not run; the first run past the work left ends them), each compared with the port's
    outputs into ``per_out`` as it comes. A source the executor cannot run raises ``CudaError``."""
    from nkieval.cuda import ExecutorTimeout, run_task_cuda, work_units

    task = loaded.task
    out = _CaseRuns(work_units(EXECUTOR_BUDGET_S))
    for i in sorted(range(len(loaded.cases)), key=lambda i: _elements(task, loaded.cases[i].dims)):
        c, run = loaded.cases[i], runs[i]
        if run.status != "ok" or _elements(task, c.dims) > MAX_ELEMENTS or out.spent > out.budget:
            continue
        inputs = loaded.data[i].inputs
        limit = max(work_units(MIN_RUN_S), out.budget - out.spent)
        try:
            gpu, (out.options, took, warnings) = _gpu_outputs(
                loaded.data[i], cuda_src, "case",
                lambda inp=inputs, dims=c.dims, limit=limit: run_task_cuda(  # type: ignore[misc]
                    task, inp, dims, work_limit=limit), limit)
        except ExecutorTimeout:
            break
        if took > limit:
            break  # a run that finished past the work left (between two checks): as a timeout would
        out.spent += took  # (a kept run counts its work as the first review's run did, so every review runs alike)
        out.races.extend(w for w in warnings if w.startswith("shared-memory race") and w not in out.races)
        _compare(task, c.label, gpu, run.outputs, None, per_out, getattr(run, "unwritten", None))
        out.runs.append((c.label, c.dims, inputs, gpu, run.outputs))
        out.ran.append(i)
    return out


def _fold_envelope(loaded: Loaded, runs: list[CaseRun], cuda_src: str, gpu_runs: _CaseRuns,
                   per_out: dict[str, dict[str, Any]]) -> int:
    """The expected GPU-vs-Trainium difference per output, into ``per_out``, after the verdicts: the exact-arithmetic
    runs take the executor work the verdicts left (the smallest case's always runs); the envelope and the observed
    difference are folded over the cases that have one, or over every case against the reference when none does.
    Returns how many cases had an exact run."""
    task = loaded.task
    exact_src = _exact_source(cuda_src, tuple(_shared_chains(loaded, cuda_src, runs)))
    spent, exact_cases = gpu_runs.spent, 0
    folds = []
    for n, (i, (_label, dims, inputs, gpu, port)) in enumerate(zip(gpu_runs.ran, gpu_runs.runs)):
        left = gpu_runs.budget - spent if n else gpu_runs.budget  # (the smallest case's pivot always runs)
        pivot = _exact_outputs(loaded.data[i], task, inputs, dims, exact_src, left)
        if pivot is not None:
            spent += pivot[1]
            exact_cases += 1
        folds.append((gpu, port, [x for x in (loaded.data[i].reference, None if pivot is None else pivot[0])
                                  if x is not None], pivot is not None))
    for gpu, port, pivots, exact in folds:
        if pivots and (exact or not exact_cases):
            _envelope(gpu, port, pivots, per_out, task)
    return exact_cases


def _port_trace(runs: list[CaseRun]) -> Any:
    """The port's instruction trace (the evidence case's), or None: what its instructions read and write, and
    on which candidate.py lines."""
    run = next((r for r in runs if r.status == "ok" and r.traced), None)
    if run is None:
        return None
    try:
        return run.parsed_trace(4_000_000)
    except (ValueError, KeyError, TypeError):  # (a trace that cannot be read locates nothing)
        return None


#: CUDA sources whose derived texts (near-exact rewrite, literals) are kept: they do not depend on the candidate
SOURCES_KEPT = 16


@functools.lru_cache(maxsize=SOURCES_KEPT)
def _exact_source(cuda_src: str, keep: tuple[Any, ...] = ()) -> str | None:
    """The near-exact rewrite of ``cuda_src``, ``keep`` (chains and constants, frozen) left in fp32."""
    from nkieval.cuda.exact import exact_source

    try:
        return exact_source(cuda_src, keep)
    except Exception:  # (a source the rewrite cannot parse: the envelope pivots on the reference)
        return None


def _shared_chains(loaded: Loaded, cuda_src: str, runs: list[CaseRun]) -> list[Any]:
    """The CUDA source's dot-product chains (:mod:`nkieval.cuda.chains`) that the port repeats: on the traced
    case, the chain's length is the contraction K of one of the port's fp32 matmul instructions that starts its
    PSUM accumulator afresh (not a transpose), so both sides round that sum in one order; with them, the
    dimension constants of their kernels. The envelope's pivot keeps them in fp32: counting their rounding on
    both sides made the envelope ~1000x the observed difference where large scores magnify it (attention on
    the 'large' family)."""
    from nkieval.cuda.chains import chain_length, dimension_constants, dot_chains
    from nkieval.cuda.runner import bind_task

    task = loaded.task
    at = next((i for i, r in enumerate(runs) if r.status == "ok" and r.traced), None)
    try:
        chains = dot_chains(cuda_src)
        trace = _port_trace(runs) if chains and at is not None else None  # (no trace is parsed for nothing)
        if trace is None or at is None:
            return []
        ks = {rec.attrs.get("K") for rec in trace.records[:MAX_TRACE_RECORDS] if rec.opcode == "nc_matmul"
              and not rec.attrs.get("is_transpose") and not rec.attrs.get("accumulated")}
        binding = bind_task(cuda_src, task.kernel, task.inputs, task.outputs, dict(task.params))
        shared = [c for c in chains if chain_length(cuda_src, c, binding, loaded.cases[at].dims) in ks]
        # (a kept chain's sum times a scale made from the dimensions, rsqrtf((float)d), is rounded to fp32 on
        # both sides: with the scale widened, the pivot's product lands on other fp32 neighbours, one step of a
        # score of ~4,500 being 4.9e-4)
        kernels = {c.function for c in shared}
        return [*shared, *(k for k in dimension_constants(cuda_src) if k.function in kernels)] if shared else []
    except Exception:  # (a source the chain finder cannot read: the pivot widens everything, as before)
        return []


def _exact_outputs(data: CaseData, task: Any, inputs: dict[str, np.ndarray], dims: dict[str, int],
                   exact_src: str | None, left: int) -> tuple[list[np.ndarray], int] | None:
    """The CUDA kernel's recipe in near-exact arithmetic on a case (:mod:`nkieval.cuda.exact`), with the
    executor work units it took; None when it does not run (or no executor work is left: ``left``)."""
    from nkieval.cuda import CudaError, ExecutorTimeout, run_task_cuda, work_units

    if exact_src is None or left <= 0:
        return None
    limit = max(work_units(MIN_RUN_S), left)
    try:
        out, (_options, took, _warnings) = _gpu_outputs(
            data, exact_src, "exact", lambda: run_task_cuda(task, inputs, dims, source=exact_src,
                                                            work_limit=limit), limit)
    except (CudaError, ExecutorTimeout):
        return None
    if took > limit:  # (finished past its limit between two checks: as a timeout, kept or fresh)
        return None
    return out, took


def _gpu_outputs(data: CaseData, cuda_src: str, what: str, run: Callable[[], tuple[list[np.ndarray], Any]],
                 limit: int) -> tuple[list[np.ndarray], tuple[Any, int, list[str]]]:
    """The CUDA kernel's outputs on a case's inputs (``what``: the case's own, or an edge input made from them)
    and (build options, executor work units, the executor's warnings): candidate-independent, so kept with the
    case's cached data for the next review of the task with the same seed. A run that ran past its work limit
    ``limit`` is kept as such too: a later review that gives it no more work gets the timeout at once. The
    executor's safety net (``ExecutorSafetyNet``) propagates, nothing kept: a harness fault."""
    from nkieval.cuda import ExecutorTimeout, executor_work

    def compute() -> tuple[list[np.ndarray], tuple[Any, int, list[str]]]:
        w0 = executor_work()
        gpu, cr = run()
        return gpu, (cr.options, executor_work() - w0, list(getattr(cr, "warnings", [])))

    # (work units, not the seconds these facts held before: another key)
    key = f"cuda-work:{what}:{hashlib.sha256(cuda_src.encode()).hexdigest()}"
    past = data.timed_out_within(key, limit)
    if past is not None:
        raise ExecutorTimeout(f"an earlier review's run of these inputs ran past {past:.0f} work units (kept)")
    try:
        return data.get_derived(key, compute)
    except ExecutorTimeout:
        data.note_timeout(key, limit)
        raise


def _elements(task: Any, dims: dict[str, int]) -> int:
    return sum(int(np.prod(s.concrete(dims))) for s in [*task.inputs, *task.outputs])


def _compare(task: Any, label: str, gpu: list[np.ndarray], port: list[np.ndarray],
             ref: list[np.ndarray] | None, per_out: dict[str, dict[str, Any]],
             unwritten: list[Any] | None = None) -> None:
    """Fold one case into the per-output verdicts; ``unwritten``: the sandbox's masks of the elements the
    port never wrote (per output, or None), reported where the CUDA kernel writes a value there."""
    for k, spec in enumerate(task.outputs):
        if k >= len(port):
            continue
        g = np.asarray(gpu[k], np.float64)
        p = np.asarray(port[k], np.float64).reshape(g.shape) if np.size(port[k]) == g.size else None
        rec = per_out[spec.name]
        rec["cases"] += 1
        if p is None:
            rec["verdict"] = "disagree"
            rec["worst"] = {"case": label, "why": f"shape {np.shape(port[k])} vs {g.shape}"}
            continue
        d, ratio = tolerance_ratios(g, p, task.rtol, task.atol)
        j = int(np.argmax(ratio)) if ratio.size else 0
        r = float(ratio.reshape(-1)[j]) if ratio.size else 0.0
        if r > rec["tol_ratio"]:
            idx = np.unravel_index(j, g.shape) if g.size else ()
            rec["tol_ratio"] = r
            rec["max_abs_diff"] = float(d.reshape(-1)[j]) if d.size else 0.0
            rec["worst"] = {"case": label, "index": [int(x) for x in idx], "gpu": float(g.reshape(-1)[j]),
                            "port": float(p.reshape(-1)[j])}
        if r > 1.0:
            rec["verdict"] = "disagree"
            mask = unwritten[k] if unwritten is not None and k < len(unwritten) else None
            holes = None if mask is None or np.shape(mask) != g.shape else np.asarray(mask, bool) & np.isfinite(g)
            if holes is not None and holes.any() and holes.sum() > (rec.get("unwritten") or {}).get("count", 0):
                first = np.unravel_index(int(np.argmax(holes)), g.shape)
                rec["unwritten"] = {"case": label, "count": int(holes.sum()), "total": int(g.size),
                                    "first_index": [int(x) for x in first]}
    if ref is not None:  # (the review folds the envelope in after the verdicts, with its pivots)
        _envelope(gpu, port, [ref], per_out, task)


def _envelope(gpu: list[np.ndarray], port: list[np.ndarray], pivots: list[list[np.ndarray]],
              per_out: dict[str, dict[str, Any]], task: Any) -> None:
    """Fold one case into the per-output envelope and the observed max|GPU - port|.

    Per element, ``e_i = |GPU_i - X_i| + |port_i - X_i|`` bounds ``|GPU_i - port_i|`` for every pivot X in
    ``pivots`` (the reference; the CUDA recipe in near-exact arithmetic: the triangle inequality), so the
    tighter of them per element is kept. The elements are grouped in magnitude bands (binades of |GPU_i|);
    per band, the envelope is max e_i and the observed difference max |GPU_i - port_i| (:func:`_band_summary`).
    The output's ``envelope`` is the largest band envelope over the magnitudes where the two sides differ (the
    bands from the smallest to the largest where they do; every band when they never differ): a band where they are bitwise equal performed the same roundings, and
    its pivot error measures what both share, not what separates them (attention's large outputs, one fp32
    step from the pivot on both sides). It is never below the observed difference: the band holding the
    largest difference is one of those. ``envelope_all`` keeps max|GPU - X| + max|port - X| over all elements
    (one pivot per case), the bound before the bands."""
    for k, spec in enumerate(task.outputs):
        if k >= len(port) or np.size(port[k]) != np.size(gpu[k]):
            continue
        g = np.asarray(gpu[k], np.float64).reshape(-1)
        p = np.asarray(port[k], np.float64).reshape(-1)
        both = np.isfinite(g) & np.isfinite(p)
        best, per_elem, parts = None, None, None
        for pivot in pivots:
            rf = np.asarray(pivot[k], np.float64).reshape(-1) if k < len(pivot) else None
            if rf is None or rf.size != g.size:
                continue
            fin = both & np.isfinite(rf)
            every = bool(fin.all())  # (the common case: no mask to apply, each difference computed once)
            if not every and not fin.any():
                continue
            d_g, d_p = np.abs(g - rf), np.abs(p - rf)
            g_err, p_err = (d_g, d_p) if every else (np.where(fin, d_g, np.nan), np.where(fin, d_p, np.nan))
            e = g_err + p_err
            env = float(d_g.max() + d_p.max()) if every else float(d_g[fin].max() + d_p[fin].max())
            if best is None or env < best[0]:
                obs = float(np.abs(g - p).max() if every else np.abs(g - p)[fin].max())
                best = (env, obs)
            # (per element the tighter pivot, and each side's error against it; NaN where no pivot is finite)
            take = np.isfinite(e) & ~(per_elem < e) if per_elem is not None else np.isfinite(e)
            per_elem = e if per_elem is None else np.where(take, e, per_elem)
            parts = (g_err, p_err) if parts is None else (np.where(take, g_err, parts[0]),
                                                          np.where(take, p_err, parts[1]))
        if best is None or per_elem is None or parts is None:
            continue
        rec = per_out[spec.name]
        rec["envelope_all"] = max(rec.get("envelope_all") or 0.0, best[0])
        rec["observed"] = max(rec.get("observed") or 0.0, best[1])
        bands = {b["exponent"]: b for b in rec.get("envelope_bands") or []}
        fin = np.isfinite(per_elem)
        if fin.all():
            _fold_bands(bands, g, per_elem, np.abs(g - p), parts[0], parts[1])
        else:
            _fold_bands(bands, g[fin], per_elem[fin], np.abs(g - p)[fin], parts[0][fin], parts[1][fin])
        rec["envelope_bands"] = [bands[x] for x in sorted(bands)]
        rec["envelope"] = _band_summary(rec["envelope_bands"])
        span = _differing_span(rec["envelope_bands"]) or rec["envelope_bands"]
        # (which side the envelope comes from, over the magnitudes it is stated on)
        rec["envelope_gpu_error"] = max(b["gpu_error"] for b in span)
        rec["envelope_port_error"] = max(b["port_error"] for b in span)
        rec["envelope_scope"] = _band_scope(rec["envelope_bands"])


#: the band of GPU outputs equal to 0 (binade exponents of float64 are above -1075)
ZERO_BAND = -10_000


def _fold_bands(bands: dict[int, dict[str, Any]], g: np.ndarray, env: np.ndarray, obs: np.ndarray,
                gpu_err: np.ndarray, port_err: np.ndarray) -> None:
    """Fold elements into the magnitude bands: band x holds the GPU outputs with 2**(x-1) <= |g| < 2**x (0 apart),
    with the largest per-element envelope, observed difference and each side's error in it, and its count."""
    if not g.size:
        return
    # (one stable sort of the band numbers, radix on int16, then each band's maxima by one reduction: the same
    # maxima as a pass per band, in a pass per quantity)
    _, exps = np.frexp(g)
    exps = np.where(g == 0, ZERO_BAND, exps).astype(np.int16)
    order = np.argsort(exps, kind="stable")
    ordered = exps[order]
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    counts = np.diff(np.append(starts, ordered.size))
    tops = {key: np.maximum.reduceat(values[order], starts) for key, values in
            (("envelope", env), ("observed", obs), ("gpu_error", gpu_err), ("port_error", port_err))}
    for i, x in enumerate(ordered[starts].tolist()):
        b = bands.setdefault(x, {"exponent": x, "elements": 0, "envelope": 0.0, "observed": 0.0,
                                 "gpu_error": 0.0, "port_error": 0.0})
        b["elements"] += int(counts[i])
        for key, top in tops.items():
            b[key] = max(b[key], float(top[i]))


def _differing_span(bands: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The bands from the smallest to the largest magnitude where GPU and port differ (those between included);
    empty when they never differ."""
    xs = [b["exponent"] for b in bands if b["observed"] > 0]
    return [b for b in bands if xs and min(xs) <= b["exponent"] <= max(xs)]


def _band_summary(bands: list[dict[str, Any]]) -> float:
    """The output's envelope: the largest band envelope over the magnitudes where GPU and port differ, or over
    every band when they never do (a difference of 0 has no ratio to it)."""
    return max(b["envelope"] for b in (_differing_span(bands) or bands)) if bands else 0.0


def _band_scope(bands: list[dict[str, Any]]) -> str | None:
    """Where the envelope is stated, when not on every element: the |GPU output| range of the bands where GPU and
    port differ, and the envelope over every element (the bands where they are bitwise equal included)."""
    span = _differing_span(bands)
    every = max((b["envelope"] for b in bands), default=0.0)
    if not span or max(b["envelope"] for b in span) >= every:
        return None
    lo, hi = band_range(span[0]["exponent"])[0], band_range(span[-1]["exponent"])[1]
    return (f"on the elements with |GPU output| in [{lo:.3g}, {hi:.3g}), the magnitudes where GPU and port differ; "
            f"{every:.3g} over every element, bitwise equal outside those magnitudes")


def band_range(exponent: int) -> tuple[float, float]:
    """The |GPU output| range [lo, hi) of a magnitude band (:func:`_fold_bands`)."""
    return (0.0, 0.0) if exponent == ZERO_BAND else (math.ldexp(0.5, exponent), math.ldexp(1.0, exponent))


# ------------------------------------------------------------------------------ what the difference comes from
#: executor work per review for the ablation runs, apart from the cases' budget, in calibrated seconds (as
#: :data:`EXECUTOR_BUDGET_S`: the decisions are in work units)
ABLATION_BUDGET_S = 2.0
#: the case the ablations run on: the review's smallest case with a difference and at least this many elements
#: (a difference on a few elements may come from one rounding the ablations leave alone: row_softmax's 1 x 7 case),
#: else the largest case with a difference (the runs' cost grows with the case)
ABLATION_MIN_ELEMENTS = 2_048


def _explain_differences(loaded: Loaded, cuda_src: str, cases: list[tuple[Any, CaseData, tuple[Any, ...]]],
                         per_out: dict[str, dict[str, Any]], counts: dict[str, int | None] | None = None) -> None:
    """Per output that agrees with the GPU within tolerance but not bitwise, what the difference comes from: the
    CUDA kernel re-run on one case with one source of difference removed at a time (:mod:`nkieval.cuda.ablate`),
    each ablation's share of the squared difference it removes (``envelope_causes``) and a sentence naming those
    that remove at least :data:`nkieval.cuda.ablate.NAMED_SHARE` of it (``envelope_cause``). Only where an output
    has such a difference; within :data:`ABLATION_BUDGET_S` (the runs are candidate-independent and kept with the case)."""
    from nkieval.cuda import CudaError, ExecutorTimeout, run_task_cuda, work_units
    from nkieval.cuda.ablate import ablations, shares

    task = loaded.task
    idx = {s.name: k for k, s in enumerate(task.outputs)}

    def differs(run: tuple[Any, ...], o: str) -> bool:
        g, p = run[3][idx[o]], run[4][idx[o]] if idx[o] < len(run[4]) else None
        return p is not None and np.size(p) == np.size(g) and \
            bool(np.any(np.asarray(g, np.float64).reshape(-1) != np.asarray(p, np.float64).reshape(-1)))

    explain = [o for o, rec in per_out.items() if rec["verdict"] == "agree" and rec.get("observed")]
    with_diff = [c for c in cases if any(differs(c[2], o) for o in explain)]
    if not explain or not with_diff:
        return
    big = [c for c in with_diff if _elements(task, c[0].dims) >= ABLATION_MIN_ELEMENTS]
    case, data, run = min(big, key=lambda c: _elements(task, c[0].dims)) if big else \
        max(with_diff, key=lambda c: _elements(task, c[0].dims))
    try:
        variants = ablations(cuda_src)
    except Exception:  # (a source the ablations cannot read: the difference stays unexplained)
        return
    budget = work_units(ABLATION_BUDGET_S)
    spent, outs = 0, {}
    for a in variants:
        left = budget - spent
        if left <= 0:
            break
        try:
            g, (_opts, took, _w) = _gpu_outputs(
                data, a.source, f"ablation/{a.name}", lambda a=a, left=left: run_task_cuda(
                    task, run[2], case.dims, source=a.source, options=a.options, work_limit=left), left)
        except (CudaError, ExecutorTimeout):
            continue
        if took > left:  # (finished past its limit between two checks: as a timeout)
            continue
        spent += took
        outs[a.name] = g
    what = {a.name: a.what for a in variants}
    wide = _fp32_arithmetic_ablation(data, task, cuda_src, run, case.dims, budget - spent)
    if wide is not None:
        outs["fp32_arithmetic"], what["fp32_arithmetic"] = wide, FP32_ARITHMETIC
    port_outs, port_what = _port_side(loaded, case, run, (counts or {}).get(case.label))
    what.update(port_what)
    for o in explain:
        if not differs(run, o) or not (outs or port_outs):
            continue
        got = shares(run[3][idx[o]], run[4][idx[o]], {n: g[idx[o]] for n, g in outs.items()}) or {}
        # (the port's side: the same share with the port run without a source, 1 - |GPU - port_a|^2 / |GPU - port|^2)
        got.update(shares(run[4][idx[o]], run[3][idx[o]], {n: p[idx[o]] for n, p in port_outs.items()
                                                           if idx[o] < len(p)}) or {})
        if not got:
            continue
        ranked = sorted(got.items(), key=lambda x: -x[1])
        per_out[o]["envelope_causes"] = [{"ablation": n, "what": what[n], "share": v,
                                          "side": "port" if n in port_what else "gpu"} for n, v in ranked]
        per_out[o]["envelope_cause"] = _cause_sentence(ranked, what, run[0], set(port_what))


#: what the widest GPU ablation removes: the CUDA kernel's near-exact rewrite (:mod:`nkieval.cuda.exact`, every
#: chain widened), the envelope's pivot recipe, run as an ablation
FP32_ARITHMETIC = "fp32 arithmetic (all its float register operations)"


def _fp32_arithmetic_ablation(data: CaseData, task: Any, cuda_src: str, run: tuple[Any, ...], dims: dict[str, int],
                              left: int) -> list[np.ndarray] | None:
    """The CUDA kernel's outputs on the ablation case with all of its float register arithmetic in fp64 (the
    near-exact rewrite with no chain kept: the envelope's pivot run, kept under the same key, when the pivot kept
    none): what the GPU's fp32 roundings together account for, an elementwise formula's several roundings included
    (gelu: erff, a product, a sum), where each narrower ablation offers nothing. None past the budget."""
    if left <= 0:
        return None
    exact_src = _exact_source(cuda_src)
    if exact_src is None:
        return None
    got = _exact_outputs(data, task, run[2], dims, exact_src, left)
    return None if got is None else got[0]


def _port_side(loaded: Loaded, case: Any, run: tuple[Any, ...], n_instructions: int | None = None
               ) -> tuple[dict[str, list[np.ndarray]], dict[str, str]]:
    """The port's ablated outputs on the ablation case (:mod:`.port_ablate`: its recorded program replayed with one
    of the simulator's rounding sources removed at a time) and what each ablation removes; nothing when the
    review kept no program for the case's shape. ``n_instructions``: the port's run of the case's count (the
    replays' budget is counted with it)."""
    from nkieval.review.stages.port_ablate import port_ablations, port_runs
    from nkieval.review.tracing import shape_key

    k = loaded.index.get(case.label)
    job = loaded.jobs[k] if k is not None and k < len(loaded.jobs) else None
    program = loaded.programs.get(shape_key(job)) if job is not None and job.label == case.label else None
    if program is None:
        return {}, {}
    text = program.decode()  # (the ablations read the document's text)
    variants = port_ablations(text)
    outs = port_runs(text, job.inputs, job.params, loaded.target, list(run[4]), variants, loaded.limits,
                     n_instructions=n_instructions)
    return outs, {a.name: a.what for a in variants if a.name in outs}


def _cause_sentence(ranked: list[tuple[str, float]], what: dict[str, str], label: str,
                    port: set[str] | frozenset[str] = frozenset()) -> str:
    """The ablations that remove at least :data:`nkieval.cuda.ablate.NAMED_SHARE` of the difference, with their
    shares and their side (``port``: the port's ablations; the others are the GPU's); else what was tried on each
    side and that none accounts for it."""
    from nkieval.cuda.ablate import NAMED_SHARE, named

    def side(n: str) -> str:
        return f"the port's {what[n]}" if n in port else f"the GPU's {what[n]}"

    causes = named(dict(ranked))
    gpu_tried = ", ".join(what[n] for n, _ in ranked if n not in port)
    port_tried = ", ".join(what[n] for n, _ in ranked if n in port)
    if not causes:
        tried = " and ".join(x for x in (f"from the GPU run each of {gpu_tried}" if gpu_tried else "",
                                         f"from the port's run each of {port_tried}" if port_tried else "") if x)
        where = "neither side's ablated roundings alone" if port_tried else "the port's side"
        return (f"the difference comes from {where}: removing {tried} removes less than {NAMED_SHARE:.0%} of it "
                f"(on {label})")
    rest = [(n, v) for n, v in ranked if v < NAMED_SHARE]
    whose = "that side's run" if any(n in port for n, _ in causes) else "the GPU run"
    return ("the difference comes from " + " and ".join(f"{side(n)} ({v:.0%})" for n, v in causes)
            + f": the share of the squared difference removed when {whose} does without it, on {label}"
            + (f"; {', '.join(f'{side(n)} {v:.0%}' for n, v in rest)}" if rest else ""))


# ------------------------------------------------------------------------------ edge inputs
#: an epsilon: a positive float literal below this added to the argument of a square root (``rsqrtf(v + 1e-6f)``)
EPSILON_MAX = 1e-3
#: the case the epsilon edge input is made on: the review's largest case with at most this many elements. A
#: rounding of a row's reduction shows on a few rows in a hundred (bf16_square_sum's mean of squares: on 8 % of
#: the rows of a 130x96 input, none of a single 33-wide row), so it needs rows, not the smallest case
EPSILON_EDGE_ELEMENTS = 32_768
_ROOT_CALL = re.compile(r"\b(?:rsqrtf?|sqrtf?|__frsqrt_rn|__fsqrt_rn)\s*\(")
_ADDED_LITERAL = re.compile(r"\+\s*((?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)[fF]?\b")
_ADDED_NAME = re.compile(r"\+\s*([A-Za-z_]\w*)\b(?!\s*[\[(.])")


def _edge_kinds(cuda_src: str, params: tuple[tuple[str, float], ...] = ()) -> list[str]:
    kinds = []
    if _ROOT_CALL.search(cuda_src):
        kinds += ["tiny_variance", "tiny_magnitude"]
    if _epsilons(cuda_src, params):
        kinds.append("epsilon")
    if re.search(r"\b(__expf|expf?|exp2f?)\s*\(", cuda_src):
        kinds.append("large_magnitude")
    return kinds


@functools.lru_cache(maxsize=SOURCES_KEPT)
def _epsilons(cuda_src: str, params: tuple[tuple[str, float], ...] = ()) -> tuple[float, ...]:
    """The epsilons of the CUDA source: positive values below :data:`EPSILON_MAX` added inside the argument of a
    square root (the regulariser of a normalisation), as a float literal (``rsqrtf(ss / n + 1e-6f)``) or as a
    name that is one of the task's float ``params`` (``rsqrtf(var / d + eps)``, the task's eps = 1e-5)."""
    found: list[float] = []
    named = dict(params)
    for m in _ROOT_CALL.finditer(cuda_src):
        depth, end = 1, m.end()
        while end < len(cuda_src) and depth:  # (the call's argument: to its matching parenthesis)
            depth += {"(": 1, ")": -1}.get(cuda_src[end], 0)
            end += 1
        values = [float(lit.group(1)) for lit in _ADDED_LITERAL.finditer(cuda_src, m.end(), end)]
        values += [named[n.group(1)] for n in _ADDED_NAME.finditer(cuda_src, m.end(), end) if n.group(1) in named]
        found += [v for v in values if 0 < v < EPSILON_MAX and v not in found]
    return tuple(found)


def _float_params(task: Any) -> tuple[tuple[str, float], ...]:
    """The task's float parameters, (name, value) pairs: what a name in the CUDA source may be bound to."""
    return tuple(sorted((k, float(v)) for k, v in task.params.items() if isinstance(v, float)))


def _edge_inputs(task: Any, inputs: dict[str, np.ndarray], kind: str, seed: int, epsilon: float = 0.0
                 ) -> dict[str, np.ndarray] | None:
    """The floating-point inputs of rank >= 2 shaped as the first of them, as rows: each row a constant plus
    noise of 1e-3 (``tiny_variance``), noise of 1e-3 alone (``tiny_magnitude``), noise of sqrt(``epsilon``)
    alone (``epsilon``: a row's mean square and variance about the epsilon, where the epsilon no longer drowns
    a rounding of the row's reduction), or scaled by 30 (``large_magnitude``); the other inputs unchanged."""
    out = dict(inputs)
    rng = np.random.default_rng(seed)
    shape = None
    for spec in task.inputs:
        a = inputs[spec.name]
        if a.ndim < 2 or a.dtype.kind not in "fV" or a.dtype.itemsize < 2 or (shape is not None and a.shape != shape):
            continue
        shape = a.shape
        rows = a.astype(np.float32).reshape(-1, a.shape[-1])
        noise = np.float32(1e-3) * rng.standard_normal(rows.shape).astype(np.float32)
        if kind == "tiny_variance":
            new = rng.standard_normal((rows.shape[0], 1)).astype(np.float32) + noise
        elif kind == "tiny_magnitude":
            new = noise
        elif kind == "epsilon":
            new = np.float32(math.sqrt(epsilon)) * rng.standard_normal(rows.shape).astype(np.float32)
        else:
            new = rows * np.float32(30.0)
        out[spec.name] = new.reshape(a.shape).astype(a.dtype)
    return out if shape is not None else None


def _epsilon_dims(task: Any, ran: list[dict[str, int]]) -> dict[str, int]:
    """The case the epsilon edge input is made on: the largest of ``ran`` (the review's cases the executor ran,
    smallest first) within :data:`EPSILON_EDGE_ELEMENTS`, else the smallest."""
    fits = [d for d in ran if _elements(task, d) <= EPSILON_EDGE_ELEMENTS]
    return max(fits, key=lambda d: _elements(task, d)) if fits else ran[0]


def _edge_runs(loaded: Loaded, cuda_src: str, dims: dict[str, int], epsilon_dims: dict[str, int] | None = None
               ) -> list[tuple[str, dict[str, int], dict[str, np.ndarray], list[np.ndarray], list[np.ndarray]]]:
    """The edge inputs of :func:`_edge_kinds` made from the case of ``dims`` (the epsilon's from the case of
    ``epsilon_dims``, by default the same), each run by the CUDA kernel and the port: (label, dims, inputs, GPU
    outputs, port outputs) for each the port ran."""
    from nkieval.cuda import CudaError, run_task_cuda, work_units

    task = loaded.task
    edge_limit = work_units(EXECUTOR_BUDGET_S)
    jobs, prepared = [], []
    params = _float_params(task)
    for kind in _edge_kinds(cuda_src, params):
        at = epsilon_dims if kind == "epsilon" and epsilon_dims is not None else dims
        data = next((d for c, d in zip(loaded.cases, loaded.data) if c.dims == at), None)
        if data is None:
            continue
        eps = min(_epsilons(cuda_src, params), default=0.0)
        inp = _edge_inputs(task, data.inputs, kind, loaded.seed, eps)
        if inp is None:
            continue
        try:
            gpu, _ = _gpu_outputs(data, cuda_src, f"edge/{kind}/{loaded.seed}", lambda inp=inp, at=at: run_task_cuda(
                task, inp, at, work_limit=edge_limit), edge_limit)
        except CudaError:
            continue
        label = f"edge/{kind}"
        jobs.append(CaseJob(label, inp, dict(task.params), len(task.outputs)))
        prepared.append((label, at, inp, gpu))
    if not jobs:
        return []
    req = loaded.request
    ran = run_candidate(loaded.source, task.kernel, jobs, target=loaded.target, limits=loaded.limits,
                        isolation=req.isolation, trusted=req.trusted, hide=(str(task.directory),),
                        programs=loaded.programs)
    return [(lb, d, inp, gpu, r.outputs) for (lb, d, inp, gpu), r in zip(prepared, ran) if r.status == "ok"]


def _disagreeing_edges(task: Any, edge: list[tuple[Any, ...]], disagreeing: list[str]) -> list[tuple[Any, ...]]:
    """The edge runs where one of the ``disagreeing`` outputs disagrees: a stated mutation must reproduce the port
    on each of them too (:func:`.mutation_causes.mutation_causes`'s ``also``)."""
    idx = {s.name: k for k, s in enumerate(task.outputs)}
    return [r for r in edge if any(idx[o] < len(r[4]) and _max_ratio(task, r[3][idx[o]], r[4][idx[o]]) > 1.0
                                   for o in disagreeing)]


# ------------------------------------------------------------------------------ attribution
@functools.lru_cache(maxsize=SOURCES_KEPT)
def _cuda_literals(src: str) -> tuple[_Lit, ...]:
    from nkieval.cuda.program import _parser, preprocess

    text = preprocess(src)
    tree = _parser().parse(text.encode())
    out: list[_Lit] = []
    stack = [tree.root_node]
    while stack:
        n = stack.pop()
        if n.type == "number_literal":
            t = n.text.decode().lower()
            if not t.startswith("0x") and ("." in t or "e" in t):
                try:
                    out.append(_Lit(float(t.rstrip("fl")), n.text.decode(), n.start_point[0] + 1, n.start_byte,
                                    n.end_byte))
                except ValueError:
                    pass
        stack.extend(n.children)
    return tuple(out)


@functools.lru_cache(maxsize=SOURCES_KEPT)
def _port_literals(source: str) -> tuple[_Lit, ...]:
    """The port's float constants (kept per source: a candidate reviewed again is not parsed again)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # the candidate's text: anything goes
        return ()
    out = []
    # (parameter defaults are not the constants the port computes with: the review passes every parameter)
    defaults = {id(x) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
                for d in [*f.args.defaults, *f.args.kw_defaults] if d is not None for x in ast.walk(d)}
    for n in ast.walk(tree):
        if id(n) in defaults:
            continue
        if isinstance(n, ast.Constant) and isinstance(n.value, float) and not isinstance(n.value, bool):
            out.append(_Lit(float(n.value), ast.get_source_segment(source, n) or repr(n.value), n.lineno))
        elif isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub) and isinstance(n.operand, ast.Constant) \
                and isinstance(n.operand.value, float):
            out.append(_Lit(-float(n.operand.value), ast.get_source_segment(source, n) or "", n.lineno))
    return tuple(out)


def _close(a: float, b: float) -> bool:
    return a == b or (a != 0 and abs(a - b) <= 1e-6 * abs(a))


def _line_text(text: str, line: int) -> str:
    lines = text.splitlines()
    return lines[line - 1].strip()[:160] if 0 < line <= len(lines) else ""


def _attribute(loaded: Loaded, cuda_src: str, runs: list[tuple[Any, ...]], disagreeing: list[str]
               ) -> list[dict[str, Any]]:
    """Constant causes: the CUDA source re-run with one of the port's constants in place of one of its own
    (:data:`MAX_HYPOTHESES` pairs, the closest values first), each constant and parameter replaced everywhere it
    is used; then, for what is still unexplained, the values used at several sites, one site at a time
    (:func:`_site_hypotheses`)."""
    task = loaded.task
    port_lits = _port_literals(loaded.source)
    cuda_lits = _cuda_literals(cuda_src)
    params = {k: float(v) for k, v in task.params.items() if isinstance(v, float)}
    # (a port constant equal to another parameter's value is still a candidate: re-running decides)
    known = [lit.value for lit in cuda_lits]
    port_only = [p for p in port_lits if not any(_close(p.value, k) for k in known) and p.value != 0]
    if not port_only:
        return []
    port_values = [p.value for p in port_lits]
    # (constants the port does not use first; a parameter's value often appears as the port's default)
    hyps: list[tuple[tuple[bool, float], str, Any, _Lit]] = []
    for p in port_only:
        for c in cuda_lits:
            if c.value != 0 and p.value * c.value > 0:
                used = any(_close(c.value, v) for v in port_values)
                hyps.append(((used, abs(math.log(abs(p.value / c.value)))), "literal", c, p))
        for k, v in params.items():
            if v != 0 and p.value * v > 0:
                hyps.append(((False, abs(math.log(abs(p.value / v)))), "param", k, p))
    hyps.sort(key=lambda h: h[0])
    hyps = hyps[:MAX_HYPOTHESES]
    if not hyps:
        return []
    out_idx = {s.name: k for k, s in enumerate(task.outputs)}
    # the run where the disagreement is largest decides; every output is re-checked there
    best: tuple[float, Any, dict[str, float]] | None = None
    for r in runs:
        e = {o: _max_ratio(task, r[3][out_idx[o]], r[4][out_idx[o]]) for o in disagreeing}
        if best is None or max(e.values()) > best[0]:
            best = (max(e.values()), r, e)
    assert best is not None
    if best[0] < MIN_ATTRIBUTED:  # (rounding noise everywhere: no hypothesis could be stated, none is run)
        return []
    trial = _Trial(loaded, cuda_src, best[1], best[2], out_idx)
    causes: list[dict[str, Any]] = []
    text = trial.text
    for _, kind, what, p in hyps:
        if trial.spent > trial.budget:
            return causes
        prm = dict(task.params)
        if kind == "literal":
            suffix = "f" if what.text.lower().endswith("f") else ""
            source = text[: what.start] + repr(p.value) + suffix + text[what.end:]
        else:
            source = cuda_src
            prm[what] = p.value
        fixed = trial.reproduces(source, prm, disagreeing)
        if not fixed:
            continue
        if kind == "literal":
            cuda_desc = f"the constant {what.text} at kernel.cu:{what.line} (`{_line_text(cuda_src, what.line)}`)"
        else:
            cuda_desc = f"the parameter {what} = {params[what]:g} that the CUDA kernel takes"
        causes.append(trial.cause(cuda_desc, fixed, what.line if kind == "literal" else None,
                                  what.text if kind == "literal" else what, p, trial.label))
        disagreeing = [o for o in disagreeing if o not in {f[0] for f in fixed}]
        if not disagreeing:
            return causes
    # (no constant replaced everywhere explains it: one use of a value used at several sites may)
    sites = _site_hypotheses(task, cuda_src, text, hyps, cuda_lits)[:MAX_SITE_HYPOTHESES]
    confirm = _confirming_run(task, runs, trial.label, disagreeing, out_idx) if sites else None
    for cuda_desc, cuda_line, cuda_text, p, source, one_use in sites:
        if trial.spent > trial.budget:
            break
        fixed = trial.reproduces(source, dict(task.params), disagreeing, keep_agreeing=True)
        if not fixed or (confirm is not None and not trial.agrees_on(confirm, source, [f[0] for f in fixed])):
            continue
        labels = trial.label + ("" if confirm is None else f" and {confirm[0]}")
        causes.append(trial.cause(cuda_desc, fixed, cuda_line, cuda_text, p, labels, one_use))
        disagreeing = [o for o in disagreeing if o not in {f[0] for f in fixed}]
        if not disagreeing:
            break
    return causes


#: hypotheses of one use of a value (:func:`_site_hypotheses`) tried at most, each one executor run on the case
#: where the disagreement is largest (and one more, on a second case, for one that reproduces the port there).
#: Twelve covers every use of a parameter used at up to four sites against the three port constants closest
#: to it, or a value used at twelve sites against one (the built-in and port kernels use a parameter or a named
#: constant at three sites at most). The CPU it adds is paid only by a port whose disagreement no constant replaced everywhere
#: explains (about 12 runs of the smallest disagreeing case at most)
MAX_SITE_HYPOTHESES = 12


def _site_hypotheses(task: Any, cuda_src: str, text: str, hyps: list[tuple[Any, str, Any, _Lit]],
                     cuda_lits: tuple[_Lit, ...]) -> list[tuple[str, int, str, _Lit, str, bool]]:
    """For each (CUDA value, port constant) pair of ``hyps`` (the constant hypotheses tried, every use of the
    value replaced) whose value is used at several sites: (description, kernel.cu line, CUDA text, port
    constant, source, whether one use only) per hypothesis, in ``hyps``'s order:

    * a parameter, or a named constant (``constexpr float k``): the port's value at one of its uses, each use
      in source order (:mod:`nkieval.cuda.sites`);
    * a literal value written at several sites (``0.5f`` twice, a ``#define`` expanded): the port's value at
      every one of them at once (each site alone is a hypothesis of the first pass)."""
    from nkieval.cuda.runner import bind_task
    from nkieval.cuda.sites import c_float, named_constants, parameter_sites

    try:
        binding = bind_task(cuda_src, task.kernel, task.inputs, task.outputs, dict(task.params))
    except Exception:  # (a host function the binder cannot read: no parameter has sites)
        binding = {}
    host = {v.removeprefix("param:"): k for k, v in binding.items() if v.startswith("param:")}
    # (by the offset of the literal that declares each: that literal's hypothesis replaced every use)
    constants = {at: (name, sites) for name, _value, at, sites in named_constants(cuda_src)}
    out: list[tuple[str, int, str, _Lit, str, bool]] = []
    grouped: set[tuple[float, float]] = set()
    for _, kind, what, p in hyps:
        if kind == "param":
            sites = parameter_sites(cuda_src, task.kernel, host.get(what, what))
            label = f"the parameter {what} = {float(task.params[what]):g}"
        elif what.start in constants and len(constants[what.start][1]) > 1:
            name, sites = constants[what.start]
            label = f"the constant {name} = {what.text}"
        else:
            same = [c for c in cuda_lits if c.value == what.value]
            if len(same) < 2 or (what.value, p.value) in grouped:
                continue
            grouped.add((what.value, p.value))
            suffix = "f" if what.text.lower().endswith("f") else ""
            source = text
            for c in sorted(same, key=lambda c: -c.start):  # (from the end: earlier offsets stay valid)
                source = source[: c.start] + repr(p.value) + suffix + source[c.end:]
            where = ", ".join(f"kernel.cu:{ln}" for ln in sorted({c.line for c in same}))
            out.append((f"the constant {what.text} at all its {len(same)} uses ({where})", same[0].line,
                        what.text, p, source, False))
            continue
        if len(sites) < 2:
            continue
        for k, site in enumerate(sites):
            desc = (f"{label} at its use kernel.cu:{site.line} (`{_line_text(cuda_src, site.line)}`; use {k + 1} of "
                    f"{len(sites)}, the others kept)")
            out.append((desc, site.line, what if kind == "param" else site.name, p,
                        site.replace(text, c_float(p.value)), True))
    return out


def _confirming_run(task: Any, runs: list[tuple[Any, ...]], label: str, disagreeing: list[str],
                    out_idx: dict[str, int]) -> tuple[Any, ...] | None:
    """A second run a one-use hypothesis must also reproduce the port on: another run where a ``disagreeing``
    output disagrees when there is one, else the first other run (a hypothesis with more freedom, one use out of
    several, must not match by coincidence on one input)."""
    others = [r for r in runs if r[0] != label and len(r[4]) >= len(out_idx)]
    return next((r for r in others if any(_max_ratio(task, r[3][out_idx[o]], r[4][out_idx[o]]) > 1.0
                                          for o in disagreeing)), others[0] if others else None)


class _Trial:
    """Re-runs of the CUDA kernel with a hypothesis on one run (the one where the disagreement is largest),
    kept across reviews (candidate-independent, with the work units they took: a warm review tries the same
    hypotheses as a cold one, within the same executor budget: twice the cases', each run at most half of it)."""

    def __init__(self, loaded: Loaded, cuda_src: str, run: tuple[Any, ...], base_err: dict[str, float],
                 out_idx: dict[str, int]):
        from nkieval.cuda import work_units
        from nkieval.cuda.program import preprocess

        task = loaded.task
        self.task, self.run, self.base_err, self.out_idx = task, run, base_err, out_idx
        self.label = run[0]
        self.text = preprocess(cuda_src)
        # (the review's own fingerprint when it keeps data: the task's files are read and hashed once per review)
        self.fingerprint = loaded.fingerprint or task_fingerprint(task)
        self.digest = inputs_digest(run[2])
        self.store = store_for(loaded.use_cache)
        self.source_text = loaded.source
        self.spent = 0
        self.budget = work_units(2 * EXECUTOR_BUDGET_S)
        self.run_limit = work_units(EXECUTOR_BUDGET_S / 2)

    def _outputs(self, run: tuple[Any, ...], source: str, prm: dict[str, Any], digest: str
                 ) -> list[np.ndarray] | None:
        g2, took = kept_cuda_run(self.task, self.fingerprint, run[2], digest, run[1], source, prm,
                                 self.run_limit, store=self.store)
        self.spent += took
        return g2

    def reproduces(self, source: str, prm: dict[str, Any], disagreeing: list[str], keep_agreeing: bool = False
                   ) -> list[tuple[str, float, float]]:
        """(output, tolerance ratio before, after) for the ``disagreeing`` outputs the hypothesis reproduces: the
        difference shrinks tenfold to within tolerance, from well above fp32 noise. ``keep_agreeing``: none
        when an output that agreed with the port on this run no longer does (a change of one use of a value must
        not move what the port computes right)."""
        g2 = self._outputs(self.run, source, prm, self.digest)
        if g2 is None:
            return []
        fixed = []
        port = self.run[4]
        if keep_agreeing:
            for o, k in self.out_idx.items():
                if o not in disagreeing and k < len(port) and \
                        _max_ratio(self.task, self.run[3][k], port[k]) <= 1.0 < _max_ratio(self.task, g2[k], port[k]):
                    return []
        for o in disagreeing:
            e0 = self.base_err[o]
            e1 = _max_ratio(self.task, g2[self.out_idx[o]], port[self.out_idx[o]])
            if e0 >= MIN_ATTRIBUTED and e1 <= 1.0 and e1 <= 0.1 * e0:
                fixed.append((o, e0, e1))
        return fixed

    def agrees_on(self, run: tuple[Any, ...], source: str, outputs: list[str]) -> bool:
        """Is the hypothesis's kernel within tolerance of the port's ``outputs`` on ``run``?"""
        g = self._outputs(run, source, dict(self.task.params), inputs_digest(run[2]))
        return g is not None and all(_max_ratio(self.task, g[self.out_idx[o]], run[4][self.out_idx[o]]) <= 1.0
                                     for o in outputs)

    def cause(self, cuda_desc: str, fixed: list[tuple[str, float, float]], cuda_line: int | None, cuda_text: str,
              p: _Lit, labels: str, one_use: bool = False) -> dict[str, Any]:
        """The cause record (``one_use``: the port's value replaced one use of the CUDA value, not all)."""
        outs = [f[0] for f in fixed]
        summary = (f"{cuda_desc} is {p.text} in the port at candidate.py:{p.line} "
                   f"(`{_line_text(self.source_text, p.line)}`): re-running the CUDA kernel with {p.text} "
                   f"{'there only ' if one_use else ''}reproduces the port's {', '.join(outs)} on {labels} "
                   "(difference " + ", ".join(f"{e0:.3g}x -> {e1:.3g}x the tolerance" for _, e0, e1 in fixed) + ")")
        return {"kind": "constant", "outputs": outs, "cuda_line": cuda_line, "cuda_text": cuda_text,
                "port_line": p.line, "port_text": p.text, "case": self.label, "summary": summary,
                "reproduced": [{"output": o, "before": e0, "after": e1} for o, e0, e1 in fixed]}


def _max_ratio(task: Any, g: np.ndarray, p: np.ndarray) -> float:
    g64 = np.asarray(g, np.float64)
    if np.size(p) != g64.size:
        return math.inf
    _, r = tolerance_ratios(g64, np.asarray(p, np.float64).reshape(g64.shape), task.rtol, task.atol)
    return float(r.max()) if r.size else 0.0


def tolerance_ratios(want: np.ndarray, got: np.ndarray, rtol: float, atol: float) -> tuple[np.ndarray, np.ndarray]:
    """Per element, ``|got - want|`` and that difference in units of the tolerance ``atol + rtol |want|``
    (float64 arrays of one shape). NaN against NaN and equal infinities differ by 0; any other NaN by inf.
    An exact tolerance (rtol = atol = 0) gives 0 where equal and inf elsewhere (never 0/0)."""
    with np.errstate(all="ignore"):
        if np.ndim(want) and np.isfinite(want).all() and np.isfinite(got).all():
            # (the common case, in half the passes: the same operations on the same values as below, where no NaN
            # or infinity needs its own rule)
            d = np.abs(got - want)
            return d, np.where(d == 0, 0.0, d / (atol + rtol * np.abs(want)))
        d = np.where((np.isnan(want) & np.isnan(got)) | (np.isinf(want) & (want == got)), 0.0, np.abs(got - want))
        d = np.where(np.isnan(d), np.inf, d)
        ratio = np.where(d == 0, 0.0, d / (atol + rtol * np.abs(np.where(np.isfinite(want), want, 0.0))))
    return d, ratio
