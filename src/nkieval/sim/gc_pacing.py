"""Fewer full garbage collections while a kernel runs.

A run's trace grows by a few tracked objects per instruction (the record, its operand list and accesses), and
CPython starts a full collection each time the objects that survived the young generations reach a quarter
of the old generation's size, so a run of tens of thousands of instructions makes several full collections,
each walking every object the trace holds so far: 7 of them, 7 % of the CPU time, in the 8-head, 4,096-token
Beta-1 flash backward (docs/compat-public.md). (The judge's child process sets its own thresholds,
``nkieval.review.child.GC_THRESHOLDS``; this covers every other caller of ``run_kernel``.) Nothing a run makes needs them: tiles are freed by reference counting, and
the young generations, still collected as before, free short-lived cycles. So while any kernel runs, a full
collection waits for ``FULL_EVERY`` collections of the middle generation instead of CPython's 10 (the
quarter rule still applies): in practice none during a run of that size. The cost: a reference cycle that
outlives two young collections and holds a tile keeps it until the run ends (none in the public cases
measured). The previous thresholds come back when the last concurrent run ends.
"""

from __future__ import annotations

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
_active = 0
_saved: tuple[int, ...] | None = None


@contextmanager
def fewer_full_collections() -> Iterator[None]:
    """Within the block (and any running concurrently), full collections are ``FULL_EVERY`` times rarer."""
    global _active, _saved
    with _LOCK:
        if _active == 0:
            _saved = gc.get_threshold()
            t0, t1, t2 = _saved
            gc.set_threshold(t0, t1, max(t2, FULL_EVERY))
        _active += 1
    try:
        yield
    finally:
        with _LOCK:
            _active -= 1
            if _active == 0 and _saved is not None:
                gc.set_threshold(*_saved)
                _saved = None


def paced(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` run inside :func:`fewer_full_collections`."""

    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        with fewer_full_collections():
            return fn(*args, **kwargs)

    return run
