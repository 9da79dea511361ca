"""The judge's executor: each case's recorded program replayed on the case's real inputs, in the judge's process.

A program is data, not code: the tracer's document is parsed and checked against the program format
(:mod:`nkieval.sim.program`), every name in it is looked up in the simulator's registries, and every view is
checked against its allocation before it is made. Replaying it runs only the simulator, so no candidate code
runs here. What a child process gave the old executor, the run's own budgets give this one: the instruction
budget (``max_instructions``), the case's time limit (``time_limit_s``, checked at every instruction and
device-loop iteration) and its memory limit (``max_bytes``, counted over the tensors the run holds). A
run past one of them ends with the status a killed child got (``instruction-limit``, ``timeout``,
``memory-limit``).

In-process, a case costs the replay alone: no fork, no input or output files, and the evidence case's trace is
handed over as the object the judge reads (not encoded and parsed again). Parsed programs are kept by their bytes
for the review's later runs of the same shape (the evidence and differential stages).
"""

from __future__ import annotations

import gc
import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

import nkieval.frontends.beta1.elide  # noqa: F401  (the Beta-1 note hooks a program may name)
from nkieval.review import replay_worker
from nkieval.review.child import GC_THRESHOLDS, _check_outputs, _error, _unwritten_masks
from nkieval.review.isolation.starvation import starved_process
from nkieval.review.replay_worker import Job
from nkieval.review.runs import ERROR_FIELDS, STATUSES, CaseJob, CaseRun, SandboxLimits, skipped

if TYPE_CHECKING:
    from nkieval.review.tracing import ProgramStream
    from nkieval.sim.options import SimOptions

#: parsed programs kept (a review replays each of its shapes' programs in two or three stages)
_KEPT_PROGRAMS = 32
#: the budget statuses: what a child killed at the same limit was reported as
_BUDGET_STATUS = {"instruction-budget": "instruction-limit", "time-budget": "timeout", "memory-budget": "memory-limit"}


class _Programs:
    """Compiled programs by the digest of their text (least recently used dropped first; thread-safe)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._kept: OrderedDict[bytes, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, text: str | bytes, digest: bytes | None = None) -> Any:
        """The compiled program of the document ``text`` (bytes, as the tracer sends it, or the string);
        ``digest``: its :func:`program_digest`, where the caller has it already."""
        from nkieval.sim.program import Program, compile_program

        data = text if isinstance(text, bytes) else text.encode()
        key = digest if digest is not None else program_digest(data)
        with self._lock:
            prog = self._kept.get(key)
            if prog is not None:
                self._kept.move_to_end(key)
                return prog
        # Parsing and compiling make a large tree with no cycles: with the collector off meanwhile, no collection
        # walks it half-built (each would find nothing to free).
        enabled = gc.isenabled()
        gc.disable()
        try:
            prog = Program.from_json(data)
            compile_program(prog)
        finally:
            if enabled:
                gc.enable()
        with self._lock:
            self._kept[key] = prog
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)
        return prog


def program_digest(data: bytes) -> bytes:
    """What programs are kept by: a digest of the program document's bytes."""
    return hashlib.blake2b(data, digest_size=16).digest()


PROGRAMS = _Programs(_KEPT_PROGRAMS)


