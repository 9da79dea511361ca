"""The review's concurrency, all of it: one harness worker thread judges while the sandboxed child runs.

The worker starts static analysis when the sandbox starts (at the trace; it needs only the source,
and it never delays the child's start), then, on a cold cache, each case's reference outputs and
prepared numerics check (candidate-independent, kept for the next review), then each case's
judgement as its result arrives, the diagnoses (ahead of queued judgements) and the evidence
trace's parse. While the child runs, the worker is the only harness thread with work (the other
core is the child's); meanwhile the calling thread runs the reference kernels, and once the child
has exited it helps with what is left. Every item is independent of the others except through
per-case locks and :class:`_Overlap`'s lock, so two threads may take them in any order.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

from nkieval.review.sandbox import CaseRun
from nkieval.review.stages import evidence as ev
from nkieval.review.stages import judge as jd
from nkieval.review.stages.execute import execute, record_child_timings
from nkieval.review.stages.load import Case
from nkieval.review.stages.timing import Timings, timed

T = TypeVar("T")
_Item = tuple[Future[Any], Callable[..., Any], tuple[Any, ...]]


@dataclass(frozen=True)
class Settled(Generic[T]):
    """A worker item's outcome once the worker is done: its value, or the exception it raised."""

    value: T | None = None
    error: BaseException | None = None

    @classmethod
    def of(cls, f: Future[T]) -> Settled[T]:
        e = f.exception()
        return cls(error=e) if e is not None else cls(f.result())

    def get(self) -> T:
        """The value; the item's exception re-raised here, in the caller's thread."""
        if self.error is not None:
            raise self.error
        return cast(T, self.value)


@dataclass
class Outcome:
    """What the run and the worker leave for the later stages (judge's collect, score)."""

    runs: list[CaseRun]
    judged: dict[int, jd.JudgedCase]
    diagnoses: dict[int, Settled[dict[str, Any] | None]]
    evidence: ev.RunEvidence
    analysis: Settled[ev.StaticFindings]

    def diagnosis(self, i: int) -> dict[str, Any] | None:
        return self.diagnoses[i].get()


def execute_and_judge(kit: jd.JudgeKit, timings: Timings) -> Outcome:
    """Stages 2-5 overlapped: run the cases in the sandbox while the worker judges them; then the evidence
    case and the reference kernels (this thread, while the worker still judges); then this thread helps
    until every item is done. Re-raises a judge's exception, then the evidence parse's."""
    loaded = kit.loaded
    ov = _Overlap(kit, timings)
    stats: dict[str, float] = {}
    runs: list[CaseRun] = []
    try:
        with timed(timings, "sandbox_run_s"):
            runs = execute(loaded, on_case=ov.on_case, on_start=ov.start, stats=stats)
            ov.start()  # (only if the sandbox never started a child)
            if loaded.integrity:
                ov.judge_all(runs)
        with timed(timings, "reference_kernels_s"):
            ev_case = ev.evidence_case(loaded, runs)
            refs = ev.reference_evidence(loaded, ev_case[0] if ev_case else None)
        with timed(timings, "worker_wait_s"):
            ov.help_until_done()
            ov.raise_judge_errors()
            facts = ov.trace_facts(ev_case, runs) if ev_case is not None else None
    finally:
        ov.close()
        record_child_timings(runs, stats, timings)
    return Outcome(runs, dict(ov.judged), ov.settled_diagnoses(),
                   ev.run_evidence(ev_case[0] if ev_case else None, facts, refs), ov.settled_analysis())


