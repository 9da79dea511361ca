"""Mutants of a kernel run from the original kernel's state where they first differ from it.

The differential check's cause search (``review/stages/mutation_causes.py``) runs hundreds of mutants of one
CUDA source on one case: each differs from the original in one span of its text (a statement, an
expression, a rounding). Up to the first top-level statement of a kernel's body that the change can affect,
a mutant's run is the original's, step for step: the same host code, the same earlier launches, the same
statements on the same values. :class:`ResumableRun` runs the original once and keeps its state before each
top-level statement of each launch's first group of blocks (its frame, mask, shared and local memory, the
host's buffers, the constants); a mutant then starts from the state before the first statement its change
reaches (:func:`resume_point`), after an unchanged loop over K as well as before it.

**Exactly a fresh run's result.** A mutant resumes only where the text before the resumed statement is the
original's and nothing run before it can reach the change: the change lies inside one function's body (a
kernel or a ``__device__`` function, never the host function, a struct or a constant), the launches skipped
call neither that function nor one that calls it, and the resumed kernel's statements before the point
neither contain the change nor name such a function. The run's work count (:func:`nkieval.cuda.executor_work`)
then starts at the original's count at that state, so it ends at exactly a fresh run's count, and its work
limit counts it: a search is charged the same work, and tries the same hypotheses under the same limits, as
with fresh runs. Anything else runs fresh.

**Whether to resume, in work units.** Resuming pays off only where the statements skipped cost more than
restoring the state. Both sides are in work units (:func:`nkieval.cuda.executor_work`), never CPU seconds: the
statements skipped are the original's count between the launch's first statement and the resumed one, and a
state's restoring costs :func:`copy_work` of what it holds (its arrays' bytes, its objects). What runs (a
resumed or a fresh run) is then a function of the inputs only, the same on any machine and under any load,
though either gives the same outputs and the same charge.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

import nkieval.cuda as cuda
from nkieval.cuda.program import Program
from nkieval.cuda.runner import _program
from nkieval.cuda.values import CudaError, executor_work, work_units

#: bytes of states one captured run keeps at most (its array copies); the statements past it run fresh
STATES_MAX_BYTES = 64 << 20
#: a mutant resumes only where the kernel's statements it skips count this many times the work restoring the
#: state counts (:func:`copy_work`): on the ports' small cases a few statements take less than the copy, and a
#: fresh run is cheaper
MIN_GAIN = 2.0
#: work units copying one object of a state, and one KiB of its arrays, costs (:func:`copy_work`; a restore
#: copies the state as its capture did). Fitted on the CPU time of the 1,299 states captured by the 46 built-in
#: port tasks' kernels on their three smallest cases (2.8 us per object, 0.18 ns per byte), converted at the
#: work units per CPU second of the same runs, so that the rule weighs the two as the CPU-time rule did
#: (docs/cuda.md, "Work units: math builtins; the resume decision")
COPY_OBJECT_WORK = 6_700
COPY_KIB_WORK = 440
#: work units the capturing run of the original may take (2 s of CPU at the calibration: past it, every mutant
#: runs fresh)
CAPTURE_WORK_LIMIT = work_units(2.0)


@dataclass
class _State:
    """The run before one top-level statement: the frame, mask, constants, warnings and loop ticks (host
    buffers referenced, not copied), the host buffers' contents, the work units the run counted to get there,
    and the work restoring it counts (whether resuming there saves time: :meth:`ResumableRun.point`)."""

    held: tuple[Any, ...]
    buffers: list[tuple[np.ndarray, np.ndarray | None, Any]]
    #: the run's work count there, and the part of it the original's source counted (a resumed run starts from
    #: the count with its own source's part instead: :meth:`_Resume.restore`)
    work: int = 0
    source_work: int = 0
    #: :func:`copy_work` of the state (restoring it copies it again)
    copy_work: int = 0


def copy_work(objects: int, nbytes: int) -> int:
    """Work units copying a state of ``objects`` Python objects holding ``nbytes`` bytes of arrays costs: a
    model of its CPU time (:data:`COPY_OBJECT_WORK`, :data:`COPY_KIB_WORK`) read from what the state holds, so
    the same on any machine."""
    return COPY_OBJECT_WORK * objects + COPY_KIB_WORK * nbytes // 1024


class _Capture:
    """Takes the states of a run of the original (the interpreter calls :meth:`take` before each top-level
    statement of each launch's first group of blocks)."""

    def __init__(self) -> None:
        self.states: dict[tuple[int, int], _State] = {}
        self.base_buffers: list[Any] = []
        self.bytes = 0

    def take(self, it: Any, launch: int, statement: int, fr: Any, m: Any) -> None:
        if self.bytes > STATES_MAX_BYTES:
            return
        memo: dict[int, Any] = {id(b): b for b in it.host_buffers}
        held = copy.deepcopy((fr, m, it.globals, list(it.warnings), it._ticks), memo)
        buffers = [(b.data.copy(), None if b.writer is None else b.writer.copy(), b.race) for b in it.host_buffers]
        nbytes = sum(v.nbytes for v in memo.values() if isinstance(v, np.ndarray))
        nbytes += sum(d.nbytes for d, _, _ in buffers)
        self.bytes += nbytes
        self.base_buffers = list(it.host_buffers)
        # (what copying it costs, read from what it holds: the memo has an entry per object copied, besides the
        # host buffers it was given; the host buffers' writer arrays are copied too)
        nbytes += sum(w.nbytes for _, w, _ in buffers if w is not None)
        self.states[(launch, statement)] = _State(held, buffers, it.work, it.source_work,
                                                  copy_work(len(memo) + len(buffers), nbytes))


class _Mismatch(Exception):
    """The mutant's host buffers are not the original's (never expected: the host code is the same)."""


class _Resume:
    """What a mutant's run resumes from: launch ``launch``'s first group, before top-level statement
    ``statement``."""

    def __init__(self, launch: int, statement: int, state: _State, base_buffers: list[Any],
                 owner: ResumableRun) -> None:
        self.launch, self.statement, self.state = launch, statement, state
        self.base_buffers, self.owner = base_buffers, owner

    def restore(self, it: Any) -> tuple[Any, Any]:
        """Put the state into interpreter ``it`` (its host buffers take the contents they had); the frame and
        mask to run the statement with."""
        ours = it.host_buffers
        if len(ours) != len(self.base_buffers) or any(
                a.data.dtype != b.data.dtype for a, b in zip(ours, self.base_buffers)):
            raise _Mismatch()
        memo = {id(b0): b1 for b0, b1 in zip(self.base_buffers, ours)}
        fr, m, constants, warnings, ticks = copy.deepcopy(self.state.held, memo)
        for b, (data, writer, race) in zip(ours, self.state.buffers):
            b.data, b.writer, b.race = data.copy(), None if writer is None else writer.copy(), race
            b.dirty = b.writer is not None and bool((b.writer >= 0).any())
        it.globals, it._ticks = constants, ticks
        it.warnings[:] = warnings
        # (the work count a fresh run has here: the host statements this run re-ran before the launch are in it,
        # as are the launches it skipped, and the mutant's source counts its own nodes; its work limit then
        # counts them)
        it.work = self.state.work - self.state.source_work + it.source_work
        it.check_work()
        return fr, m


def _statements(fn: Any) -> list[Any]:
    return [c for c in fn.child_by_field_name("body").named_children if c.type != "comment"]


def _names(node: Any) -> set[str]:
    """Every identifier in ``node`` (a superset of the functions it calls)."""
    out: set[str] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type == "identifier":
            out.add(n.text.decode())
        stack.extend(n.children)
    return out


def _changed_span(a: bytes, b: bytes) -> tuple[int, int]:
    """The span of ``a`` outside which ``b`` is the same text: (common prefix, len(a) - common suffix)."""
    n = min(len(a), len(b))
    x, y = np.frombuffer(a, np.uint8), np.frombuffer(b, np.uint8)
    differ = np.flatnonzero(x[:n] != y[:n])
    p = int(differ[0]) if differ.size else n
    differ = np.flatnonzero(x[len(a) - n + p:][::-1] != y[len(b) - n + p:][::-1])
    s = int(differ[0]) if differ.size else n - p
    return p, len(a) - s


@dataclass(frozen=True)
class _Statement:
    start: int
    end: int
    text: bytes
    names: frozenset[str]


@dataclass(frozen=True)
class _Outline:
    """What :func:`resume_point` reads of a source: each function's body span, the names its body uses, and its
    top-level statements."""

    bodies: dict[str, tuple[int, int]]
    names: dict[str, frozenset[str]]
    statements: dict[str, tuple[_Statement, ...]]


@lru_cache(maxsize=16)
def _outline(source: str) -> _Outline:
    prog = _program(source)
    bodies, names, statements = {}, {}, {}
    for f, fn in prog.functions.items():
        body = fn.child_by_field_name("body")
        if body is None:
            continue
        bodies[f] = (body.start_byte, body.end_byte)
        names[f] = frozenset(_names(body))
        statements[f] = tuple(_Statement(c.start_byte, c.end_byte, c.text, frozenset(_names(c)))
                              for c in _statements(fn))
    return _Outline(bodies, names, statements)


def _reaching(outline: _Outline, changed: str) -> set[str]:
    """``changed`` and every function that names it, directly or through others."""
    out = {changed}
    grew = True
    while grew:
        grew = False
        for f, used in outline.names.items():
            if f not in out and used & out:
                out.add(f)
                grew = True
    return out


def resume_point(base: Program, mutant: Program, launched: Sequence[str], host: str) -> tuple[int, int] | None:
    """(launch index, top-level statement) where a run of ``mutant`` may resume from ``base``'s state, or None
    (module docstring). ``launched``: the kernels ``base``'s run launched, in order; ``host``: its host
    function."""
    if base.options != mutant.options:
        return None
    ours = _outline(base.source)
    lo, hi = _changed_span(base.source.encode(), mutant.source.encode())
    changed = next((f for f, (start, end) in ours.bodies.items() if start < lo and hi < end), None)
    if changed is None or changed == host or changed not in mutant.functions:
        return None
    reaching = _reaching(ours, changed)
    launch = next((i for i, k in enumerate(launched) if k in reaching), None)
    if launch is None:
        return None
    kernel = launched[launch]
    stmts = ours.statements[kernel]
    statement = next((k for k, st in enumerate(stmts)
                      if (kernel == changed and st.end >= lo) or (st.names & reaching) - {kernel}), None)
    if statement is None or (launch == 0 and statement == 0) or kernel not in mutant.functions:
        return None
    theirs = _statements(mutant.functions[kernel])
    if len(theirs) < statement or any(x.text != y.text for x, y in zip(stmts[:statement], theirs)):
        return None
    return launch, statement


class ResumableRun:
    """The task's kernel as ``source`` on one case, run once with its states kept, so that mutants of it run
    from where they first differ. The states are captured on the first :meth:`run` after ``fresh_runs`` runs
    made fresh (where few mutants may run, capturing costs more than it saves); ``work_limit`` bounds the
    capturing run (past it, every mutant runs fresh); ``min_gain``: as :data:`MIN_GAIN` (0: resume wherever the
    text allows)."""

    def __init__(self, task: Any, source: str, inputs: Mapping[str, np.ndarray], dims: Mapping[str, int],
                 params: Mapping[str, Any], work_limit: int = CAPTURE_WORK_LIMIT, fresh_runs: int = 0,
                 min_gain: float = MIN_GAIN) -> None:
        self.task, self.source, self.inputs, self.dims = task, source, inputs, dims
        self.params, self.work_limit, self.fresh_runs = dict(params), work_limit, fresh_runs
        self.min_gain = min_gain
        #: work units to add to :func:`executor_work` for the last :meth:`run`: less the capturing run of the
        #: original that it made first (not the mutant's own work; a resumed run's count already includes the
        #: original's work it skipped)
        self.credited = 0
        self.capture: _Capture | None = None
        self.launched: list[str] | None = None

    # (runs go through the package's ``run_task_cuda``, as the review's other runs do: what observes the
    # executor's runs there sees these too)
    def _captured(self) -> _Capture:
        if self.capture is None:
            self.capture = _Capture()
            try:
                _outs, run = cuda.run_task_cuda(self.task, self.inputs, self.dims, dict(self.params), source=self.source,
                                           work_limit=self.work_limit, capture=self.capture)
                self.launched = [r.kernel for r in run.launches]
            except CudaError:  # (no states: every mutant runs fresh)
                self.capture.states.clear()
        return self.capture

    def point(self, source: str) -> tuple[int, int] | None:
        """Where a run of ``source`` resumes (:func:`resume_point` with a state kept there), or None."""
        capture = self._captured()
        if self.launched is None:
            return None
        at = resume_point(_program(self.source), _program(source), self.launched, self.task.kernel)
        state = None if at is None else capture.states.get(at)
        if state is None:
            return None
        start = capture.states.get((at[0], 0))
        skipped = state.work - (start.work if start is not None else 0)
        return at if skipped >= self.min_gain * state.copy_work else None

    def run(self, source: str, work_limit: int | None) -> list[np.ndarray]:
        """The outputs of ``source`` on the case, resumed where :meth:`point` allows, else a fresh run; raises
        as :func:`~nkieval.cuda.runner.run_task_cuda` would, after the same work."""
        if self.fresh_runs > 0:
            self.fresh_runs -= 1
            self.credited = 0
            return self._fresh(source, work_limit)
        w0, first = executor_work(), self.capture is None
        self._captured()
        self.credited = -(executor_work() - w0) if first else 0
        at = self.point(source)
        if at is None:
            return self._fresh(source, work_limit)
        capture = self._captured()
        resume = _Resume(at[0], at[1], capture.states[at], capture.base_buffers, self)
        w1 = executor_work()
        try:
            return list(cuda.run_task_cuda(self.task, self.inputs, self.dims, dict(self.params), source=source,
                                      work_limit=work_limit, resume=resume)[0])
        except _Mismatch:
            self.credited -= executor_work() - w1  # (the abandoned attempt is not the mutant's work)
            return self._fresh(source, work_limit)

    def _fresh(self, source: str, work_limit: int | None) -> list[np.ndarray]:
        return list(cuda.run_task_cuda(self.task, self.inputs, self.dims, dict(self.params), source=source,
                                  work_limit=work_limit)[0])
