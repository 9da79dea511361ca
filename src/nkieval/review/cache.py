"""Harness-side data of a review case that does not depend on the candidate, kept across reviews.

A case's inputs, the task's reference outputs on them and the numerics standard's prepared
check (float64 oracle, per-element bounds and every statistic derived from them alone) are a
function of the task and the case only: the task's ``task.toml`` and ``reference.py``, the
shape, the input family and the case seed. An RL loop reviews thousands of candidates of
one task with the same seed, so recomputing them for every candidate is most of a review's
cost. :class:`CaseCache` keeps them in the harness process, keyed by a content hash of those
files plus the case; a bounded LRU (bytes) evicts the least recently used cases.

Nothing here ever reaches candidate code: sandboxed children fork from the zygote (a clean
process that never holds this cache) and receive only their inputs, as inert array-file bytes
(:mod:`nkieval.review.npzio`). Cached
arrays are made read-only, so no harness code can change them in place.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import numpy as np

from nkieval.tasks import Task

#: The case cache's bound (MiB) where ``NKIEVAL_REVIEW_CACHE_MB`` does not set it (0 disables): a quarter of the
#: machine's memory shared by one review process per core (``score_many``'s and the service's pools), within
#: these limits (:func:`default_cache_mb`)
MIN_DEFAULT_MB, MAX_DEFAULT_MB = 1024, 8192
#: Outputs larger than this (elements) keep no prepared blocks (the oracle is streamed each time).
MAX_KEPT_ELEMENTS = 1 << 23


def readonly(a: np.ndarray) -> np.ndarray:
    """``a`` as a view nobody can write through (what a cache hands out is shared by every review)."""
    a = np.asarray(a)
    if a.flags.writeable:
        a = a.view()
        a.flags.writeable = False
    return a


def task_fingerprint(task: Task) -> str:
    """Content hash of what fixes a task's cases: ``task.toml`` and ``reference.py``."""
    h = hashlib.sha256()
    for p in (task.directory / "task.toml", task.reference_file):
        h.update(str(p.name).encode())
        h.update(b"\0")
        try:
            h.update(p.read_bytes())
        except OSError:
            h.update(repr(task).encode())
        h.update(b"\0")
    return h.hexdigest()


