"""Fewer full garbage collections while a kernel runs.

A run's trace grows by a few tracked objects per instruction (the record, its operand list and accesses), and
CPython starts a full collection each time the objects that survived the young generations reach a quarter of the
old generation's size, so a run of tens of thousands of instructions makes several full collections, each walking
every object the trace holds so far: 7 of them, 7 % of the CPU time, in the 8-head, 4,096-token Beta-1 flash
backward (docs/compat-public.md). (The judge's child process sets its own thresholds,
``nkieval.review.child.GC_THRESHOLDS``; the judge's replays ask for them through :func:`collector_thresholds`, the
one mechanism here, so overlapping blocks restore the process's thresholds in any order.) Nothing a run makes needs
them: tiles are freed by reference counting, and the young generations, still collected as before, free short-lived
cycles. So while any kernel runs, a full collection waits for ``FULL_EVERY`` collections of the middle generation
instead of CPython's 10 (the quarter rule still applies): in practice none during a run of that size. The cost: a
reference cycle that outlives two young collections and holds a tile keeps it until the run ends (none in the public
cases measured). The previous thresholds come back when the last concurrent run ends.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

#: middle-generation collections between two full ones while a kernel runs (CPython's default is 10)
FULL_EVERY = 1000

_LOCK = threading.Lock()
#: the thresholds each running block asked for (None: only the rarer full collections)
_active: list[tuple[int, int, int] | None] = []
_saved: tuple[int, int, int] | None = None


@contextmanager
def collector_thresholds(thresholds: tuple[int, int, int] | None = None) -> Iterator[None]:
    """Within the block (and any running concurrently), full collections are ``FULL_EVERY`` times rarer and each
    generation's threshold is at least ``thresholds``' (the judge's replays ask for a simulation child's). One
    mechanism for every caller, so blocks that overlap in any order restore the process's own thresholds when
    the last of them ends (two independent save-and-restore blocks, interleaved across threads, could leave one's
    thresholds behind)."""
    global _saved
    with _LOCK:
        if not _active:
            _saved = gc.get_threshold()
        _active.append(thresholds)
        _apply()
    try:
        yield
    finally:
        with _LOCK:
            _active.remove(thresholds)
            if _active:
                _apply()
            elif _saved is not None:
                gc.set_threshold(*_saved)
                _saved = None


def _apply() -> None:  # (under _LOCK)
    assert _saved is not None
    t0, t1, t2 = _saved
    for t in _active:
        if t is not None:
            t0, t1, t2 = max(t0, t[0]), max(t1, t[1]), max(t2, t[2])
    gc.set_threshold(t0, t1, max(t2, FULL_EVERY))


def fewer_full_collections() -> contextlib.AbstractContextManager[None]:
    """Within the block (and any running concurrently), full collections are ``FULL_EVERY`` times rarer."""
    return collector_thresholds(None)


def paced(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` run inside :func:`fewer_full_collections`."""

    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        with fewer_full_collections():
            return fn(*args, **kwargs)

    return run