class _Overlap:
    """The worker's items for one review and the state they share (under ``_lock``)."""

    def __init__(self, kit: jd.JudgeKit, timings: Timings) -> None:
        self._kit, self._loaded, self._timings = kit, kit.loaded, timings
        self._q = _Queue()
        self._lock = threading.Lock()
        self.judged: dict[int, jd.JudgedCase] = {}
        self._plan = jd.DiagnosisPlan()
        self._judges: dict[int, Future[None]] = {}
        self._diagnoses: dict[int, Future[dict[str, Any] | None]] = {}
        self._traces: dict[int, Future[ev.TraceFacts]] = {}
        self._analysis: Future[ev.StaticFindings] | None = None

    def start(self) -> None:
        """Static analysis first, then (cold cache) the cases' reference data; once."""
        if self._analysis is not None:
            return
        self._analysis = self._q.submit(self._static)
        if not self._loaded.integrity and self._loaded.use_cache:
            for i in range(len(self._loaded.cases)):
                if jd.needs_prefetch(self._kit, i):
                    self._q.submit(jd.prefetch_case, self._kit, i, self._timings)

    def _static(self) -> ev.StaticFindings:
        with timed(self._timings, "analysis_s"):
            return ev.static_analysis(self._loaded)

    def on_case(self, run: CaseRun) -> None:
        """A case's result arrived (the sandbox's thread): judge it, and parse the evidence trace it brings."""
        i = self._loaded.index.get(run.label)
        if i is not None and i not in self._judges:
            self._judges[i] = self._q.submit(self._judge, i, run)
            if ev.wants_trace_facts(self._loaded.cases[i], run) and i not in self._traces:
                self._traces[i] = self._q.submit(self._facts, i, run)
        if self._loaded.request.progress:
            self._loaded.request.progress(run.label)

    def judge_all(self, runs: list[CaseRun]) -> None:
        for i, r in enumerate(runs):
            self._judges[i] = self._q.submit(self._judge, i, r)

    def _judge(self, i: int, run: CaseRun) -> None:
        judged = jd.judge_case(self._kit, i, run, self._timings)
        with self._lock:
            self.judged[i] = judged
            self._schedule_diagnoses()

    def _schedule_diagnoses(self) -> None:  # (under _lock)
        for j in self._plan.due(self.judged, self._diagnoses, len(self._loaded.cases)):
            # ahead of the queued judgements: a diagnosis is one long item, which should run while the
            # child still simulates, not alone after it
            self._diagnoses[j] = self._q.submit(self._diagnose, j, first=True)

    def _diagnose(self, i: int) -> dict[str, Any] | None:
        record, why = jd.diagnose_case(self._kit, i, self.judged[i], self._plan.current_hint(), self._timings)
        with self._lock:
            self._plan.finished(i, record)
            if record is None:
                self.judged[i] = jd.without_numerics(self.judged[i], why)
            self._schedule_diagnoses()
        return record

    def _facts(self, i: int, run: CaseRun) -> ev.TraceFacts:
        with timed(self._timings, "trace_parse_s"):
            return ev.trace_facts(self._loaded.task, run, self._loaded.target, self._loaded.cases[i].dims,
                                  replayed=self._loaded.request.trusted)

    def help_until_done(self) -> None:
        """The child is gone, its core free: this thread works through the queue too, until every item is done
        (what finishes may queue more: diagnoses)."""
        while True:
            self._q.help()
            with self._lock:
                futures: list[Future[Any]] = [*self._judges.values(), *self._diagnoses.values(),
                                              *self._traces.values(), *filter(None, [self._analysis])]
            pending = [f for f in futures if not f.done()]
            if not pending:
                return
            wait(pending, return_when=FIRST_COMPLETED)

    def raise_judge_errors(self) -> None:
        for f in self._judges.values():
            f.result()  # re-raises a judge's exception here

    def trace_facts(self, ev_case: tuple[Case, CaseRun], runs: list[CaseRun]) -> ev.TraceFacts:
        """The evidence case's facts: parsed by the worker when its result arrived, else here."""
        c, r = ev_case
        i = self._loaded.index.get(c.label)
        if i is not None and i in self._traces and runs[i] is r:
            return self._traces[i].result()
        return self._facts(self._loaded.index.get(c.label, 0), r)

    def settled_diagnoses(self) -> dict[int, Settled[dict[str, Any] | None]]:
        return {i: Settled.of(f) for i, f in self._diagnoses.items()}

    def settled_analysis(self) -> Settled[ev.StaticFindings]:
        assert self._analysis is not None
        return Settled.of(self._analysis)

    def close(self) -> None:
        self._q.close()


class _Queue:
    """One worker thread running queued items in order (``first`` puts one ahead of the rest); any other
    thread may :meth:`help` run them."""

    def __init__(self) -> None:
        self._q: deque[_Item] = deque()
        self._cv = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="nkieval-review", daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., T], *args: Any, first: bool = False) -> Future[T]:
        f: Future[T] = Future()
        with self._cv:
            if first:
                self._q.appendleft((f, fn, args))
            else:
                self._q.append((f, fn, args))
            self._cv.notify()
        return f

    def _take(self, block: bool) -> _Item | None:
        with self._cv:
            while not self._q:
                if self._closed or not block:
                    return None
                self._cv.wait()
            return self._q.popleft()

    @staticmethod
    def _run(item: _Item) -> None:
        f, fn, args = item
        if not f.set_running_or_notify_cancel():
            return
        try:
            f.set_result(fn(*args))
        except BaseException as e:  # handed to whoever waits on the future
            f.set_exception(e)

    def _loop(self) -> None:
        while (item := self._take(block=True)) is not None:
            self._run(item)

    def help(self) -> None:
        """Run queued items in this thread until the queue is empty (items queued meanwhile too)."""
        while (item := self._take(block=False)) is not None:
            self._run(item)

    def close(self) -> None:
        """Stop the worker once the queue is empty, and wait for it."""
        with self._cv:
            self._closed = True
            self._cv.notify_all()
        self._thread.join()