@dataclass
class CaseData:
    """One case's candidate-independent data. ``inputs`` and ``packed`` (the inputs as the
    sandbox's array-file bytes) are set at creation; the reference outputs and the prepared
    numerics check are built on first use (under ``lock``)."""

    inputs: dict[str, np.ndarray]
    #: bytes, or a read-only view of ``sealed``'s pages; None until a run that needs them packs them
    #: (:meth:`packed_inputs`: a candidate run in a child; the judge's own replays read ``inputs``)
    packed: Any = None
    sealed: Any = None  # the packed bytes as a ``sandbox.SealedInput`` (None where unsupported)
    reference: list[np.ndarray] | None = None
    prepared: Any = None
    prepared_reason: str | None = None
    prepared_done: bool = False
    #: the prepared checks of the outputs after the first that have their own oracle, by output name
    extra_prepared: dict[str, tuple[Any, str | None]] = field(default_factory=dict)
    #: other candidate-independent results on this case, by a key naming what computed them (the task's CUDA
    #: kernel's outputs on these inputs, by the source's hash); each value's arrays are read-only
    derived: dict[str, Any] = field(default_factory=dict)
    #: the longest time limit (s) a run of a ``derived`` key has run past, by key: a later review that gives it
    #: no more time skips it as timed out rather than pay for the same timeout again (candidate-independent)
    timeouts: dict[str, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def packed_inputs(self, pack: Callable[[dict[str, np.ndarray]], tuple[bytes, Any]]) -> tuple[Any, Any]:
        """(``packed``, ``sealed``), made by ``pack(inputs)`` = (bytes, ``SealedInput`` or None) on first use."""
        with self.lock:
            if self.packed is None:
                packed, self.sealed = pack(self.inputs)
                self.packed = packed if self.sealed is None else self.sealed.data
            return self.packed, self.sealed

    def get_reference(self, compute: Callable[[], list[np.ndarray]]) -> list[np.ndarray]:
        with self.lock:
            if self.reference is None:
                self.reference = [readonly(r) for r in compute()]
            return self.reference

    def get_prepared(self, compute: Callable[[], tuple[Any, str | None]]) -> tuple[Any, str | None]:
        with self.lock:
            if not self.prepared_done:
                self.prepared, self.prepared_reason = compute()
                self.prepared_done = True
            return self.prepared, self.prepared_reason

    def get_extra_prepared(self, name: str, compute: Callable[[], tuple[Any, str | None]]
                           ) -> tuple[Any, str | None]:
        with self.lock:
            if name not in self.extra_prepared:
                self.extra_prepared[name] = compute()
            return self.extra_prepared[name]

    def get_derived(self, key: str, compute: Callable[[], tuple[list[np.ndarray], Any]]) -> tuple[list[np.ndarray], Any]:
        """``compute()`` = (arrays, facts), once per key: the arrays are kept read-only; an exception is not kept
        (the next review computes again)."""
        with self.lock:
            hit = self.derived.get(key)
        if hit is not None:
            return hit
        arrays, facts = compute()  # (outside the lock: the case's other data stay available meanwhile)
        value = ([readonly(a) for a in arrays], facts)
        with self.lock:
            return self.derived.setdefault(key, value)

    def timed_out_within(self, key: str, limit_s: float) -> float | None:
        """The kept limit when ``key``'s run has already run past a limit of at least ``limit_s``, else None."""
        with self.lock:
            past = self.timeouts.get(key)
        return past if past is not None and limit_s <= past else None

    def note_timeout(self, key: str, limit_s: float) -> None:
        """``key``'s run ran past ``limit_s`` seconds."""
        with self.lock:
            self.timeouts[key] = max(limit_s, self.timeouts.get(key, 0.0))

    def nbytes(self) -> int:
        n = (0 if self.packed is None else len(self.packed)) + sum(a.nbytes for a in self.inputs.values())
        n += sum(r.nbytes for r in self.reference or [])
        n += sum(a.nbytes for arrays, _ in self.derived.values() for a in arrays)
        return n + self.prepared_nbytes()

    def prepared_nbytes(self) -> int:
        """Bytes held by the prepared numerics checks (their kept blocks: about 50 bytes per output element)."""
        n = 0
        for p in [self.prepared, *(x for x, _ in self.extra_prepared.values())]:
            if p is not None and hasattr(p, "nbytes"):
                n += int(p.nbytes())
        return n

    def shed_prepared(self) -> bool:
        """Drop the prepared numerics checks, which the next review of the case builds again (the same checks:
        they are a function of the inputs); the inputs, reference outputs and derived results stay. False when
        there is nothing to drop, or another thread holds the case (it may be building them). Never waits: the
        cache calls it under its own lock (a check's size is not asked either: that waits for a check building
        its blocks)."""
        if not self.lock.acquire(blocking=False):
            return False
        try:
            if self.prepared is None and all(x is None for x, _ in self.extra_prepared.values()):
                return False
            self.prepared, self.prepared_reason, self.prepared_done = None, None, False
            self.extra_prepared = {}
            return True
        finally:
            self.lock.release()


def new_case_data(inputs: dict[str, np.ndarray], packed: bytes | None = None, sealed: Any = None) -> CaseData:
    """``packed``: the inputs' array-file bytes when the caller has them (else packed on first use);
    ``sealed``: ``packed`` as a ``sandbox.SealedInput``, whose read-only view then stands for ``packed`` (one copy
    of the bytes)."""
    if packed is None:
        return CaseData({k: readonly(v) for k, v in inputs.items()})
    return CaseData({k: readonly(v) for k, v in inputs.items()}, packed if sealed is None else sealed.data, sealed)


V = TypeVar("V")


class SizedLRU(Generic[V]):
    """A thread-safe LRU of values kept with their sizes in bytes, counting hits, misses and evictions; what is
    kept and the bounds are each subclass's (``put``)."""

    def __init__(self) -> None:
        self._d: OrderedDict[Hashable, tuple[V, int]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = self.evictions = 0

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            hit = self._d.get(key)
            if hit is None:
                self.misses += 1
                return None
            self._d.move_to_end(key)
            self.hits += 1
            return hit[0]

    def clear(self) -> None:
        with self._lock:
            self._clear_locked()

    def _insert(self, key: Hashable, value: V, size: int, max_bytes: int) -> None:
        """(Re)insert ``key`` with ``size``, then trim to ``max_bytes`` (:meth:`_trim_locked`)."""
        with self._lock:
            self._d[key] = (value, size)
            self._d.move_to_end(key)
            self._trim_locked(max_bytes, key)

    def _trim_locked(self, max_bytes: int, newest: Hashable) -> None:
        """Evict the least recently used beyond ``max_bytes``; ``newest``, alone above the bound, is not kept (the
        cache's lock held)."""
        total = sum(s for _, s in self._d.values())
        while total > max_bytes and len(self._d) > 1:
            _, (_, s) = self._d.popitem(last=False)
            total -= s
            self.evictions += 1
        if total > max_bytes:
            self._d.pop(newest, None)
            self.evictions += 1

    def _clear_locked(self) -> None:
        self._d.clear()
        self.hits = self.misses = self.evictions = 0


class CaseCache(SizedLRU[CaseData]):
    """Bounded LRU of :class:`CaseData` by key; sizes are re-read when an entry is touched.

    A review pins its cases while it runs (:meth:`pinned`): a pinned case loses nothing. Over its bound, the cache
    first drops the prepared numerics checks of the cases not pinned, least recently used first, and evicts whole
    cases, least recently used first, only when that is not enough; cases pinned beyond the bound are trimmed when
    their review ends. A prepared check is most of a case's bytes (about 50 per output element, against a few for
    its inputs, reference outputs and the CUDA kernel's outputs together) and is rebuilt in about the time of one
    judged case, while the rest costs most to make again (the CUDA kernel's runs on the case, the reference): a
    reward worker that meets more tasks than its bound holds pays again for their prepared checks only, as long
    as the rest fits."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__()
        self.max_bytes = int(max_bytes)
        self.shed = 0
        self._pins: dict[Hashable, int] = {}

    def put(self, key: Hashable, data: CaseData) -> None:
        self.update(key, data)

    def update(self, key: Hashable, data: CaseData) -> None:
        """(Re)insert ``key`` with its current size, then trim to the bound."""
        if self.max_bytes <= 0:
            return
        self._insert(key, data, data.nbytes(), self.max_bytes)

    @contextmanager
    def pinned(self, keys: Iterable[Hashable | None]) -> Iterator[None]:
        """Nothing of the cases ``keys`` (None: a case not cached) is dropped inside the block; on leaving it, the
        cache is trimmed to its bound again."""
        ks = [k for k in keys if k is not None]
        with self._lock:
            for k in ks:
                self._pins[k] = self._pins.get(k, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                for k in ks:
                    n = self._pins.pop(k) - 1
                    if n:
                        self._pins[k] = n
                self._trim_locked(self.max_bytes, None)

    def _trim_locked(self, max_bytes: int, newest: Hashable) -> None:
        total = sum(s for _, s in self._d.values())
        if total <= max_bytes:
            return
        kept = self._pins.keys() | {newest}
        for k, (data, size) in list(self._d.items()):  # the checks first, least recently used first
            if total <= max_bytes:
                return
            if k not in kept and data.shed_prepared():
                now = data.nbytes()
                self._d[k] = (data, now)  # (its place in the order is kept)
                total -= size - now
                self.shed += 1
        for k, (_, size) in list(self._d.items()):  # then whole cases
            if total <= max_bytes:
                return
            if k not in kept:
                del self._d[k]
                total -= size
                self.evictions += 1
        if newest is not None and newest not in self._pins and total > max_bytes:  # alone over the bound
            del self._d[newest]
            self.evictions += 1

    def _clear_locked(self) -> None:
        super()._clear_locked()
        self.shed = 0

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"entries": len(self._d), "bytes": sum(s for _, s in self._d.values()), "hits": self.hits,
                    "misses": self.misses, "evictions": self.evictions, "prepared_shed": self.shed,
                    "max_bytes": self.max_bytes}


def max_bytes_from_env(var: str, default_mb: float) -> int:
    """A cache's byte bound: the environment variable ``var`` in MiB, or ``default_mb`` when unset or unreadable."""
    try:
        mb = float(os.environ.get(var, default_mb))
    except ValueError:
        mb = default_mb
    return int(mb * (1 << 20))


def default_cache_mb(memory_bytes: int | None = None, cpus: int | None = None) -> float:
    """The case cache's default bound: a quarter of the machine's memory over its cores, at least
    :data:`MIN_DEFAULT_MB` and at most :data:`MAX_DEFAULT_MB` (1 GiB where the memory cannot be read). A reward
    worker's cache should hold the cases of the tasks it meets per RL step (benchmarks/review_cache_cycle.py)."""
    if memory_bytes is None:
        try:
            memory_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            return MIN_DEFAULT_MB
    share = memory_bytes / (4 * max(1, cpus or os.cpu_count() or 1)) / (1 << 20)
    return float(min(MAX_DEFAULT_MB, max(MIN_DEFAULT_MB, share)))


#: The process-wide cache the pipeline uses (``review(..., cache=True)``).
CASE_CACHE = CaseCache(max_bytes_from_env("NKIEVAL_REVIEW_CACHE_MB", default_cache_mb()))


class TraceCache(SizedLRU[bytes]):
    """Programs recorded by earlier reviews in this process (:class:`nkieval.review.tracing.ProgramStream` keys
    and fills it), by everything their recording depended on: what the tracer was sent (the candidate's source,
    kernel name, target, instruction budget, the shape's input shapes, dtypes and parameters) and the sandbox it
    ran in (time and memory limits, the paths hidden from it, whether it was isolated). A compiler's cache, as
    Neuron keeps compiled kernels: the tracer sees no input value and no seed, so a review of the same source on
    a later seed (an RL loop's next step) replays the programs already recorded instead of tracing again. Only
    the programs of a tracer run that ended with a clean answer are kept (no reach for the harness, no malformed
    part: a run with one decides its review, and its programs are never reused). A kernel whose Python gives a
    different program each time it runs (a clock, a random draw) keeps its first one, as a compiled kernel
    would. In memory only; least recently used dropped first."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__()
        self.max_bytes = int(max_bytes)

    def put(self, key: Hashable, program: bytes) -> None:
        if len(program) > self.max_bytes // 4:
            return  # (one program never crowds out the rest)
        self._insert(key, program, len(program), self.max_bytes)

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"programs": len(self._d), "bytes": sum(n for _, n in self._d.values()), "hits": self.hits,
                    "misses": self.misses, "evictions": self.evictions}


#: The process's recorded programs (cleared by :func:`nkieval.review.stages.clear_caches`).
TRACES = TraceCache(max_bytes_from_env("NKIEVAL_TRACE_CACHE_MB", 256))


class TaskMemo(SizedLRU[Task]):
    """Tasks loaded by earlier reviews in this process: ``load_task`` parses ``task.toml``, runs ``reference.py``'s
    signature check and parses every NKI file the task ships (about 7 ms for a built-in task, a tenth of a short
    warm review), the same work for every review of the task. A task is kept by its directory and the stat of
    every file under it (path, size, modification and change times, inode), taken before it is loaded, so it is
    served again only while every one of them is unchanged and no file came or went (a changed task is loaded
    under a new key; the old entry ages out); a task that does not load is never kept (its error is raised each
    time). ``Task`` is frozen, so one object serves every review. At most ``max_tasks`` entries."""

    #: files under a task directory beyond which it is not kept (its stat would cost what a load does)
    MAX_FILES = 256

    def __init__(self, max_tasks: int = 64) -> None:
        super().__init__()
        self.max_tasks = max_tasks

    def load(self, path: str | os.PathLike[str]) -> Task:
        """``nkieval.tasks.load_task(path)``, or the task it gave for the same files."""
        from nkieval.tasks.loader import load_task, resolve_task_dir

        directory = str(resolve_task_dir(path))
        stamp = _files_stamp(directory, self.MAX_FILES)
        if stamp is None:
            return load_task(directory)
        key = (directory, stamp)
        task = self.get(key)
        if task is None:
            task = load_task(directory)
            self._insert(key, task, 1, self.max_tasks)
        return task


def _files_stamp(directory: str, max_files: int) -> tuple[Any, ...] | None:
    """(relative path, size, mtime, ctime, inode) of every file under ``directory``, sorted; None past
    ``max_files`` or when the tree cannot be read. Compiled-bytecode caches are left out (Python writes them)."""
    out: list[tuple[Any, ...]] = []
    try:
        for root, dirs, files in os.walk(directory):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for name in files:
                p = os.path.join(root, name)
                st = os.stat(p)
                out.append((os.path.relpath(p, directory), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino))
                if len(out) > max_files:
                    return None
    except OSError:
        return None
    return tuple(sorted(out))


#: The process's loaded tasks (cleared by :func:`nkieval.review.stages.clear_caches`).
TASKS = TaskMemo()