def replay_as_traced(stream: ProgramStream, cases: Sequence[CaseJob], target: str, limits: SandboxLimits,
                     finish: Callable[[int, CaseRun], None], st: dict[str, float]) -> None:
    """Each shape's cases, in the order the shapes are traced, as soon as the shape's program is in (the tracer
    meanwhile records the next shape). A shape whose trace failed fails its cases with the tracer's record; a
    case that runs out of time skips every case not run yet (a kernel that hangs on one shape almost always
    hangs on the next).

    Where the replay worker (:mod:`nkieval.review.replay_worker`) runs, a shape without the evidence case goes
    to it whole (``_InWorker``): the judge neither parses nor replays it, and its interpreter is left to judging
    and to the evidence shape. The evidence shape is the judge's: its traced case here, and, for a static
    program, its later cases without a trace, in the worker once the tracer is done (``_offload``)."""
    from nkieval.sim.program import is_static

    group = replay_worker.Group()
    finish = _one_at_a_time(finish)  # (the worker's thread passes its runs on too)
    in_worker = _InWorker(cases, target, limits, finish, group)
    hung: str | None = None
    for key in stream.order:
        ks = [k for k, kk in enumerate(stream.keys) if kk == key]
        hung = hung or in_worker.collect_ready()
        if hung is not None:
            for k in ks:
                finish(k, skipped(cases[k].label, hung))
            continue
        t_wait = time.perf_counter()
        res = stream.get(key)
        st["trace_s"] += time.perf_counter() - t_wait
        if res.get("status") != "ok" or not isinstance(res.get("program"), bytes):
            for k in ks:
                finish(k, traced_failure(cases[k].label, res))
            continue
        order = _traced_first(ks, cases)
        if not cases[order[0]].want_trace and in_worker.send(res["program"], order):
            continue
        # Once the tracer has recorded every shape its core is free: if the replay worker is idle, the shape's
        # later cases go to it now, before the judge parses the program (the worker parses it too, meanwhile);
        # they are taken back if the program turns out not to be static (every case is then traced) or not to
        # parse. A busy worker would parse the program again only to start them after its queue, where the judge,
        # with the program parsed, replays them once its traced case is done.
        jobs = _offload(res["program"], [cases[k] for k in order[1:]], target, limits, group) \
            if stream.all_traced() and _worker_idle() else {}
        t_load = time.perf_counter()
        try:
            prog = PROGRAMS.get(res["program"])
        except Exception as e:  # (ProgramError, or what a malformed document makes the parser raise)
            _take_back(jobs)
            for k in ks:
                finish(k, _failed("bad-program", e, cases[k].label))
            continue
        load_s = time.perf_counter() - t_load
        if jobs and not is_static(prog):
            _take_back(jobs)
            jobs = {}
        hung = _replay_shape(prog, order, cases, jobs, target, limits, finish, load_s)
        if hung is not None and group.hung is None:
            group.hung = hung
    in_worker.finish_all(hung)


