"""Stage 1, load: the task, the rubric, the candidate's source, the integrity scan and every case's
inputs (from the cross-review case cache when the review has a seed)."""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from nkieval.review import malloc, npzio, replay_worker
from nkieval.review.cache import CASE_CACHE, TASKS, CaseData, new_case_data, task_fingerprint
from nkieval.review.integrity import IntegrityIssue, scan
from nkieval.review.rubric import Rubric, load_rubric
from nkieval.review.sandbox import CaseJob, Isolation, SandboxLimits, seal_input
from nkieval.review.verdict import check_target
from nkieval.tasks import Task
from nkieval.tasks.inputs import derive_seed, generate_inputs

#: What :func:`load_source` returns (followed by the file's bytes in hex) for a file that is not UTF-8 text.
NOT_TEXT = "\x00not-utf8\x00"


@dataclass(frozen=True)
class ReviewRequest:
    """``review()``'s arguments, as given."""

    task: Task | str | Path
    candidate: str | Path
    target: str | None
    seed: int | None
    rubric: Rubric | str
    families: tuple[str, ...] | None
    shapes: str
    isolation: Isolation
    limits: SandboxLimits | None
    progress: Callable[[str], None] | None
    compare_references: bool
    cache: bool | None
    trusted: bool


@dataclass(frozen=True)
class Case:
    """One (shape, input family) case of the review."""

    label: str
    dims: dict[str, int]
    hidden: bool
    family: str
    seed: int
    want_trace: bool


@dataclass
class Loaded:
    """What the later stages work from: the task, the candidate and its cases, ready to run."""

    request: ReviewRequest
    task: Task
    rubric: Rubric
    target: str
    source: str
    name: str
    seed: int
    cases: list[Case]
    integrity: list[IntegrityIssue]
    use_cache: bool
    fingerprint: str | None
    #: per case: its candidate-independent data and its case-cache key (None: not cached)
    data: list[CaseData]
    keys: list[tuple[Any, ...] | None]
    jobs: list[CaseJob]
    limits: SandboxLimits
    #: the candidate's programs by shape key, as its runs trace them: a later run of a shape (evidence,
    #: differential edge inputs) replays the program instead of tracing the candidate again
    programs: dict[str, bytes] = field(default_factory=dict)

    @cached_property
    def index(self) -> dict[str, int]:
        return {c.label: i for i, c in enumerate(self.cases)}


def load(req: ReviewRequest) -> Loaded:
    """Stage 1: everything the review needs before anything runs (timed as ``inputs_s``)."""
    malloc.tune_this_process()  # (the judge's own temporaries: see nkieval.review.malloc)
    task = req.task if isinstance(req.task, Task) else TASKS.load(req.task)
    rub = rubric_of(req.rubric)
    target = check_target(task, req.target)
    source, name = load_source(req.candidate)
    base_seed = secrets.randbits(63) if req.seed is None else int(req.seed)
    fams = tuple(req.families) if req.families else task.families
    cases = plan_cases(task, base_seed, fams, req.shapes)
    integrity = [IntegrityIssue(0, "the candidate is not UTF-8 text", "nothing can be checked", kind="encoding")] \
        if source.startswith(NOT_TEXT) else scan(source)
    use_cache = (req.seed is not None) if req.cache is None else bool(req.cache)
    fingerprint = task_fingerprint(task) if use_cache else None
    data_keys = [_case_data(task, c, fingerprint) for c in cases]
    # (a candidate run in a child reads its inputs as array-file bytes; the judge's replays read the arrays, and the
    # replay worker's jobs carry the bytes: packed once per kept case, not per job, where the case is kept)
    pack_up_front = not req.trusted or (use_cache and replay_worker.enabled())
    packs = [d.packed_inputs(_pack) if pack_up_front else (None, None) for d, _ in data_keys]
    jobs = [CaseJob(c.label, d.inputs, dict(task.params), len(task.outputs), c.want_trace, packed=p, sealed=s)
            for c, (d, _), (p, s) in zip(cases, data_keys, packs)]
    return Loaded(req, task, rub, target, source, name, base_seed, cases, integrity, use_cache, fingerprint,
                  [d for d, _ in data_keys], [k for _, k in data_keys], jobs, req.limits or sandbox_limits(task))


