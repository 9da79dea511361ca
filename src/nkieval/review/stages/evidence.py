"""Stage 5, evidence: the hardware evidence and performance estimate from the evidence case's trace,
next to the expert solution's and the baseline's on the same shape; and the static analysis of the
source (Code quality, Migration fidelity)."""

from __future__ import annotations

import copy
import hashlib
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from nkieval.review import adapters
from nkieval.review.cache import SizedLRU
from nkieval.review.evidence import HardwareEvidence, trace_evidence
from nkieval.review.physics import output_writes
from nkieval.review.sandbox import CaseJob, CaseRun, Isolation, run_candidate
from nkieval.review.stages.load import Case, Loaded, case_inputs, evidence_key, sandbox_limits
from nkieval.review.verdict import HARNESS_STATUSES, JudgeError
from nkieval.tasks import Task

Findings = tuple[list[dict[str, Any]] | None, str | None]


class TraceFacts(NamedTuple):
    """What one trace says: hardware evidence, the performance estimate, and why either is missing."""

    hw: HardwareEvidence | None
    perf: dict[str, Any] | None
    reason: str | None


@dataclass(frozen=True)
class ReferenceEvidence:
    """The expert solution's and the baseline's evidence and estimates on the evidence case's shape."""

    hw_solution: HardwareEvidence | None = None
    perf_solution: dict[str, Any] | None = None
    hw_baseline: HardwareEvidence | None = None
    perf_baseline: dict[str, Any] | None = None


@dataclass(frozen=True)
class RunEvidence:
    """Stage 5's output from the run: the evidence case, the candidate's facts next to the references'."""

    case: Case | None = None
    hw: HardwareEvidence | None = None
    perf: dict[str, Any] | None = None  # {"candidate": d, "baseline": d|None, "solution": d|None}
    perf_reason: str | None = None
    refs: ReferenceEvidence = ReferenceEvidence()


@dataclass(frozen=True)
class StaticFindings:
    """``nkieval.analysis`` findings on the source (NKI rules; MIG rules against the task's kernel.cu)."""

    analysis: Findings
    migration: Findings


#: records, operands and allocations a trace may hold per instruction the task allows (a bound on what
#: parsing a trace from the sandbox builds; real traces hold a few)
_TRACE_ITEMS_PER_INSTRUCTION = 32


def trace_facts(task: Task, run: CaseRun, target: str, dims: dict[str, int], *, replayed: bool = False
                ) -> TraceFacts:
    """Hardware evidence and the performance estimate from one trace, parsed once. The trace comes
    from the sandbox: one that cannot be read leaves both not assessed, with the reason, when the
    candidate's own code ran there (``trusted=False``); ``replayed=True`` (trace, then execute: the
    trace was written by the judge's replay, no candidate code ran) makes it the judge's failure,
    :class:`JudgeError` ``"evidence"``."""
    from nkieval.hardware import get_target

    try:
        # (records within the task's instruction limit, which the child enforces, with room for their
        # operands and allocations)
        trace = run.parsed_trace(_TRACE_ITEMS_PER_INSTRUCTION * (task.limits.max_instructions + 1))
    except (ValueError, KeyError, IndexError, TypeError, AttributeError, RecursionError, MemoryError) as e:
        why = f"the kernel's instruction trace could not be read ({type(e).__name__}: {str(e)[:200]})"
        if replayed:
            raise JudgeError("evidence", why) from e
        return TraceFacts(None, None, why)
    rd, wr = task.compulsory_bytes(dims)
    try:
        hw = trace_evidence(trace, target=get_target(target), compulsory_read=rd, compulsory_write=wr)
        hw.output_writes = output_writes(trace, task, dims)
    except Exception as e:  # a parsed trace the evidence code cannot summarise: the judge's failure
        raise JudgeError("evidence", f"trace evidence raised {type(e).__name__}: {e}") from e
    perf, why = adapters.perf_estimate(trace, target)
    return TraceFacts(hw, perf, why)


def wants_trace_facts(case: Case, run: CaseRun) -> bool:
    """A case whose run brought the evidence trace back: parse it as soon as it arrives."""
    return case.want_trace and run.status == "ok" and run.traced


def evidence_case(loaded: Loaded, runs: list[CaseRun]) -> tuple[Case, CaseRun] | None:
    """The case whose trace is the evidence: the largest traced one; when the case chosen before the
    results were known did not run to completion, the largest case that did, run again for its trace."""
    traced = [(c, r) for c, r in zip(loaded.cases, runs) if r.status == "ok" and r.traced]
    if not traced:
        ok = [(c, d.inputs) for c, d, r in zip(loaded.cases, loaded.data, runs) if r.status == "ok"]
        if ok:
            c, inp = max(ok, key=lambda ci: evidence_key(loaded.task, ci[0]))
            task, req = loaded.task, loaded.request
            again = run_candidate(loaded.source, task.kernel, [CaseJob(c.label, inp, dict(task.params),
                                                                       len(task.outputs))],
                                  target=loaded.target, limits=loaded.limits, isolation=req.isolation,
                                  trusted=req.trusted, hide=(str(task.directory),), programs=loaded.programs)
            if again[0].status == "ok" and again[0].traced:
                traced = [(c, again[0])]
    return max(traced, key=lambda cr: evidence_key(loaded.task, cr[0])) if traced else None