class _InWorker:
    """The shapes a review replays whole in the replay worker, each case's run passed on as it comes in.

    Each shape's first case is sent ``traced``, the others ``auto`` (see :mod:`nkieval.review.replay_worker`).
    A run the worker answers is passed on at once, in the order sent, from the worker's own thread (a done
    callback), so the judge starts on it while this thread still replays the evidence shape; a job the worker
    failed is left to this thread, which replays it (the worker's thread never replays). Once the judge has
    nothing else to replay it takes back the jobs not yet sent, from the last one (the worker works from the
    first), and replays those itself."""

    def __init__(self, cases: Sequence[CaseJob], target: str, limits: SandboxLimits,
                 finish: Callable[[int, CaseRun], None], group: replay_worker.Group) -> None:
        self.cases, self.target, self.limits, self.finish, self.group = cases, target, limits, finish, group
        #: (case index, job, the shape's program) in the order sent; passed-on ones removed (under ``_lock``)
        self.pending: list[tuple[int, Job, _Shape]] = []
        self._lock = threading.Lock()
        #: what passing a run on raised in the worker's thread (raised again in this one, by ``finish_all``)
        self._error: BaseException | None = None

    def send(self, program: bytes, order: list[int]) -> bool:
        """Whether the shape's cases (``order``: the first one traced) all went to the worker."""
        w = replay_worker.worker()
        if w is None:
            return False
        shape = _Shape(program)
        sent: list[tuple[int, Job, _Shape]] = []
        for i, k in enumerate(order):
            job = w.submit(program, self.cases[k], self.target, self.limits, mode="auto" if i else "traced",
                           group=self.group)
            if job is None:  # (no worker after all: the judge replays the shape, and these are never sent)
                for _, j, _ in sent:
                    j.take_back()
                return False
            sent.append((k, job, shape))
        with self._lock:
            self.pending.extend(sent)
        for _, job, _ in sent:
            job.future.add_done_callback(self._answered)
        return True

    def _answered(self, _: object) -> None:
        """A job's future is done (in the worker's thread): pass on what is ready."""
        try:
            self._pass_on(replay_here=False)
        except BaseException as e:  # (the judge's own fault; never lost in the worker's thread)
            self._error = self._error or e

    def collect_ready(self) -> str | None:
        """The runs the worker has finished, passed on in the order sent; the label of a case that ran out of
        time, if one did."""
        self._pass_on(replay_here=True)
        return self.group.hung

    def _pass_on(self, replay_here: bool) -> None:
        """The answered runs at the head of the order sent. A failed job stops the worker's thread there; this
        thread (``replay_here``) replays it, outside the lock, so the worker's thread is never held up."""
        while True:
            with self._lock:
                if not self.pending or not self.pending[0][1].future.done():
                    return
                item = self.pending[0]
                failed = item[1].future.exception() is not None
                if failed and not replay_here:
                    return
                self.pending.pop(0)
                if not failed:
                    self._collect(*item)
                    continue
            self._here(*item)

    def finish_all(self, hung: str | None) -> None:
        """Every pending case: the unsent ones taken back and replayed here (or skipped after a hang), the last
        first; then the worker's, in order."""
        if hung is not None and self.group.hung is None:
            self.group.hung = hung
        with self._lock:
            items, self.pending = self.pending, []
        for item in reversed(items):
            if item[1].take_back():
                self._here(*item)
        for item in items:
            if not item[1].take_back():
                self._collect(*item)
        if self._error is not None:
            raise self._error

    def _collect(self, k: int, job: Job, shape: _Shape) -> None:
        try:
            run = job.result()
        except replay_worker.WorkerFailed:
            self._here(k, job, shape)
            return
        if run.status == "ok" and run.n_instructions is not None and shape.like is None:
            shape.like = counts_of(run)
        self.finish(k, run)

    def _here(self, k: int, job: Job, shape: _Shape) -> None:
        """A case the judge replays itself: skipped after a hang; a static program's with the counts of a traced
        run of its shape when one passed (the worker's or the judge's own)."""
        from nkieval.sim.program import is_static

        if self.group.hung is not None:
            self.finish(k, skipped(self.cases[k].label, self.group.hung))
            return
        try:
            prog = PROGRAMS.get(shape.program)
        except Exception as e:  # (ProgramError, or what a malformed document makes the parser raise)
            self.finish(k, _failed("bad-program", e, self.cases[k].label))
            return
        like = shape.like if is_static(prog) else None
        run = replay_case(prog, self.cases[k], self.target, self.limits, like=like)
        if like is None and run.status == "ok" and is_static(prog):
            shape.like = counts_of(run)
        if run.status == "timeout":
            self.group.hung = self.group.hung or run.label
        self.finish(k, run)


class _Shape:
    """A shape sent to the worker: its program document and, once one passed, the counts of a traced run of it."""

    def __init__(self, program: bytes) -> None:
        self.program = program
        self.like: CaseRun | None = None


def _one_at_a_time(finish: Callable[[int, CaseRun], None]) -> Callable[[int, CaseRun], None]:
    """``finish``, called by one thread at a time."""
    lock = threading.Lock()

    def serialized(k: int, run: CaseRun) -> None:
        with lock:
            finish(k, run)
    return serialized


def _replay_shape(prog: Any, order: list[int], cases: Sequence[CaseJob], jobs: dict[str, Job], target: str,
                  limits: SandboxLimits, finish: Callable[[int, CaseRun], None], load_s: float) -> str | None:
    """One shape's cases, the traced one first; the label of a case that ran out of time, if one did. Cases the
    worker has started are collected last, after the judge's own replays."""
    from nkieval.sim.program import is_static

    hung: str | None = None
    traced: CaseRun | None = None
    in_worker: list[tuple[int, Job]] = []

    def done(k: int, run: CaseRun) -> None:
        nonlocal hung, traced, load_s
        run.load_s, load_s = load_s, 0.0
        if run.status == "timeout":
            hung = cases[k].label
        if traced is None and run.status == "ok" and is_static(prog):
            traced = run
        finish(k, run)

    for k in order:
        job = jobs.get(cases[k].label)
        if hung is not None:
            if job is not None:
                job.take_back()
            finish(k, skipped(cases[k].label, hung))
        elif job is not None and traced is not None and not job.take_back():
            in_worker.append((k, job))
        else:  # (a job taken back, or one whose traced run failed: the case is replayed here, with its own trace)
            done(k, replay_case(prog, cases[k], target, limits, like=traced))
    for k, job in in_worker:  # (run already, or running: a hang meanwhile does not skip them)
        assert traced is not None  # (a job is left to the worker only once the shape has a passed traced run)
        run = _worker_run(job, traced)
        done(k, run if run is not None else replay_case(prog, cases[k], target, limits, like=traced))
    return hung