def evidence_key(task: Task, c: Case) -> tuple[int, bool]:
    """Which case's trace is the hardware evidence: the most compulsory HBM traffic, public first."""
    return sum(task.compulsory_bytes(c.dims)), not c.hidden


def plan_cases(task: Task, base_seed: int, families: tuple[str, ...], shapes: str) -> list[Case]:
    out = []
    for s in task.shapes:
        if shapes == "public" and s.hidden:
            continue
        for fam in families:
            out.append(Case(f"{s.label}/{fam}", dict(s.dims), s.hidden, fam, derive_seed(base_seed, s.label, fam),
                            want_trace=False))
    if out:
        # Only one trace is ever used (the largest shape's, first family): the child serialises and
        # ships no other, which on large traces costs more than the simulation itself.
        best = max(out, key=lambda c: evidence_key(task, c))
        out[out.index(best)] = Case(best.label, best.dims, best.hidden, best.family, best.seed, want_trace=True)
    return out


def case_inputs(task: Task, case: Case) -> dict[str, np.ndarray]:
    specs = [(t.name, t.concrete(case.dims), t.dtype, t.family) for t in task.inputs]
    return generate_inputs(specs, case.family, case.seed, case.label)


def _case_data(task: Task, c: Case, fingerprint: str | None) -> tuple[CaseData, tuple[Any, ...] | None]:
    """The case's candidate-independent data: from the cross-review cache when ``fingerprint`` is set."""
    key = None
    if fingerprint is not None:
        key = (fingerprint, c.label, tuple(sorted(c.dims.items())), c.family, c.seed)
        hit = CASE_CACHE.get(key)
        if hit is not None:
            return hit, key
    data = new_case_data(case_inputs(task, c))
    if key is not None:
        CASE_CACHE.put(key, data)
    return data, key


def _pack(inputs: dict[str, np.ndarray]) -> tuple[bytes, Any]:
    packed = npzio.dumps(inputs)
    return packed, seal_input(packed)


def load_source(candidate: str | Path) -> tuple[str, str]:
    """(source text, display name): a path to a .py file, or the source itself."""
    if isinstance(candidate, Path) or (isinstance(candidate, str) and "\n" not in candidate
                                        and candidate.endswith(".py") and Path(candidate).is_file()):
        p = Path(candidate)
        raw = p.read_bytes()
        try:
            return raw.decode("utf-8"), p.name
        except UnicodeDecodeError:
            # the candidate's fault, not the harness's: the integrity scan reports it (kind "encoding")
            return NOT_TEXT + raw.hex(), p.name
    return str(candidate), "candidate.py"


_RUBRICS: dict[tuple[str, int, int], Rubric] = {}


def rubric_of(rubric: Rubric | str) -> Rubric:
    """``load_rubric``, parsed once per file version (rubrics are frozen and only read)."""
    if isinstance(rubric, Rubric):
        return rubric
    from importlib import resources

    p = Path(rubric)
    f: Any = p if p.suffix == ".toml" and p.is_file() else resources.files("nkieval.review").joinpath(
        "rubrics", f"{rubric}.toml")
    try:
        st = os.stat(f)
    except (OSError, TypeError):  # not a plain file (zipped package): no caching
        return load_rubric(rubric)
    key = (str(f), st.st_mtime_ns, st.st_size)
    hit = _RUBRICS.get(key)
    if hit is None:
        hit = _RUBRICS[key] = load_rubric(rubric)
    return hit


def sandbox_limits(task: Task) -> SandboxLimits:
    return SandboxLimits(timeout_s=task.limits.timeout_s, memory_mb=task.limits.memory_mb,
                         max_instructions=task.limits.max_instructions)