def reference_evidence(loaded: Loaded, case: Case | None) -> ReferenceEvidence:
    """The expert's and the baseline's evidence on the evidence case's shape (none without a case, or with
    ``compare_references=False``)."""
    if case is None or not loaded.request.compare_references:
        return ReferenceEvidence()
    task, target, iso = loaded.task, loaded.target, loaded.request.isolation
    hw_s, perf_s = _reference_kernel_evidence(task, task.solution_file, target, case.dims, iso)
    hw_b, perf_b = _reference_kernel_evidence(task, task.baseline_file, target, case.dims, iso)
    return ReferenceEvidence(hw_s, perf_s, hw_b, perf_b)


def run_evidence(case: Case | None, facts: TraceFacts | None, refs: ReferenceEvidence) -> RunEvidence:
    """The candidate's facts on the evidence case next to the references' (the performance record)."""
    if case is None or facts is None:
        return RunEvidence(case, refs=refs)
    perf = None
    if facts.perf is not None:
        perf = {"candidate": facts.perf, "baseline": refs.perf_baseline, "solution": refs.perf_solution}
    return RunEvidence(case, facts.hw, perf, facts.reason, refs)


def static_analysis(loaded: Loaded) -> StaticFindings:
    """Static analysis needs only the source: it runs in the harness worker while the sandbox simulates. Its
    findings are a function of the candidate's text, the target and the task's CUDA source alone, so a review
    that keeps data across reviews (``use_cache``) of a source already analysed gets a copy of the kept
    findings (:data:`STATIC_KEPT`)."""
    task = loaded.task
    cuda = None if task.cuda_file is None else task.cuda_file.read_text()
    key = (_digest(loaded.source), loaded.target, None if cuda is None else _digest(cuda))
    kept = _STATIC.get(key) if loaded.use_cache else None
    if kept is None:
        kept = StaticFindings(*adapters.static_findings(loaded.source, loaded.target, cuda))
        if loaded.use_cache:
            _STATIC.put(key, kept)
    # (a copy: the findings end in the review, whose reader may change them)
    return copy.deepcopy(kept)


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


#: sources whose static findings are kept (a few dicts each): the last candidates of an RL loop, which meets the
#: same completion again (several samples of one prompt often agree exactly)
STATIC_KEPT = 256


class _KeptFindings(SizedLRU[StaticFindings]):
    """Static findings by (source digest, target, CUDA source digest), at most ``size`` of them; least recently
    used dropped first (the lookup, lock and counters are the review caches' own, ``SizedLRU``)."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def put(self, key: tuple[Any, ...], findings: StaticFindings) -> None:
        with self._lock:
            self._d[key] = (findings, 0)  # (bounded by count: a few dicts each)
            self._d.move_to_end(key)
            while len(self._d) > self.size:
                self._d.popitem(last=False)
                self.evictions += 1


_STATIC = _KeptFindings(STATIC_KEPT)


# Reference kernels (baseline, expert) are trusted and deterministic in their trace: their
# evidence and estimates per (file content, target, shape) are computed once per process.
_REF_CACHE: dict[tuple[str, str, str, tuple[tuple[str, int], ...]], tuple[HardwareEvidence | None,
                                                                           dict[str, Any] | None]] = {}
_REF_LOCK = threading.Lock()
#: statuses of a reference kernel's run that say more about the machine than the kernel (a time limit, a
#: killed or lost process, a harness fault): they fail the review as a harness error and are never kept; a
#: kernel that raises or breaks a rule on a target does so every time, and its missing evidence is kept
TRANSIENT_STATUSES = frozenset({"timeout", "crash", "not-run", *HARNESS_STATUSES})


def _reference_kernel_evidence(task: Task, path: Path | None, target: str, dims: dict[str, int],
                               isolation: Isolation) -> tuple[HardwareEvidence | None, dict[str, Any] | None]:
    if path is None:
        return None, None
    src = path.read_text()
    key = (hashlib.sha256(src.encode()).hexdigest(), task.id, target, tuple(sorted(dims.items())))
    with _REF_LOCK:
        if key in _REF_CACHE:
            return _REF_CACHE[key]
    case = Case("ref", dims, False, task.families[0], 0, True)
    # (the task's own expert and baseline: trusted code, run in one child without the trace stage)
    runs = run_candidate(src, task.kernel, [CaseJob("ref", case_inputs(task, case), dict(task.params),
                                                    len(task.outputs))],
                         target=target, limits=sandbox_limits(task), isolation=isolation, trusted=False)
    if runs[0].status in TRANSIENT_STATUSES:
        # (the task's own kernel did not finish for a reason of the machine's: kept as "no evidence", the report
        # would lack the expert's or baseline's comparison, for this review and every later one of the process)
        raise JudgeError("evidence", f"the task's reference kernel {path.name} on {target} ended with "
                                     f"{runs[0].status} ({runs[0].error.get('message', '')}): a harness fault, retry")
    hw = perf = None
    if runs[0].status == "ok" and runs[0].traced:
        hw, perf, _ = trace_facts(task, runs[0], target, dims)
    with _REF_LOCK:
        _REF_CACHE[key] = (hw, perf)
    return hw, perf

