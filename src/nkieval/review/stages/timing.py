"""The review's timing instrumentation, in one place: ``with timed(timings, "scoring_s"): ...``.

The keys are docs/review.md's ("Overhead measurement") and ``benchmarks/review_throughput.py``'s.
The harness worker's items add to theirs from the worker thread and, after the child, from the
calling thread, so every addition takes a lock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

#: What the harness worker's items add up to (they overlap the child); present in every report.
WORKER_KEYS = ("numerics_s", "diagnosis_s", "reference_and_compare_s", "trace_parse_s", "prefetch_s")


class Timings:
    """Seconds per key, added up from any thread."""

    def __init__(self, zero: tuple[str, ...] = WORKER_KEYS) -> None:
        self._s: dict[str, float] = dict.fromkeys(zero, 0.0)
        self._lock = threading.Lock()

    def add(self, key: str, seconds: float) -> None:
        with self._lock:
            self._s[key] = self._s.get(key, 0.0) + seconds

    def update(self, seconds: dict[str, float]) -> None:
        for key, s in seconds.items():
            self.add(key, s)

    def as_dict(self) -> dict[str, float]:
        with self._lock:
            return dict(self._s)


@contextmanager
def timed(timings: Timings, key: str) -> Iterator[None]:
    """Add the wall time of the ``with`` body to ``timings[key]`` (also when it raises)."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        timings.add(key, time.perf_counter() - t0)