def _offload(program: bytes, later: list[CaseJob], target: str, limits: SandboxLimits,
             group: replay_worker.Group | None = None) -> dict[str, Job]:
    """A shape's later cases, sent to the replay worker (:mod:`nkieval.review.replay_worker`) to be replayed without a
    trace while the judge replays the shape's first case with its: by label, the jobs sent (none without a
    worker). Only a static program's are used (the caller takes the others back)."""
    w = replay_worker.worker() if later else None
    if w is None:
        return {}
    jobs = {c.label: w.submit(program, c, target, limits, group=group) for c in later if not c.want_trace}
    return {label: j for label, j in jobs.items() if j is not None}


def _worker_idle() -> bool:
    w = replay_worker.worker()
    return w is not None and w.idle()


def _take_back(jobs: dict[str, Job]) -> None:
    """Jobs whose results the judge will not use: taken back where not yet sent (the rest are left to finish)."""
    for job in jobs.values():
        job.take_back()


def _worker_run(job: Job, traced: CaseRun) -> CaseRun | None:
    """The worker's run of a case it started, completed from the shape's traced run (``adopt``); None when the
    judge should replay the case itself: a worker fault."""
    try:
        run = job.result()
    except replay_worker.WorkerFailed:
        return None
    adopt(run, traced)
    return run


def _traced_first(ks: list[int], cases: Sequence[CaseJob]) -> list[int]:
    """A shape's cases, the one whose trace the review keeps first (it is replayed with its trace either way)."""
    return sorted(ks, key=lambda k: not cases[k].want_trace)


def traced_failure(label: str, res: dict[str, Any]) -> CaseRun:
    """A case whose shape the tracer could not record: the tracer's record is the case's."""
    status = res.get("status") if res.get("status") in STATUSES else "crash"
    return CaseRun(label, str(status), wall_s=float(res.get("wall_s", 0.0) or 0.0),
                   error={x: v for x, v in res.items() if x in ERROR_FIELDS})


def replay_case(prog: Any, case: CaseJob, target: str, limits: SandboxLimits, like: CaseRun | None = None
                ) -> CaseRun:
    """One case: the program replayed on the case's inputs within the case's budgets, its outputs checked.

    ``like``: a passed run of the same static program (``nkieval.sim.program.is_static``) on another case of
    the shape. Every run of such a program issues the same instructions on the same memory, so this one keeps
    no trace (``replay_untraced``) and takes from ``like`` what only the trace gives (``adopt``). A case whose
    trace the review keeps is always replayed with it."""
    like = None if case.want_trace else like
    if like is None:
        return _replay(prog, case, target, limits, traced=True)
    run = replay_untraced(prog, case, target, limits)
    adopt(run, like)
    return run


def replay_untraced(prog: Any, case: CaseJob, target: str, limits: SandboxLimits) -> CaseRun:
    """A case of a static program replayed without a trace and without the capacity check (both are the traced
    run's): its values, output checks and warnings only. Complete it with ``adopt``."""
    return _replay(prog, case, target, limits, traced=False)


def adopt(run: CaseRun, like: CaseRun) -> None:
    """What an untraced run takes from the traced run of its shape (the same instructions on the same memory):
    the instruction count, the elements never written, and the capacity verdict (the live-range check ran on
    ``like``'s trace; the allocations are the same)."""
    if run.status in ("ok", "bad-output"):
        run.n_instructions = like.n_instructions
    if run.status == "ok":
        run.unwritten = None if like.unwritten is None else [None if m is None else m.copy()
                                                             for m in like.unwritten]


def counts_of(run: CaseRun) -> CaseRun:
    """What ``adopt`` takes from a traced run, without its outputs, trace or warnings (kept for later cases)."""
    return CaseRun(run.label, run.status, n_instructions=run.n_instructions, unwritten=run.unwritten)


