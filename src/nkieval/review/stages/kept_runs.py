"""CUDA runs of the differential check's cause search kept across reviews (candidate-independent work).

The cause search re-runs the task's CUDA source with one change at a time (a constant the port uses, a
mutation of ``kernel.cu``) on a case's inputs. What such a run returns depends on the task (its
``task.toml`` and ``reference.py``: :func:`nkieval.review.cache.task_fingerprint`), the run's CUDA source,
its parameters, the case's dimensions and inputs (their bytes), never on the candidate: the next flawed port
of the task with the same seed (an RL loop's common case) tries the same runs. :data:`KEPT_RUNS` keeps them
in the judge's process, keyed by all of that (:func:`run_key`).

**Exactly what a fresh run gives.** A kept run is returned with the executor work units it took
(:func:`nkieval.cuda.executor_work`: counted by the interpreter, the same on every machine and every time),
which the search charges against its budget as a fresh run's, so a warm review tries the same hypotheses in
the same order and states the same cause as a cold one, on any machine. Against the limit a review gives a
run:

* a run that finished (outputs, or a fault: ``None``) within the limit is returned as it was;
* a run that took longer than the limit, or that ran past a limit at least as long, times out: ``None``,
  charged exactly the limit (a fresh run is stopped there; a fresh run that finishes just past its limit
  counts as a timeout too, so the first review and every later one agree); a timed-out run is kept as a
  timeout, never as a success;
* a run that ran past a shorter limit runs again (more time may finish it), and its new outcome is kept.

**Bounded.** An LRU of at most :data:`DEFAULT_MAX_MB` MiB of output arrays (``NKIEVAL_KEPT_RUNS_MB``
overrides it; 0 keeps nothing) and :data:`MAX_ENTRIES` runs; a kept run counts its outputs' bytes plus
:data:`ENTRY_OVERHEAD` bytes. Kept arrays are read-only. Nothing here reaches candidate code: the judge's
process keeps it, sandboxed children never see it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from nkieval.review.cache import SizedLRU, max_bytes_from_env, readonly

#: default bound on the kept runs' output arrays (MiB); ``NKIEVAL_KEPT_RUNS_MB`` overrides it (0 disables)
DEFAULT_MAX_MB = 256
#: kept runs at most, whatever their size (a timeout or a fault keeps no arrays)
MAX_ENTRIES = 4096
#: bytes a kept run counts besides its arrays (its key, its record)
ENTRY_OVERHEAD = 512


@dataclass(frozen=True)
class KeptRun:
    """One run's outcome: ``outputs`` (read-only; None where the run faulted or timed out), the executor work
    units it took, and the work limit it ran past (None: it finished or faulted)."""

    outputs: tuple[np.ndarray, ...] | None
    took: int
    timed_out_at: int | None = None

    def nbytes(self) -> int:
        return ENTRY_OVERHEAD + sum(a.nbytes for a in self.outputs or ())


def inputs_digest(inputs: Mapping[str, np.ndarray]) -> str:
    """SHA-256 of named arrays: names, dtypes, shapes and bytes (any dtype: ml_dtypes' bf16 has no buffer
    format, so the bytes are read as uint8)."""
    h = hashlib.sha256()
    for k, a in inputs.items():
        a = np.ascontiguousarray(a)
        h.update(f"{k}:{a.dtype.str}:{a.shape};".encode())
        h.update(a.reshape(-1).view(np.uint8))
    return h.hexdigest()


def run_key(fingerprint: str, source: str, inputs_sha: str, dims: Mapping[str, int],
            params: Mapping[str, Any]) -> tuple[str, ...]:
    """What a CUDA run of a task's kernel depends on: the task's content hash, the CUDA source run, the inputs'
    digest (:func:`inputs_digest`), the dimensions and the parameters."""
    return (fingerprint, hashlib.sha256(source.encode()).hexdigest(), inputs_sha,
            repr(sorted(dims.items())), repr(sorted(params.items())))


class KeptRuns(SizedLRU[KeptRun]):
    """A bounded LRU of :class:`KeptRun` by key (bytes and entries); thread-safe."""

    def __init__(self, max_bytes: int, max_entries: int = MAX_ENTRIES) -> None:
        super().__init__()
        self.max_bytes, self.max_entries = int(max_bytes), int(max_entries)
        self._bytes = 0

    def put(self, key: Hashable, run: KeptRun) -> None:
        """Keep ``run`` under ``key`` (replacing what was there), then evict the least recently used beyond the
        bounds; a run larger than the whole bound is not kept."""
        size = run.nbytes()
        with self._lock:
            old = self._d.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            if size > self.max_bytes or self.max_entries <= 0:
                return
            self._d[key] = (run, size)
            self._bytes += size
            while self._bytes > self.max_bytes or len(self._d) > self.max_entries:
                _, (_, gone) = self._d.popitem(last=False)
                self._bytes -= gone
                self.evictions += 1

    def _clear_locked(self) -> None:
        super()._clear_locked()
        self._bytes = 0

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"entries": len(self._d), "bytes": self._bytes, "hits": self.hits, "misses": self.misses,
                    "evictions": self.evictions, "max_bytes": self.max_bytes, "max_entries": self.max_entries}

    def run(self, key: Hashable, limit: int, compute: Callable[[int], list[np.ndarray] | None],
            clock: Callable[[], int]) -> tuple[list[np.ndarray] | None, int]:
        """(outputs or None, executor work units charged) of the run ``key`` under ``limit`` work units, kept
        or fresh (module docstring). ``compute(limit)`` runs it: its outputs, None where it faults, or it raises
        ``nkieval.cuda.ExecutorTimeout``; ``clock`` is the executor's work count
        (:func:`nkieval.cuda.executor_work`). Anything else it raises propagates, nothing kept (the safety net's
        ``nkieval.cuda.ExecutorSafetyNet``: a harness fault)."""
        from nkieval.cuda import ExecutorTimeout

        limit = int(limit)
        kept = self.get(key)
        if kept is not None:
            if kept.timed_out_at is None and kept.took <= limit:
                return (None if kept.outputs is None else list(kept.outputs)), kept.took
            if kept.timed_out_at is None or limit <= kept.timed_out_at:
                return None, limit  # (a fresh run under this limit would be stopped at it)
        t0 = clock()
        try:
            out = compute(limit)
        except ExecutorTimeout:
            self.put(key, KeptRun(None, clock() - t0, limit))
            return None, limit
        took = clock() - t0
        arrays = None if out is None else tuple(readonly(a) for a in out)
        self.put(key, KeptRun(arrays, took))
        if took > limit:  # (finished past its limit between two checks: a timeout, as every later review sees it)
            return None, limit
        return (None if arrays is None else list(arrays)), took


def kept_cuda_run(task: Any, fingerprint: str, inputs: Mapping[str, np.ndarray], inputs_sha: str,
                  dims: Mapping[str, int], source: str, params: Mapping[str, Any], limit: int,
                  faults: tuple[type[Exception], ...] | None = None, store: KeptRuns | None = None,
                  resumable: Any = None) -> tuple[list[np.ndarray] | None, int]:
    """The task's kernel as ``source`` with ``params`` on a case's inputs (``inputs_sha``: their
    :func:`inputs_digest`) under ``limit`` executor work units: (outputs, or None where it faults or times out;
    the work units charged), from :data:`KEPT_RUNS` when kept (:meth:`KeptRuns.run`). ``faults``: the errors
    that make a run a fault, kept as None (default ``nkieval.cuda.CudaError``, the executor's own); any other
    error propagates and nothing is kept (the judge fails closed), and so does the executor's safety net
    (``nkieval.cuda.ExecutorSafetyNet``) whatever ``faults`` says. ``store``: where runs are kept (default
    :data:`KEPT_RUNS`; a review without the cross-review cache passes its own: :func:`store_for`).
    ``resumable``: a :class:`nkieval.cuda.resume.ResumableRun` of the original source on these inputs, dims and
    params: a run not kept is resumed from its state where ``source`` first differs, charged as a fresh run."""
    from nkieval.cuda import CudaError, ExecutorSafetyNet, ExecutorTimeout, executor_work, run_task_cuda

    caught = (CudaError,) if faults is None else faults

    def compute(work_limit: int) -> list[np.ndarray] | None:
        try:
            if resumable is not None:
                return resumable.run(source, work_limit)
            return list(run_task_cuda(task, inputs, dims, dict(params), source=source, work_limit=work_limit)[0])
        except (ExecutorTimeout, ExecutorSafetyNet):
            raise
        except caught:
            return None

    clock = executor_work
    if resumable is not None:
        resumable.credited = 0

        def clock() -> int:  # (not the capturing run of the original a resumable run makes first)
            return executor_work() + resumable.credited
    kept = KEPT_RUNS if store is None else store
    return kept.run(run_key(fingerprint, source, inputs_sha, dims, params), limit, compute, clock)


def store_for(keep: bool) -> KeptRuns:
    """:data:`KEPT_RUNS` when runs are kept across reviews, else a store of this review's own (a search runs
    some mutants on the same inputs twice: within one review they are run once, as with the cache)."""
    return KEPT_RUNS if keep else KeptRuns(KEPT_RUNS.max_bytes, KEPT_RUNS.max_entries)


#: the process-wide kept runs of the cause search (cleared by :func:`nkieval.review.stages.clear_caches`)
KEPT_RUNS = KeptRuns(max_bytes_from_env("NKIEVAL_KEPT_RUNS_MB", DEFAULT_MAX_MB))
