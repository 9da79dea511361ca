"""An eager Beta-1 launch that meets a very large on-chip declaration restarts as a recorded program, replayed.

Compiler dumps declare whole problems as on-chip block tensors (NKIBench's kernels: 2-6 GB, on a chip with 24 MiB
of SBUF), which the compiler places block by block as each block's live range allows. Run eagerly, every block
is held until the kernel drops the tensor; a recorded program's replay holds each block only while it is live
(:mod:`nkieval.sim.program.regions`). These kernels declare their tensors first, so an eager launch that may
restart (:func:`may_restart`) gives up at the first on-chip declaration of :func:`threshold` bytes or more
(:class:`NeedsReplay`, raised by :func:`check_declaration`, before anything is computed), and the launcher records
the kernel from its inputs' shapes and dtypes and replays the program on the inputs: the same outputs, trace and
warnings as the eager run, the way a review's judge runs every kernel. ``NKIEVAL_BETA1_REPLAY_FROM`` sets the
threshold in bytes (``0``: never restart).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

#: on-chip bytes of one declaration from which an eager launch restarts as a replay
REPLAY_FROM_BYTES = 256 << 20
ENV = "NKIEVAL_BETA1_REPLAY_FROM"

_ARMED = threading.local()


class NeedsReplay(Exception):
    """An eager launch declared an on-chip tensor of :func:`threshold` bytes or more: the launcher runs it again as
    a recorded program, replayed."""


def threshold() -> int:
    """The declaration size (bytes) that restarts an eager launch; 0: never."""
    raw = os.environ.get(ENV)
    try:
        return REPLAY_FROM_BYTES if raw is None else max(0, int(raw))
    except ValueError:
        return REPLAY_FROM_BYTES


@contextmanager
def may_restart(limit: int) -> Iterator[None]:
    """Within, on this thread, an on-chip declaration of ``limit`` bytes or more raises :class:`NeedsReplay`
    (``limit`` 0: none does). The limit is read once per launch (:func:`threshold`), not per declaration."""
    prev = getattr(_ARMED, "limit", 0)
    _ARMED.limit = limit
    try:
        yield
    finally:
        _ARMED.limit = prev


def check_declaration(nbytes: int) -> None:
    """Called by the front end as a kernel declares an on-chip tensor of ``nbytes``."""
    limit = getattr(_ARMED, "limit", 0)
    if limit and nbytes >= limit:
        raise NeedsReplay(f"an on-chip tensor of {nbytes} bytes")


def replayable(args: Any, kwargs: dict[str, Any]) -> bool:
    """Whether a launch's arguments can be given to a recording as shapes and dtypes (NumPy arrays of the types
    Beta 1 has, and plain values), so that it may restart as a replay."""
    def plain(x: Any) -> bool:
        if isinstance(x, tuple | list):
            return all(plain(e) for e in x)
        return x is None or isinstance(x, bool | int | float | str)

    def ok(x: Any) -> bool:
        if isinstance(x, np.ndarray):
            return x.dtype.kind in "fbiuV" and not (x.dtype.kind in "iu" and x.dtype.itemsize == 8)
        return plain(x)

    return all(ok(a) for a in args) and all(ok(v) for v in kwargs.values())