def _replay(prog: Any, case: CaseJob, target: str, limits: SandboxLimits, traced: bool) -> CaseRun:
    from nkieval.sim.errors import NkiValidationError
    from nkieval.sim.program import ProgramError, replay_program

    t0, cpu0 = time.perf_counter(), time.process_time()  # (a run stopped at its time limit, starved: see below)
    opts = replay_options(limits, traced)
    try:
        with _collector_as_in_a_child():
            result = replay_program(prog, list(case.inputs.values()), dict(case.params), target=target,
                                    options=opts)
    except NkiValidationError as e:
        took, ran = time.perf_counter() - t0, time.process_time() - cpu0
        if e.rule == "time-budget" and starved_process(ran, took):
            return _failed("infra-error", RuntimeError(
                f"the replay of case {case.label} was stopped at its {limits.timeout_s:g} s time limit, but the judge "
                f"ran {ran:.1f} s of its {took:.1f} s: it waited for a core the rest (an overloaded machine, not "
                "the candidate: retry)"), case.label, took)
        return _failed(_BUDGET_STATUS.get(str(e.rule), "rule-violation"), e, case.label, took)
    except ProgramError as e:  # only a tampered tracer sends a program the judge refuses
        return _failed("bad-program", e, case.label, time.perf_counter() - t0)
    except MemoryError as e:
        return _failed("memory-limit", e, case.label, time.perf_counter() - t0)
    except Exception as e:  # (as the child reported whatever a kernel raised)
        return _failed("exception", e, case.label, time.perf_counter() - t0)
    t_sim = time.perf_counter()
    run = CaseRun(case.label, "ok", sim_s=t_sim - t0, n_instructions=len(result.trace) if traced else None,
                  warnings=list(result.trace.warnings[:50]))
    problem = _check_outputs(result.raw, case.n_outputs, list(case.inputs.values()))
    if problem is not None:  # (the instruction budget needs no check here: the replay stopped at it)
        run.status, run.error = "bad-output", {"message": problem}
    else:
        outs = result.outputs if isinstance(result.outputs, tuple | list) else [result.outputs]
        run.outputs = [np.asarray(o) for o in outs]
        if traced:
            masks = _unwritten_masks(result.trace, result.raw)
            if masks is not None:
                run.unwritten = [masks.get(f"unwritten{i}") for i in range(len(run.outputs))]
            if case.want_trace:
                run.trace = result.trace
    run.post_s = time.perf_counter() - t_sim
    run.wall_s = run.post_s + run.sim_s
    return run


def replay_options(limits: SandboxLimits, traced: bool) -> SimOptions:
    """The :class:`~nkieval.sim.options.SimOptions` of a judge's replay within a case's budgets (instructions, wall
    time, bytes held); the run's warnings are the trace's and the report's, none on the judge's own stderr. An
    untraced replay keeps no trace and skips the capacity check (both are the traced run's)."""
    from nkieval.sim.options import SimOptions

    opts = SimOptions.from_env(max_instructions=int(limits.max_instructions), time_limit_s=float(limits.timeout_s),
                               max_bytes=int(limits.memory_mb) << 20, emit_warnings=False)
    return opts if traced else replace(opts, record_trace=False, capacity_check="off")


def _collector_as_in_a_child() -> AbstractContextManager[None]:
    """The collector's thresholds of a simulation child (``child.GC_THRESHOLDS``) while replays run: a replay
    makes objects by the hundred thousand, few of them cycles, and the judge's heap is large (case cache,
    programs, kept runs), so with the default thresholds each of the many full collections walks all of it
    (measured: a replay 1.2-1.6x slower). Restored when the last concurrent run ends (one mechanism with the
    simulator's own pacing, ``nkieval.sim.gc_pacing``)."""
    from nkieval.sim.gc_pacing import collector_thresholds

    return collector_thresholds(GC_THRESHOLDS)


def _failed(status: str, e: BaseException, label: str, wall: float = 0.0) -> CaseRun:
    # (the child's error record; no candidate file, so no candidate frames)
    return CaseRun(label, status, wall_s=wall, error={k: v for k, v in _error(status, e, "").items()
                                                      if k in ERROR_FIELDS})
