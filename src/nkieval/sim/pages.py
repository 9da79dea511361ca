"""Storage as zero pages that no one has touched yet, handed back to the system region by region.

A kernel may declare block tensors far larger than the chip (compiler dumps declare whole problems as on-chip
block tensors, several GB, which the compiler then places block by block as each block's live range allows).
An eager run cannot know when a block is dead, so it holds them all; a replay of a recorded program can
(:mod:`nkieval.sim.program.regions`). For such a tensor the replay asks for storage here: an anonymous mapping
of its own, so that a page takes memory only once something touches it (huge pages are refused: one touch
would bring in the 2 MiB around it), and the pages of a dead region can be given back (``MADV_DONTNEED``:
they read as zeros afterwards, which nothing reads).
"""

from __future__ import annotations

import math
import mmap
from typing import Any

import numpy as np

#: the system's page: the unit in which memory is taken and given back
PAGE = mmap.PAGESIZE
#: the smallest storage worth a mapping of its own (a kernel's ordinary tiles are far smaller)
MIN_BYTES = 1 << 24


def zero_pages(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """Zeros of ``shape`` and ``dtype`` in an anonymous mapping of their own, no page of it resident yet."""
    sd = np.dtype(dtype)
    n = math.prod(shape)
    mm = mmap.mmap(-1, max(1, n * sd.itemsize), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if hasattr(mmap, "MADV_NOHUGEPAGE"):
        mm.madvise(mmap.MADV_NOHUGEPAGE)
    return np.frombuffer(mm, dtype=sd, count=n).reshape(shape)


def _mapping(arr: np.ndarray) -> mmap.mmap | None:
    base: Any = arr
    while base is not None and not isinstance(base, mmap.mmap):
        base = base.obj if isinstance(base, memoryview) else getattr(base, "base", None)
    return base


def own_mapping(arr: np.ndarray) -> bool:
    """Whether ``arr`` is (a view of) storage from :func:`zero_pages`."""
    return _mapping(arr) is not None


def give_back(arr: np.ndarray, start: int, length: int) -> bool:
    """Hand back the pages of bytes ``[start, start + length)`` of every row (first dimension) of ``arr``, an
    array from :func:`zero_pages` whose row length, ``start`` and ``length`` are whole pages; they read as zeros
    afterwards. False (nothing done) for any other array or range."""
    mm = _mapping(arr)
    rows = arr.shape[0] if arr.ndim else 0
    row = arr.nbytes // rows if rows else 0
    if mm is None or not row or row % PAGE or start % PAGE or length % PAGE or start + length > row:
        return False
    if length == row:  # (whole rows: one call)
        mm.madvise(mmap.MADV_DONTNEED, 0, arr.nbytes)
        return True
    for p in range(rows):
        mm.madvise(mmap.MADV_DONTNEED, p * row + start, length)
    return True
