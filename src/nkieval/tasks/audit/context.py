"""What the audit's criteria share: the task, the seed, the target and the review runs made so far."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from nkieval.tasks.audit.runner import RunOutcome, run_candidate
from nkieval.tasks.schema import Task


@dataclass
class CaseData:
    """One (shape, family) case as the review draws it: inputs and the reference's outputs."""

    label: str
    dims: dict[str, int]
    hidden: bool
    family: str
    inputs: dict[str, np.ndarray]
    outputs: list[np.ndarray] | None  # None: the reference raised (see ``error``)
    error: str = ""


@dataclass
class AuditContext:
    task: Task
    seed: int
    target: str
    max_mutants: int = 16
    #: CPU seconds (the audit's process tree, :mod:`nkieval.tasks.audit.clock`) of mutant reviews; the rest of
    #: the sample is reported "not run (time budget)"
    mutation_budget_s: float = 60.0
    #: probe each surviving mutant on extra shapes to name one that kills it (costs reviews)
    probe_survivors: bool = True
    runs: dict[tuple[Any, ...], RunOutcome] = field(default_factory=dict)
    cases: list[CaseData] | None = None
    times: dict[str, float] = field(default_factory=dict)
    notes: dict[str, Any] = field(default_factory=dict)
    _screen: tuple[Task | None] | None = None
    #: (task, its copy without kernel.cu) by id() of the task; both are kept, so an id is never reused
    _tests_only: dict[int, tuple[Task, Task]] = field(default_factory=dict)
    _screens: list[Task] | None = None
    _prepared: dict[str, Any] | None = None

    def run(self, label: str, source: str | Path, *, target: str | None = None,
            families: tuple[str, ...] | None = None, compare_references: bool = False,
            keep_feedback: bool = False, task: Task | None = None) -> RunOutcome:
        """Review a candidate, cached per label, target, families and task. A review made with the reference
        kernels answers a request without them too (they add performance evidence, never change a
        verdict), and every review keeps its feedback text (``keep_feedback`` is accepted for clarity)."""
        key = (label, target or self.target, families, id(task) if task else 0)
        hit = self.runs.get(key)
        if hit is None or (compare_references and not hit.with_references):
            t0 = time.perf_counter()
            hit = run_candidate(task or self.task, source, label, seed=self.seed, target=target or self.target,
                                families=families, compare_references=compare_references, keep_feedback=True)
            self.times["reviews_s"] = self.times.get("reviews_s", 0.0) + time.perf_counter() - t0
            self.times["reviews"] = self.times.get("reviews", 0) + 1
            self.runs[key] = hit
        return hit

    def screen_task(self) -> Task | None:
        """The task without its largest hidden shape (by elements of inputs and outputs), for a first, cheaper
        look at candidates that should fail (None: the task has one shape, or no hidden shape). Its cases are
        the review's own (same labels, seeds and inputs), so a failure there is a failure of the full review."""
        if self._screen is None:
            hidden = list(self.task.hidden_shapes)
            if len(self.task.shapes) < 2 or not hidden:
                self._screen = (None,)
            else:
                big = max(hidden, key=lambda s: _elements(self.task, s.dims))
                self._screen = (dataclasses.replace(self.task, shapes=tuple(s for s in self.task.shapes
                                                                             if s is not big)),)
        return self._screen[0]

    def tests_only(self, task: Task | None = None) -> Task:
        """``task`` (default: the audited task) without its CUDA source, for reviews whose only question is
        whether the task's own cases reject a kernel: the review's differential check against kernel.cu (the
        CUDA executor, and a cause search when a port disagrees) adds evidence to the Migration criterion but
        never decides a case's correctness or numerics check, and it was most of a failing mutant's review."""
        t = task or self.task
        if t.cuda_file is None:
            return t
        hit = self._tests_only.get(id(t))
        if hit is None:
            hit = self._tests_only[id(t)] = (t, dataclasses.replace(t, cuda_file=None))
        return hit[1]

    def screens(self) -> list[Task]:
        """The cheaper looks at a candidate that should fail, cheapest first: the task's public shapes only,
        then the screen (:meth:`screen_task`), both without kernel.cu (:meth:`tests_only`). Each is a subset of
        the review's own cases, so a case that fails there fails the full review too."""
        if self._screens is None:
            self._screens = []
            screen = self.screen_task()
            if screen is not None:
                public = self.task.public_shapes
                if public and len(public) < len(screen.shapes):
                    self._screens.append(self.tests_only(dataclasses.replace(self.task, shapes=public)))
                self._screens.append(self.tests_only(screen))
        return self._screens

    def run_screened(self, label: str, source: str | Path, *, tests_only: bool = False) -> RunOutcome:
        """Review a candidate that should fail: first on the screens (:meth:`screens`, first input family
        only), one of which decides when a correctness or numerics check rejects it there (that case is a case
        of the full review, with the same inputs); any other outcome is decided by the full review, which is
        made without kernel.cu when ``tests_only`` (mutants: only the task's tests are asked about)."""
        fam = (self.task.families[0],) if len(self.task.families) > 1 else None
        for i, screen in enumerate(self.screens()):
            o = self.run(f"{label}@screen{i}", source, families=fam, task=screen)
            if o.killed_by_tests:
                self.times["screen_decided"] = self.times.get("screen_decided", 0) + 1
                return o
        return self.run(label, source, task=self.tests_only() if tests_only else None)

    def prepared_checks(self) -> dict[str, Any]:
        """Per case label, the numerics standard's prepared check (float64 oracle and bounds) built the way a
        review builds it, into the review's case cache: the audit's own check of the reference and every review
        after it share one oracle per case (the oracle is most of a review's candidate-independent cost).
        Cases whose check could not be built are left out (the caller builds them itself, to say why)."""
        if self._prepared is None:
            from nkieval.review.rubric import DEFAULT_RUBRIC
            from nkieval.review.stages.judge import prefetch_case, prepare_judge
            from nkieval.review.stages.load import ReviewRequest, load
            from nkieval.review.stages.timing import Timings

            self._prepared = {}
            src = self.expert_source() or "pass\n"
            req = ReviewRequest(self.task, src, self.target, self.seed, DEFAULT_RUBRIC, None, "all", "forkserver",
                                None, None, False, True, True)
            try:
                kit = prepare_judge(load(req))
            except Exception:  # the task's fault: the caller's own checks name it
                return self._prepared
            if not kit.numerics_ok:
                return self._prepared
            for i, c in enumerate(kit.loaded.cases):
                try:
                    prefetch_case(kit, i, Timings())
                except Exception:  # a reference or oracle that raises on this case: named by the caller
                    continue
                d = kit.loaded.data[i]
                if d.prepared_done and d.prepared is not None:
                    self._prepared[c.label] = d.prepared
        return self._prepared

    def expert_source(self) -> str | None:
        f = self.task.solution_file
        return f.read_text() if f is not None else None

    def all_cases(self) -> list[CaseData]:
        """Every (shape, family) case with the review's inputs (same seeds) and the reference's outputs."""
        if self.cases is None:
            from nkieval.review.stages.load import case_inputs, plan_cases
            from nkieval.tasks.loader import load_reference, reference_outputs

            fn = load_reference(self.task)
            out = []
            for c in plan_cases(self.task, self.seed, self.task.families, "all"):
                ins = case_inputs(self.task, c)
                try:
                    outs: list[np.ndarray] | None = reference_outputs(self.task, fn, ins)
                    err = ""
                except Exception as e:  # the task author's code: a finding, not a crash
                    outs, err = None, f"{type(e).__name__}: {e}"
                out.append(CaseData(c.label, dict(c.dims), c.hidden, c.family, ins, outs, err))
            self.cases = out
        return self.cases


def _elements(task: Task, dims: dict[str, int]) -> int:
    return sum(int(np.prod(s.concrete(dims))) for s in (*task.inputs, *task.outputs))
