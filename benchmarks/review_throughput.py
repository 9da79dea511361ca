"""Reviews per minute over the built-in tasks, and the pipeline's own overhead share, cold and warm.

Definitions (the same as docs/review.md, "Overhead measurement"):

* **simulation** (``simulation_s``): the sandboxed child's time inside ``run_kernel``, from
  the case's inputs loaded to the outputs returned, summed over the review's cases. Nothing
  else counts as simulation: not the child's start, not reading its inputs, not checking,
  masking and writing its outputs or the trace (those are ``child_setup_s``, ``child_load_s``
  and ``child_post_s``, and they are overhead).
* **overhead**: everything else, as a share of each review's wall time (``total_s``):
  ``1 - simulation / total``, summed over reviews. It includes the sandbox (job directory,
  input files, fork, collecting results), the child's own work around ``run_kernel``, input
  generation, reference outputs, correctness, numerics, diagnosis, evidence, performance
  estimate, static analysis and scoring.

Judging, diagnosis, evidence parsing and static analysis run in a harness worker thread while
the sandboxed child simulates, so the wall-time share hides work that overlaps; the harness
CPU time per review (this process, all threads) is printed next to it, since an RL loop
running one review per core pays that CPU in full.

* cold: the first candidate of a task (its baseline), nothing cached: the case cache (inputs, reference
  outputs, the numerics oracle and bounds), the task's reference code and the baseline's and
  expert solution's trace evidence are cleared before it, so it pays for all of them;
* warm: every later candidate of the task with the same seed, the steady state of an RL loop
  that reviews many candidates of one task (``review(..., seed=S)`` caches per case).

``--repeat 1`` reviews each candidate once: its warm reviews are distinct candidates, the figure
to quote for an RL loop. With ``--repeat 2`` the second round meets outputs already judged, whose
verdicts the numerics keep (``PreparedCheck`` keeps the last few per case, keyed by the output's
bytes), so it measures repeated candidates.

With ``--new-rounds`` the later rounds review every candidate as a new one instead: its source with a comment
line of the round's number appended (a different candidate to everything the judge keeps by source: recorded
programs, static findings, float constants), and the numerics' memo of judged outputs emptied before each review.
What the judge keeps for the task stays kept (the case cache; the cause search's CUDA runs of the task's kernel and
its mutants, which depend on the task and the inputs, never on the candidate), so these rounds measure the steady
state of a service that has already reviewed other candidates of the task: a search that is the first to try the
task's mutants pays for their runs in the first round only (the first round's figures are still printed apart).

A review with ``seed=None`` (a fresh secret seed each time) is always cold. The first review
of the run also pays for the sandbox zygote's start; it is a warm-up, reported separately.

With ``--compare-brief`` every candidate is also reviewed in the brief mode (``review(..., brief=True)``, what
a reward call without feedback runs: the differential check or its cause search left out where no outcome of
it can change the verdict, score or levels), right after its full review; the run ends with the warm review's
wall time over its simulation per role (expert, baseline, flawed, and with ``--hostile`` the adversarial
suite's candidates for the tasks) in both modes, and checks that every outcome is the same.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/review_throughput.py [--tasks a,b] [--repeat 2]
        [--hostile] [--compare-brief] [--compare-kept] [--compare-untrusted] [--compare-replay-worker]
        [--compare-judge] [--compare-search] [--compare-cost] [--no-gc-settle] [--alternate]

With several modes each candidate is reviewed in every mode, one mode after the other; ``--alternate`` runs every
other candidate's modes in the reverse order, so that no mode is always the one that meets a candidate first.
``--runs K`` (with ``--compare-untrusted``) runs the whole comparison K times in the one invocation and adds the
ratio of each candidate's median wall time over the runs: the reviews that take seconds (a cause search, a cold
CUDA run) move by up to half a second between the two pipelines' turns, the same work in both, which moves one
run's ratio by several per cent. With ``--alternate`` every other run reverses every candidate's order, so that over
an even number of runs each candidate meets each mode first equally often (one run alone would give a candidate the
same order in every run: a position effect on a long review would count against the same mode each time).

``--tasks`` also takes the CUDA port acceptance set's tasks by name (``rmsnorm_warp``, ``layernorm_block``, ...).
With ``--compare-kept`` every candidate is also reviewed by a judge that keeps the cause search's CUDA runs as
it did before ``review/stages/kept_runs.py`` (mode ``before-kept``: mutants' runs kept but not their timeouts,
the constant hypotheses' runs never) and by one that keeps none across reviews (mode ``unkept``); the run ends
with the warm review's wall time over its simulation per role for each against the full review.
The envelope's port-side ablations (``review/stages/port_ablate.py``) replay the candidate's recorded program,
which only trace-then-execute records: the untrusted pipeline cannot run them, so with ``--compare-untrusted`` the
full review does work the other does not (up to 1 s of CPU per review, e.g. about 0.2 s on a ``thread_port``
candidate). ``--no-port-ablations`` leaves them out of every mode: the like-for-like pipeline comparison.
With ``--compare-replay-worker`` every candidate is also reviewed by a judge that replays every case itself (mode
``no-replay-worker``: no second replay process, ``nkieval.review.replay_worker``); the run ends with the
throughput ratio of the full review to it, and with ``--compare-untrusted`` too, of it to the untrusted pipeline.
With ``--compare-defer`` every candidate is also reviewed with a tracer that runs every instruction it records
(mode ``no-defer``: the checks the judge's replay makes anyway are not left to it,
``nkieval.review.tracing.DEFER_CHECKS``); the run ends with the throughput ratio of the full review to it, with
``--compare-untrusted`` too of it to the untrusted pipeline, and checks that every report is the same in both.

With ``--compare-judge`` every candidate is also reviewed by the judge as it was before its candidate-dependent
work was trimmed (mode ``before-judge``: static analysis run again for a source already analysed, the port's
constants parsed again, the differential check's tolerance ratios through the NaN-aware path for every output,
the performance model's parameters read from the target's facts again by every estimate, check and pass, the
compiler model's DMA bytes summed twice per pass; not undone: the constant hypotheses' reuse of the review's
task fingerprint);
the run ends with the warm review's wall time over its simulation and the harness CPU per role in both modes,
and checks that every review's JSON report (all but its timings) is the same in both. ``--save-reports DIR``
writes each full review's report (timings left out) as JSON, ``--check-reports DIR`` compares each with the one
a run saved there (e.g. a run of an older checkout): the same verdicts, scores, levels and findings.

With ``--compare-search`` every candidate is also reviewed by the judge as it was before the cause search proved
loop-bound mutations endless without running them, the envelope's magnitude bands were folded by one sort and the
numerics binned z by a table lookup (mode ``before-search``); the run ends as with ``--compare-judge``.

With ``--compare-cost`` every candidate is also reviewed with the numerics' z statistic binned value by value as
before (mode ``before-cost``: the table lookup for every z instead of a histogram of keys and one quantile read
off the kept values); the run ends as with ``--compare-judge``.

After the warm-up the benchmark settles the garbage collector as a reward worker does after its first job
(``nkieval.reward.workers.settle_collector``: the warmed-up state frozen, full collections ten times rarer), so its
warm reviews are a warm worker's; ``--no-gc-settle`` leaves the collector as it was (the judge before that change).

Every run ends with the warm review's wall time over its simulation, and the harness CPU per review, per role and
per round (the first round: candidates not reviewed before; later rounds: the same candidates again).
With several modes, each mode meets a first-round candidate as new: the numerics' memo of judged outputs, the
static findings and the float constants kept per candidate source are forgotten before each of its reviews (the
cause search's CUDA runs are kept per mode), so the mode run second gets nothing from the first.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import nkieval.numerics.stream as numerics_stream
import nkieval.perf.params as perf_params
from nkieval.review import review, tracing
from nkieval.review.cache import CASE_CACHE, TRACES, CaseData
from nkieval.review.stages import clear_caches, differential, kept_runs, mutation_causes
from nkieval.review.stages import evidence as stage_evidence
from nkieval.review.stages.kept_runs import KeptRun, KeptRuns
from nkieval.reward.workers import WORKER_GC_THRESHOLDS, settle_collector
from nkieval.tasks import builtin_tasks, port_tasks

#: the module (``nkieval.perf.estimate`` as an attribute is the function of that name)
perf_estimate = sys.modules["nkieval.perf.estimate"]

# "where the time goes": the review's wall time, split into what happens one after the other
# (the critical path), then the worker thread's items, which overlap the child
_PATH = [
    ("before the sandbox", ["inputs_s", "setup_s"]),
    ("sandbox, harness side", ["sandbox_trace_s", "sandbox_prepare_s", "sandbox_fork_s", "sandbox_collect_s",
                               "sandbox_exit_s", "sandbox_cleanup_s"]),
    ("sandboxed child", ["child_setup_s", "child_load_s", "simulation_s", "child_post_s"]),
    ("after the child", ["reference_kernels_s", "worker_wait_s", "judge_after_sandbox_s", "differential_s",
                         "scoring_s"]),
]
#: (``sandbox_trace_s`` is the executor's wait for programs; the tracer's own time, most of it overlapping the
#: executor, is ``sandbox_trace_total_s``)
_WORKER = ["analysis_s", "prefetch_s", "numerics_s", "diagnosis_s", "reference_and_compare_s", "trace_parse_s",
           "sandbox_trace_total_s"]


def _summary(name: str, rows: list[tuple], wall: float) -> None:
    if not rows:
        return
    tot = sum(r[4] for r in rows)
    sim = sum(r[5] for r in rows)
    cpu = sum(r[6] for r in rows)
    n = len(rows)
    print(f"{name:<5} {n:4d} reviews  {60 * n / wall:7.1f} reviews/minute  overhead {1 - sim / max(tot, 1e-9):6.1%}  "
          f"mean review {tot / n:6.3f} s  simulation {sim / n:6.3f} s  harness CPU {cpu / n:6.3f} s "
          f"({cpu / max(sim, 1e-9):5.2f}x simulation)")


def _stages(kind: str, st: dict[str, float], n: int) -> None:
    tot = st.get("total_s", 0.0)
    if not tot:
        return
    print(f"where the time goes, {kind} ({n} reviews; sums, and share of the reviews' wall time):")
    print(f"  {'total_s':<26} {tot:8.3f} s  {1:6.1%}")
    path = 0.0
    for group, keys in _PATH:
        g = sum(st.get(k, 0.0) for k in keys)
        path += g
        print(f"  {group}: {g:.3f} s ({g / tot:.1%})")
        for k in keys:
            v = st.get(k, 0.0)
            print(f"    {k:<24} {v:8.3f} s  {v / tot:6.1%}")
    rest = tot - path
    print(f"  the rest (sandbox wait loop and wake-ups, thread hand-offs; collecting overlaps the child's next case, "
          f"so this can be below zero): {rest:.3f} s ({rest / tot:.1%})")
    print("  harness worker (overlaps the child; wall time in the worker and, after the child, the main thread):")
    for k in _WORKER:
        v = st.get(k, 0.0)
        print(f"    {k:<24} {v:8.3f} s  {v / tot:6.1%}")


#: the review modes a run can compare, each candidate reviewed in every mode one right after the other (so the
#: machine's load falls on all alike): the full review (the "before" of the brief mode), the brief review (what a
#: reward call without feedback runs) and the pipeline before trace-then-execute
MODES: dict[str, dict[str, bool]] = {"full": {}, "brief": {"brief": True}, "untrusted": {"trusted": False},
                                     "before": {}, "before-kept": {}, "unkept": {}, "before-judge": {},
                                     "no-replay-worker": {}, "before-search": {}, "before-cost": {}, "no-defer": {}}
#: mode "before" is the full review as the judge ran it before CUDA runs that timed out were kept as such
#: (``CaseData.timed_out_within``): each review paid for the same timeout again. Mode "before-kept" is the full
#: review as the judge ran it before the cause search's runs were kept by ``review/stages/kept_runs.py``: a
#: mutant's run kept unless it timed out, the constant hypotheses' runs never kept. Mode "unkept" keeps none of
#: the cause search's runs across reviews (each review's search runs its own). Mode "no-replay-worker" is the full
#: review with the judge replaying every case itself (``NKIEVAL_REPLAY_WORKER=0``: no second replay process).
ADVERSARIAL = Path(__file__).resolve().parents[1] / "tests" / "adversarial" / "candidates"


def candidates(t: Any, hostile: bool, exclude: tuple[str, ...] = ()) -> list[tuple[str, Path]]:
    """(role, file) for a task: its baseline (reviewed first: the cold review), expert solution and flawed kernels,
    and with ``hostile`` the adversarial suite's candidates written for it
    (``tests/adversarial/candidates/*/*_<task>.py``); files whose name contains one of ``exclude`` are left out."""
    out = [("baseline", t.baseline_file), ("expert", t.solution_file),
           *[("flawed", t.directory / fl.file) for fl in t.flawed]]
    if hostile:
        out += [("hostile", p) for p in sorted(ADVERSARIAL.glob(f"*/*_{t.id}.py"))]
    return [(role, f) for role, f in out if f is not None and not any(x in f.name for x in exclude)]


def _forget_judged_outputs() -> None:
    """Empty the numerics' memo of recently judged outputs (``PreparedCheck``: verdicts by the output's bytes) in
    every cached case: with several modes, a candidate's second review would otherwise get its verdicts back
    from its first one's and look cheaper than it is."""
    for data, _ in list(CASE_CACHE._d.values()):
        for check in [data.prepared, *(x for x, _ in data.extra_prepared.values())]:
            memo = getattr(check, "_memo", None)
            if memo is not None:
                memo.clear()


def _forget_candidate_sources() -> None:
    """Forget what the judge keeps per candidate source (its static findings, its float constants, its recorded
    programs): in the first round each mode must meet the candidate as new, as an RL loop meets a new candidate;
    otherwise the mode run second would get the first one's analysis and traces for free."""
    stage_evidence._STATIC.clear()
    differential._port_literals.cache_clear()
    TRACES.clear()


#: what the rounds after the first are called in the summaries (``--new-rounds``: new candidates)
LATER = ["repeated rounds"]

#: each mode's kept runs of the cause search in the last run
STORES: dict[str, KeptRuns] = {}


class _NoTimeouts(KeptRuns):
    """The cause search's kept runs as before ``kept_runs``: a run that timed out is not kept."""

    def put(self, key: Any, run: KeptRun) -> None:
        if run.timed_out_at is None:
            super().put(key, run)


def store_for_mode(mode: str) -> KeptRuns:
    """Each mode's own kept runs (each mode is a warm judge of its own: no mode gets another's runs)."""
    bound = kept_runs.KEPT_RUNS.max_bytes
    return _NoTimeouts(bound) if mode == "before-kept" else KeptRuns(bound)


@contextmanager
def kept_runs_mode(mode: str, store: KeptRuns) -> Iterator[None]:
    """``store`` as the process's kept runs; in mode "before-kept" the constant hypotheses' runs kept by none (each
    review's own store), in mode "unkept" every run of the cause search."""
    saved = kept_runs.KEPT_RUNS, differential.store_for, mutation_causes.store_for
    kept_runs.KEPT_RUNS = store
    if mode in ("before-kept", "unkept"):
        differential.store_for = lambda keep: kept_runs.store_for(False)  # type: ignore[assignment]
    if mode == "unkept":
        mutation_causes.store_for = lambda keep: kept_runs.store_for(False)  # type: ignore[assignment]
    try:
        yield
    finally:
        kept_runs.KEPT_RUNS, differential.store_for, mutation_causes.store_for = saved  # type: ignore[assignment]


def _tolerance_ratios_before(want: Any, got: Any, rtol: float, atol: float) -> tuple[Any, Any]:
    """``differential.tolerance_ratios`` as it was before its all-finite path (mode "before-judge")."""
    import numpy as np

    with np.errstate(all="ignore"):
        d = np.where((np.isnan(want) & np.isnan(got)) | (np.isinf(want) & (want == got)), 0.0, np.abs(got - want))
        d = np.where(np.isnan(d), np.inf, d)
        ratio = np.where(d == 0, 0.0, d / (atol + rtol * np.abs(np.where(np.isfinite(want), want, 0.0))))
    return d, ratio


def _run_passes_before(trace: Any, passes: Any, options: Any) -> Any:
    """The compiler model's ``run_passes`` as it was before each list was summed once (mode "before-judge")."""
    from nkieval.perf.compiler.model import CompilerReport, PassContext, PassReport, dma_bytes, rebuild

    records = list(trace.records)
    ctx = PassContext(trace)
    reports = []
    changed_any = False
    for p in passes:
        n0, b0 = len(records), dma_bytes(records)
        if not options.is_on(p):
            reports.append(PassReport(p.name, False, n0, n0, b0, b0, 0))
            continue
        ctx.notes, ctx.changed = [], 0
        records = p.run(records, ctx)
        changed_any = changed_any or ctx.changed > 0
        reports.append(PassReport(p.name, True, n0, len(records), b0, dma_bytes(records), ctx.changed,
                                  tuple(ctx.notes)))
    out = rebuild(trace, records, ctx.extend_free, ctx.extend_alloc) if changed_any else trace
    return out, CompilerReport(tuple(reports))


class _KeepNothing(dict):
    """A memo that keeps nothing (mode "before-judge": the performance parameters read for every estimate)."""

    def __setitem__(self, key: Any, value: Any) -> None:
        pass


class _KeepNoFindings(stage_evidence._KeptFindings):
    """Static findings kept by none: every review analyses its source again (mode "before-judge")."""

    def put(self, key: Any, findings: Any) -> None:
        pass


@contextmanager
def judge_mode(mode: str) -> Iterator[None]:
    """In mode "before-judge", the judge's candidate-dependent work as it was before it was trimmed: no static
    findings kept, the port's constants parsed in every review, tolerance ratios through the NaN-aware path, the
    performance parameters and their provenance tables read and built again for every estimate and check."""
    if mode != "before-judge":
        yield
        return
    compiler = sys.modules["nkieval.perf.compiler"]
    saved = (stage_evidence._STATIC, differential._port_literals, differential.tolerance_ratios,
             perf_params._DEFAULTS, perf_estimate._PROVENANCE, compiler.run_passes)
    stage_evidence._STATIC = _KeepNoFindings(0)
    differential._port_literals = differential._port_literals.__wrapped__  # type: ignore[assignment]
    differential.tolerance_ratios = _tolerance_ratios_before  # type: ignore[assignment]
    perf_params._DEFAULTS = _KeepNothing()
    perf_estimate._PROVENANCE = _KeepNothing()
    compiler.run_passes = _run_passes_before
    try:
        yield
    finally:
        (stage_evidence._STATIC, differential._port_literals, differential.tolerance_ratios,  # type: ignore
         perf_params._DEFAULTS, perf_estimate._PROVENANCE, compiler.run_passes) = saved


def _fold_bands_before(bands: dict[int, dict[str, Any]], g: Any, env: Any, obs: Any, gpu_err: Any,
                       port_err: Any) -> None:
    """``differential._fold_bands`` as it was before its one sort (mode "before-search"): a pass per band."""
    import numpy as np

    _, exps = np.frexp(g)
    exps = np.where(g == 0, differential.ZERO_BAND, exps)
    for x in np.unique(exps):
        sel = exps == x
        b = bands.setdefault(int(x), {"exponent": int(x), "elements": 0, "envelope": 0.0, "observed": 0.0,
                                      "gpu_error": 0.0, "port_error": 0.0})
        b["elements"] += int(sel.sum())
        for key, values in (("envelope", env), ("observed", obs), ("gpu_error", gpu_err), ("port_error", port_err)):
            b[key] = max(b[key], float(values[sel].max()))


@contextmanager
def search_mode(mode: str) -> Iterator[None]:
    """In mode "before-search", the cause search, the envelope's bands and the numerics' z histogram as they were
    before ``review/stages/endless_loops.py``, the bands' one sort and the z-bin lookup: every loop-bound mutation
    run (an endless one until its limit), a pass per magnitude band, every z bin through log10. Not undone: the
    envelope's differences computed once per pivot."""
    if mode != "before-search":
        yield
        return
    saved = mutation_causes.never_ends, numerics_stream._z_bins, differential._fold_bands, numerics_stream._Z_KEEP_MAX
    mutation_causes.never_ends = lambda text, m: False  # type: ignore[assignment]
    numerics_stream._z_bins = numerics_stream._z_bins_log10  # type: ignore[assignment]
    differential._fold_bands = _fold_bands_before  # type: ignore[assignment]
    numerics_stream._Z_KEEP_MAX = 0  # (every z binned, as then)
    try:
        yield
    finally:
        (mutation_causes.never_ends, numerics_stream._z_bins, differential._fold_bands,  # type: ignore[assignment]
         numerics_stream._Z_KEEP_MAX) = saved


@contextmanager
def cost_mode(mode: str) -> Iterator[None]:
    """In mode "before-cost", the numerics' z statistic as it was before its 99th percentile was read off kept
    values (``_Stream._fold_z_bins``; now counted against the bin thresholds, then their keys' histogram): every z
    value binned by the table lookup."""
    if mode != "before-cost":
        yield
        return
    saved = numerics_stream._Z_KEEP_MAX
    numerics_stream._Z_KEEP_MAX = 0
    try:
        yield
    finally:
        numerics_stream._Z_KEEP_MAX = saved


class ThreadClocks:
    """CPU seconds the judge's process spends in a few of its parts, as the thread CPU of each call summed over
    threads (on any load): ``replay``, the simulator's ``run_kernel`` replaying a program (the cases, the evidence
    case and the differential check's port runs); ``programs``, parsing and compiling the tracer's programs;
    ``worker``, the review's worker items in whichever thread runs them, among them ``analysis`` (static analysis),
    ``judge`` (a case's correctness and numerics verdict) and ``facts`` (the evidence trace's hardware evidence and
    performance estimate); ``tracer``, the thread that exchanges with
    the sandboxed tracer; ``differential``, the differential check with its port replays (so it overlaps
    ``replay``); ``score``, scoring and the report. A review's harness CPU less ``replay`` is the judge's own work."""

    NAMES = ("replay", "programs", "worker", "analysis", "judge", "facts", "tracer", "differential", "score")

    def __init__(self) -> None:
        import threading

        from nkieval.review import executor, pipeline, tracing
        from nkieval.review.stages import evidence, judge, overlap
        from nkieval.sim.program import replay

        self._lock = threading.Lock()
        self.cpu_s = dict.fromkeys(self.NAMES, 0.0)
        replay.run_kernel = self._timed("replay", replay.run_kernel)  # type: ignore[assignment]
        executor.PROGRAMS.get = self._timed("programs", executor.PROGRAMS.get)  # type: ignore[method-assign]
        overlap._Queue._run = staticmethod(self._timed("worker", overlap._Queue._run))  # type: ignore[method-assign]
        tracing.ProgramStream._run = self._timed("tracer", tracing.ProgramStream._run)  # type: ignore[method-assign]
        evidence.static_analysis = self._timed("analysis", evidence.static_analysis)  # type: ignore[assignment]
        evidence.trace_facts = self._timed("facts", evidence.trace_facts)  # type: ignore[assignment]
        judge.judge_case = self._timed("judge", judge.judge_case)  # type: ignore[assignment]
        pipeline.differential = self._timed("differential", pipeline.differential)  # type: ignore[assignment]
        for name in ("score", "report"):
            setattr(pipeline, name, self._timed("score", getattr(pipeline, name)))

    def _timed(self, name: str, fn: Any) -> Any:
        def timed(*args: Any, **kw: Any) -> Any:
            t0 = time.thread_time()
            try:
                return fn(*args, **kw)
            finally:
                with self._lock:
                    self.cpu_s[name] += time.thread_time() - t0
        return timed

    def snapshot(self) -> dict[str, float]:
        with self._lock:
            return dict(self.cpu_s)


CLOCKS: ThreadClocks | None = None


def report_outcome(r: Any) -> dict[str, Any]:
    """The review's JSON report without what measures time (its timings, each case's simulation seconds): what
    two judges that agree produce alike."""
    d = r.to_dict()
    d.pop("timings", None)
    for c in d.get("cases", []):
        for k in [k for k in c if k.endswith("_s")]:
            del c[k]
    return d


def _report_digest(d: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()


@contextmanager
def _kept_timeouts(on: bool) -> Iterator[None]:
    """With ``on`` False, the review ignores kept CUDA timeouts (mode "before")."""
    if on:
        yield
        return
    kept = CaseData.timed_out_within
    CaseData.timed_out_within = lambda self, key, limit_s: None  # type: ignore[method-assign]
    try:
        yield
    finally:
        CaseData.timed_out_within = kept  # type: ignore[method-assign]


@contextmanager
def _deferred_checks(on: bool) -> Iterator[None]:
    """With ``on`` False, the tracer runs every instruction it records (mode "no-defer": the tracer before it left
    the checks the judge's replay makes anyway to the replay, ``nkieval.review.tracing.DEFER_CHECKS``)."""
    saved = tracing.DEFER_CHECKS[0]
    tracing.DEFER_CHECKS[0] = on
    try:
        yield
    finally:
        tracing.DEFER_CHECKS[0] = saved


@contextmanager
def _replay_worker(on: bool) -> Iterator[None]:
    """With ``on`` False, the judge replays every case itself (mode "no-replay-worker")."""
    saved = os.environ.get("NKIEVAL_REPLAY_WORKER")
    os.environ["NKIEVAL_REPLAY_WORKER"] = "1" if on else "0"
    try:
        yield
    finally:
        if saved is None:
            del os.environ["NKIEVAL_REPLAY_WORKER"]
        else:
            os.environ["NKIEVAL_REPLAY_WORKER"] = saved


def _run(tasks: list, repeat: int, modes: tuple[str, ...], hostile: bool = False, verbose: bool = True,
         exclude: tuple[str, ...] = (), reports: dict[str, dict[str, Any]] | None = None, alternate: bool = False,
         flip: bool = False, new_rounds: bool = False) -> dict[str, tuple[list[tuple], dict, dict]]:
    """Review every candidate in every mode. Rows: (cold|warm, role, task, file, total_s, simulation_s, harness
    CPU, verdict, wall, (verdict, score, levels), round, digest of the report without timings, CPU of the parts that
    :class:`ThreadClocks` times); per mode
    also the
    wall time per kind and the stage sums per kind and per warm role. ``reports``: each mode "full" review's report
    without timings, by "task/file/round", filled in. ``flip`` (with ``alternate``): every candidate's modes in the
    reverse of the order a run without it gives them (every other run of ``--runs``, so that each candidate meets
    each mode first in alternate runs). ``new_rounds``: every round after the first reviews each candidate as a new
    one (:func:`_as_new`)."""
    out: dict[str, tuple[list[tuple], dict, dict]] = {
        m: ([], {"cold": 0.0, "warm": 0.0}, {}) for m in modes}
    # the judge's cause search keeps CUDA runs across reviews (candidate-independent work): each mode keeps its
    # own, so no mode pays for, or profits from, another's search
    stores = STORES
    stores.update({m: store_for_mode(m) for m in modes})
    n = 0  # (candidates reviewed: with ``alternate``, an odd one's modes run in the reverse order)
    for t in tasks:
        first = dict.fromkeys(modes, True)
        for round_ in range(repeat):
            for role, f in candidates(t, hostile, exclude):
                n += 1
                for mode in (modes[::-1] if alternate and n % 2 == int(flip) else modes):
                    rows, walls, stages = out[mode]
                    kind = "cold" if first[mode] else "warm"
                    if first[mode]:
                        clear_caches()
                        stores[mode].clear()
                    first[mode] = False
                    if len(modes) > 1 or (new_rounds and round_ > 0):
                        _forget_judged_outputs()
                        if round_ == 0 or new_rounds:
                            _forget_candidate_sources()
                    k0 = CLOCKS.snapshot() if CLOCKS is not None else {}
                    c0, w0 = time.process_time(), time.perf_counter()
                    with _kept_timeouts(mode != "before"), kept_runs_mode(mode, stores[mode]), judge_mode(mode), \
                            _replay_worker(mode != "no-replay-worker"), search_mode(mode), cost_mode(mode), \
                            _deferred_checks(mode != "no-defer"):
                        r = review(t, _as_new(f, round_) if new_rounds else f, seed=1, **MODES[mode])
                    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
                    parts = {k: v - k0[k] for k, v in CLOCKS.snapshot().items()} if CLOCKS is not None else {}
                    rep = report_outcome(r)
                    if reports is not None and mode == "full":
                        reports[f"{t.id}/{f.name}/{round_}"] = rep
                    walls[kind] += wall
                    tm = r.timings
                    tot, sim = tm["total_s"], tm["simulation_s"]
                    outcome = (r.verdict, r.score, tuple((c.id, c.level) for c in r.criteria))
                    rows.append((kind, role, t.id, f.name, tot, sim, cpu, r.verdict, wall, outcome, round_,
                                 _report_digest(rep), parts))
                    for group in (kind, f"{kind}/{role}"):
                        st = stages.setdefault(group, {})
                        for k, v in tm.items():
                            st[k] = st.get(k, 0.0) + v
                    child = tm.get("child_setup_s", 0.0) + tm.get("child_load_s", 0.0) + tm.get("child_post_s", 0.0)
                    if verbose:
                        print(f"{mode:<9} {kind} {role:<8} {t.id:<16} {f.name[:34]:<34} {r.verdict:<17} {wall:6.3f} s  "
                              f"simulation {sim:6.3f} s  review/simulation {wall / max(sim, 1e-9):6.1f}x  harness CPU "
                              f"{cpu:6.3f} s  child around sim {child:6.3f} s  trace wait "
                              f"{tm.get('sandbox_trace_s', 0.0):6.3f} s (tracer {tm.get('sandbox_trace_total_s', 0.0):6.3f}"
                              f" s)  differential {tm.get('differential_s', 0.0):6.3f} s  tail "
                              f"{tm.get('worker_wait_s', 0.0):6.3f} s", flush=True)
    return out


def _as_new(f: Path, round_: int) -> str | Path:
    """The candidate of a later ``--new-rounds`` round: its source with the round's comment appended (the same
    kernel, lines and outputs; a new source to every cache keyed by it)."""
    return f if round_ == 0 else f.read_text() + f"\n# benchmark round {round_}: a new candidate\n"


def _per_role(rows: list[tuple], kind: str = "warm") -> dict[str, tuple[int, float, float, float]]:
    """Per role of the ``kind`` rows: (reviews, wall, simulation, harness CPU) sums."""
    by: dict[str, tuple[int, float, float, float]] = {}
    for r in rows:
        if r[0] != kind:
            continue
        n, w, s, c = by.get(r[1], (0, 0.0, 0.0, 0.0))
        by[r[1]] = (n + 1, w + r[8], s + r[5], c + r[6])
    return by


def _line(role: str, f: tuple[int, float, float, float], b: tuple[int, float, float, float], a_name: str,
          b_name: str) -> None:
    (n, fw, fs, fc), (_, bw, bs, bc) = f, b
    print(f"  {role:<8} {n:3d} reviews  {a_name} {fw / max(fs, 1e-9):6.2f}x ({fw:7.2f} s / {fs:6.2f} s)  {b_name} "
          f"{bw / max(bs, 1e-9):6.2f}x ({bw:7.2f} s / {bs:6.2f} s)  {b_name} wall / {a_name} wall "
          f"{bw / max(fw, 1e-9):5.2f}  harness CPU {a_name} {fc:6.2f} s {b_name} {bc:6.2f} s")


def _brief_vs_full(res: dict[str, tuple[list[tuple], dict, dict]], a: str = "full", b: str = "brief") -> None:
    """The warm review's wall time over its simulation, per role, for modes ``a`` (printed "full") and ``b``
    (printed "brief") on the same candidates in this run; and whether every outcome (verdict, score, levels) is
    the same."""
    full, brief = res[a][0], res[b][0]
    rounds = max((r[10] for r in full), default=0) + 1
    for first, last, which in ((0, rounds, ""), *(((0, 1, ", first round"), (1, rounds, f", {LATER[0]}"))
                                                  if rounds > 1 else ())):
        pick_f = [r for r in full if first <= r[10] < last]
        pick_b = [r for r in brief if first <= r[10] < last]
        print(f"\nwarm review wall time / simulation, per role{which}, mode {a} against mode {b} (the same "
              "candidates, reviewed in both modes in this run):")
        f_roles, b_roles = _per_role(pick_f), _per_role(pick_b)
        tot = {"full": [0, 0.0, 0.0, 0.0], "brief": [0, 0.0, 0.0, 0.0]}
        for role in [r for r in ("expert", "baseline", "flawed", "hostile") if r in f_roles]:
            for name, row in (("full", f_roles[role]), ("brief", b_roles[role])):
                tot[name] = [x + y for x, y in zip(tot[name], row)]
            _line(role, f_roles[role], b_roles[role], a, b)
        _line("all", tuple(tot["full"]), tuple(tot["brief"]), a, b)  # type: ignore[arg-type]
    print("  (harness CPU: this process's CPU, the judge's own work; the sandboxed tracer and executor are the same "
          "in both modes. On a loaded machine, wall times vary with the load; CPU does not)")
    same = sum(1 for x, y in zip(full, brief) if x[9] == y[9])
    print(f"outcomes (verdict, score, every level) equal in modes {a} and {b}: {same} of {len(full)}")
    for x, y in zip(full, brief):
        if x[9] != y[9]:
            print(f"  DIFFERENT: {x[2]}/{x[3]}: {a} {x[9]} {b} {y[9]}")


def _per_round(rows: list[tuple]) -> None:
    """Warm wall / simulation, harness CPU per review, the replays' share of it and the judge's own CPU (harness
    CPU less the replays), and the CPU of each timed part, per role and round (first round, later rounds)."""
    rounds = max((r[10] for r in rows), default=0) + 1
    print("\nwarm review wall time / simulation; per review: harness CPU, the replays' CPU in it (cases, evidence, "
          "port runs), the rest (the judge's own work), harness CPU / replay CPU; then the CPU per review of each "
          "part benchmarks/review_throughput.py ThreadClocks times (differential includes its port replays):")
    for first, last, which in ((0, 1, "first round"), *(((1, rounds, LATER[0]),) if rounds > 1 else ())):
        pick = [r for r in rows if first <= r[10] < last and r[0] == "warm"]
        by = _per_role(pick)
        for role in [r for r in ("expert", "baseline", "flawed", "hostile") if r in by]:
            n, w, s, c = by[role]
            parts = {k: sum(r[12].get(k, 0.0) for r in pick if r[1] == role) for k in ThreadClocks.NAMES}
            rep = parts["replay"]
            print(f"  {which:<15} {role:<8} {n:3d} reviews  {w / max(s, 1e-9):6.2f}x ({w:7.2f} s / {s:6.2f} s)  "
                  f"harness CPU {c / n:6.3f} s  replay CPU {rep / n:6.3f} s  judge's own CPU {(c - rep) / n:6.3f} s  "
                  f"CPU / replay CPU {c / max(rep, 1e-9):5.2f}x")
            print("  " + " " * 30 + "  ".join(f"{k} {v / n:6.3f} s" for k, v in parts.items() if k != "replay"))


def _same_reports(res: dict[str, tuple[list[tuple], dict, dict]], a: str, b: str) -> None:
    """Whether every review's report (all but timings) is the same in modes ``a`` and ``b``."""
    ra, rb = res[a][0], res[b][0]
    same = sum(1 for x, y in zip(ra, rb) if x[11] == y[11])
    print(f"reports (all but timings: verdict, score, levels, findings, evidence) equal in modes {a} and {b}: "
          f"{same} of {len(ra)}")
    for x, y in zip(ra, rb):
        if x[11] != y[11]:
            print(f"  DIFFERENT: {x[2]}/{x[3]} round {x[10]}")


def _check_reports(saved_dir: Path, reports: dict[str, dict[str, Any]]) -> None:
    """Compare this run's reports with those a run saved in ``saved_dir``."""
    same, differ, missing = 0, [], 0
    for key, rep in reports.items():
        p = saved_dir / (key.replace("/", "__") + ".json")
        if not p.exists():
            missing += 1
            continue
        old = json.loads(p.read_text())
        if old == json.loads(json.dumps(rep, default=str)):
            same += 1
        else:
            differ.append(key)
    print(f"reports equal to the saved ones in {saved_dir.name}: {same} of {len(reports)} ({missing} not saved there)")
    for key in differ:
        print(f"  DIFFERENT: {key}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", default="")
    ap.add_argument("--repeat", type=int, default=1, help="rounds over each task's candidates (all but the first "
                    "review of a task are warm)")
    ap.add_argument("--new-rounds", action="store_true",
                    help="with --repeat N: every later round reviews each candidate as a new one (its source with a "
                         "comment appended, the numerics' memo of judged outputs emptied), the steady state of a "
                         "service that has reviewed other candidates of the task")
    ap.add_argument("--hostile", action="store_true", help="also review the adversarial suite's candidates written "
                    "for the tasks (role hostile)")
    ap.add_argument("--compare-brief", action="store_true",
                    help="also run the brief review (review(..., brief=True), a reward without feedback) of every "
                         "candidate in the same run and print review / simulation per role for both")
    ap.add_argument("--exclude", default="", help="comma-separated parts of candidate file names to leave out (e.g. "
                    "sleep_timeout: a candidate that sleeps past its time limit costs the limit in every mode)")
    ap.add_argument("--compare-before", action="store_true",
                    help="also run the full review as it was before kept CUDA timeouts (mode before) and compare the "
                         "brief review with it")
    ap.add_argument("--compare-kept", action="store_true",
                    help="also run the full review as it was before the cause search's CUDA runs were kept with "
                         "their timeouts and constant hypotheses (mode before-kept) and with no run kept across "
                         "reviews (mode unkept), and compare the full review with each")
    ap.add_argument("--compare-untrusted", action="store_true",
                    help="also run the pipeline before trace-then-execute (review(..., trusted=False)) in the same "
                         "run and print the throughput ratio")
    ap.add_argument("--compare-replay-worker", action="store_true",
                    help="also run the full review with the judge replaying every case itself (no replay worker, "
                         "NKIEVAL_REPLAY_WORKER=0) in the same run and print the throughput ratio")
    ap.add_argument("--compare-defer", action="store_true",
                    help="also run the full review with the tracer running every instruction it records (mode "
                         "no-defer: no checks deferred to the judge's replay) in the same run, print the throughput "
                         "ratio and check that every review's report is the same in both")
    ap.add_argument("--compare-judge", action="store_true",
                    help="also run the judge as it was before its candidate-dependent work was trimmed (mode "
                         "before-judge) and compare wall / simulation, harness CPU and every report")
    ap.add_argument("--compare-search", action="store_true",
                    help="also run the cause search, the envelope's bands and the z histogram as they were before "
                         "the endless-loop proof, the bands' sort and the z-bin lookup (mode before-search) and "
                         "compare wall / simulation, harness CPU and every report")
    ap.add_argument("--compare-cost", action="store_true",
                    help="also run the numerics with every z value binned as before the 99th percentile was read "
                         "off kept values (mode before-cost) and compare wall / simulation, harness CPU and every "
                         "report")
    ap.add_argument("--save-reports", type=Path, default=None,
                    help="write each full review's report (timings left out) as JSON into this folder")
    ap.add_argument("--check-reports", type=Path, default=None,
                    help="compare each full review's report (timings left out) with the one saved in this folder")
    ap.add_argument("--alternate", action="store_true",
                    help="run every other candidate's modes in the reverse order, so that no mode is always the one "
                         "reviewed first (the mode reviewed second meets the candidate in a warmer machine)")
    ap.add_argument("--no-port-ablations", action="store_true",
                    help="every mode without the envelope's port-side ablations (issue 27: the candidate's recorded "
                         "program replayed with a rounding source removed, which only trace-then-execute has): the "
                         "like-for-like comparison with --compare-untrusted")
    ap.add_argument("--executor-budget", type=float, default=None,
                    help="seconds of CUDA executor time per review for the differential check (default: the "
                         "judge's); a tighter budget makes CUDA runs time out as on a loaded machine")
    ap.add_argument("--runs", type=int, default=1,
                    help="with --compare-untrusted: run the whole comparison this many times in this invocation (each "
                         "from cleared caches, as the first) and also print the ratio of the per-candidate medians "
                         "over the runs, which a single long review's noise (a cause search or a cold CUDA run "
                         "moving by half a second between the two pipelines' turns) moves less than one run's")
    ap.add_argument("--no-gc-settle", action="store_true",
                    help="leave the garbage collector as the process had it (no gc.freeze of the warmed-up state, "
                         "CPython's thresholds): the judge before reward workers settled it")
    args = ap.parse_args()
    if args.new_rounds:
        LATER[0] = "new-candidate rounds"
    if args.executor_budget is not None:
        differential.EXECUTOR_BUDGET_S = args.executor_budget
    if args.no_port_ablations:
        differential._port_side = lambda *a, **k: ({}, {})  # (as a review without a recorded program: none)
        print("every mode without the envelope's port-side ablations (--no-port-ablations)")
    want = set(filter(None, args.tasks.split(",")))
    tasks = [t for t in builtin_tasks() if not want or t.id in want]
    tasks += [t for t in port_tasks() if t.id in want]  # (the CUDA port acceptance set, by name only)
    global CLOCKS
    CLOCKS = ThreadClocks()
    t0 = time.perf_counter()
    warm = review(tasks[0], tasks[0].solution_file, seed=12345)
    review(tasks[0], tasks[0].solution_file, seed=12345, trusted=False)
    print(f"warm-up (zygote and sandbox start + first reviews): {time.perf_counter() - t0:.2f} s ({warm.task})")
    if not args.no_gc_settle:
        settle_collector()  # (as a reward worker after its first job: the long-lived state frozen)
        print("garbage collector settled as in a reward worker (gc.freeze, thresholds "
              f"{WORKER_GC_THRESHOLDS}; --no-gc-settle leaves it as it was)")
    modes = ("full", *(("brief",) if args.compare_brief else ()), *(("before",) if args.compare_before else ()),
             *(("before-kept", "unkept") if args.compare_kept else ()),
             *(("untrusted",) if args.compare_untrusted else ()), *(("before-judge",) if args.compare_judge else ()),
             *(("no-replay-worker",) if args.compare_replay_worker else ()),
             *(("no-defer",) if args.compare_defer else ()),
             *(("before-search",) if args.compare_search else ()),
             *(("before-cost",) if args.compare_cost else ()))
    reports: dict[str, dict[str, Any]] = {}
    res = _run(tasks, args.repeat, modes, args.hostile, exclude=tuple(filter(None, args.exclude.split(","))),
               reports=reports, alternate=args.alternate, new_rounds=args.new_rounds)
    rows, walls, _ = res["full"]
    print()
    _summary("cold", [r for r in rows if r[0] == "cold"], walls["cold"])
    _summary("warm", [r for r in rows if r[0] == "warm"], walls["warm"])
    _summary("all", rows, walls["cold"] + walls["warm"])
    print("(target: overhead <= 20% of review time)")
    for mode in modes[:2]:
        for group in ["cold", "warm", *(f"warm/{role}" for role in ("expert", "baseline", "flawed", "hostile"))]:
            st = res[mode][2].get(group)
            if st:
                _stages(f"{mode} review, {group}", st, sum(1 for r in res[mode][0] if group in (r[0], f"{r[0]}/{r[1]}")))
    print(f"case cache: {CASE_CACHE.stats()}")
    print(f"recorded programs kept (tracer runs saved by a repeated source): {TRACES.stats()}")
    if args.compare_brief:
        _brief_vs_full(res)
        if args.compare_before:
            _brief_vs_full(res, "before", "brief")
    if args.compare_before:
        _brief_vs_full(res, "before", "full")
    if args.compare_kept:
        _brief_vs_full(res, "before-kept", "full")
        _brief_vs_full(res, "unkept", "full")
        print(f"kept runs of the cause search (mode full): {STORES['full'].stats()}")
    if args.compare_judge:
        _brief_vs_full(res, "before-judge", "full")
        _per_round(res["before-judge"][0])
        _same_reports(res, "before-judge", "full")
    if args.compare_search:
        _brief_vs_full(res, "before-search", "full")
        _per_round(res["before-search"][0])
        _same_reports(res, "before-search", "full")
    if args.compare_cost:
        _brief_vs_full(res, "before-cost", "full")
        _per_round(res["before-cost"][0])
        _same_reports(res, "before-cost", "full")
    print("\nmode full:", end="")
    _per_round(rows)
    if args.compare_brief:
        print("\nmode brief:", end="")
        _per_round(res["brief"][0])
    if args.save_reports is not None:
        args.save_reports.mkdir(parents=True, exist_ok=True)
        for key, rep in reports.items():
            (args.save_reports / (key.replace("/", "__") + ".json")).write_text(
                json.dumps(rep, sort_keys=True, indent=1, default=str))
    if args.check_reports is not None:
        _check_reports(args.check_reports, reports)
    if args.compare_untrusted:
        _throughput_ratio(res, "untrusted", "trace-then-execute / before")
        if args.runs > 1:
            runs = [res]
            for k in range(1, args.runs):
                print(f"\nrun {k + 1} of {args.runs}")
                runs.append(_run(tasks, args.repeat, modes, args.hostile,
                                 exclude=tuple(filter(None, args.exclude.split(","))), alternate=args.alternate,
                                 flip=k % 2 == 1, new_rounds=args.new_rounds))
                _throughput_ratio(runs[-1], "untrusted", f"trace-then-execute / before (run {k + 1})")
            _median_ratio(runs, "untrusted", "trace-then-execute / before")
    if args.compare_defer:
        _throughput_ratio(res, "no-defer", "checks deferred to the replay / run in the tracer")
        _same_reports(res, "no-defer", "full")
        if args.compare_untrusted:
            _throughput_ratio(res, "untrusted", "checks run in the tracer / before", new="no-defer")
    if args.compare_replay_worker:
        _throughput_ratio(res, "no-replay-worker", "with the replay worker / without")
        if args.compare_untrusted:
            _throughput_ratio(res, "untrusted", "without the replay worker / before", new="no-replay-worker")


def _throughput_ratio(res: dict[str, Any], old: str, what: str, new: str = "full") -> None:
    """Reviews per minute of mode ``new`` over mode ``old`` (cold, warm, all), and how many verdicts are equal."""
    rows, walls, _ = res[new]
    old_rows, old_walls, _ = res[old]
    print()
    _summary(old, old_rows, old_walls["cold"] + old_walls["warm"])
    for kind in ("cold", "warm", "all"):
        new_w = walls["cold"] + walls["warm"] if kind == "all" else walls[kind]
        old_w = old_walls["cold"] + old_walls["warm"] if kind == "all" else old_walls[kind]
        if new_w and old_w:
            print(f"throughput ratio {kind}: {what} = {old_w / new_w:.2f}x "
                  f"(reviews per minute; {new_w:.1f} s vs {old_w:.1f} s)")
    same = sum(1 for a, b in zip(rows, old_rows) if a[7] == b[7])
    print(f"verdicts equal in modes {new} and {old}: {same} of {len(rows)}")


def _median_ratio(runs: list[dict[str, Any]], old: str, what: str, new: str = "full") -> None:
    """The throughput ratio of mode ``new`` over ``old`` from each candidate's median wall time over the runs (cold,
    warm, all): every run reviews the same candidates in the same order, so a review is matched with its own
    repetitions; one run's outlier (a long review slowed in one pipeline's turn) no longer decides the figure."""
    def medians(mode: str) -> dict[tuple[Any, ...], float]:
        walls: dict[tuple[Any, ...], list[float]] = {}
        for res in runs:
            for r in res[mode][0]:
                walls.setdefault((r[0], r[1], r[2], r[3], r[10]), []).append(r[8])
        return {k: statistics.median(v) for k, v in walls.items()}

    a, b = medians(new), medians(old)
    print(f"\nover {len(runs)} runs, each candidate's median wall time:")
    for kind in ("cold", "warm", "all"):
        keys = [k for k in a if k in b and kind in ("all", k[0])]
        new_w, old_w = sum(a[k] for k in keys), sum(b[k] for k in keys)
        if new_w and old_w:
            print(f"throughput ratio {kind} (medians): {what} = {old_w / new_w:.2f}x "
                  f"({len(keys)} reviews; {new_w:.1f} s vs {old_w:.1f} s)")


if __name__ == "__main__":
    main()
