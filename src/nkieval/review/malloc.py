"""glibc malloc settings for every process of a review that simulates or judges: one policy, in one place.

Judging an output allocates a dozen block-sized float64 temporaries (2 MiB each at the default block) and frees
them, and a simulation allocates and frees tiles by the thousand; glibc's default trims or unmaps that memory
right away, so the next block or tile touches fresh pages again: about 5 000 page faults per 300 000-element
output, half of its judging time on the development machine. Raising the mmap threshold to 32 MiB (glibc's own
dynamic maximum) and the trim threshold to 256 MiB keeps up to that much freed memory for reuse.

The judge and the replay worker set it on themselves (:func:`tune_this_process`); the sandbox's children get it
through their environment (:func:`child_env`). ``NKIEVAL_REVIEW_MALLOPT=0`` leaves the allocator alone
everywhere.

The tracer is the opposite case (:func:`tracer_env`). A recording computes no values, yet gives every tensor it
makes zeroed storage (views, reshapes and bitcasts work on it as on real data): 12-50 MB per request on the
built-in experts, nearly none of it ever touched. glibc's dynamic mmap threshold rises to the size of the
largest mapped block freed, after which such blocks come from the heap, where ``calloc`` must clear them, and
in a freshly forked worker every page it clears is first copied from the zygote; mapped, they stay untouched
zero pages. A fixed low threshold keeps them mapped: the tracer worker's page faults per request 4,572 → 1,720
on gemm_bf16's expert.
"""

from __future__ import annotations

import os

MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 256 << 20
ENV_OFF = "NKIEVAL_REVIEW_MALLOPT"

_TUNED: list[bool] = []


def enabled() -> bool:
    return os.environ.get(ENV_OFF, "1") != "0"


def tune_this_process() -> None:
    """Set the thresholds on this process's allocator (``mallopt``; glibc on Linux only; once per process)."""
    if _TUNED:
        return
    _TUNED.append(True)
    if not enabled():
        return
    import platform

    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return
    try:
        import ctypes

        mallopt = ctypes.CDLL("libc.so.6").mallopt
        m_trim_threshold, m_mmap_threshold = -1, -3  # malloc.h
        mallopt(m_mmap_threshold, MMAP_THRESHOLD)
        mallopt(m_trim_threshold, TRIM_THRESHOLD)
    except (OSError, AttributeError):
        pass


#: the tracer's mmap threshold: blocks from this size on are mapped, and their untouched pages cost nothing
TRACER_MMAP_THRESHOLD = 64 << 10


def tracer_env() -> dict[str, str]:
    """The tracer's allocator setting, as environment variables for its sandbox's zygote (see the module's doc)."""
    if not enabled():
        return {}
    return {"MALLOC_MMAP_THRESHOLD_": str(TRACER_MMAP_THRESHOLD)}


def child_env() -> dict[str, str]:
    """The same thresholds as environment variables, for a process started with a fresh environment."""
    if not enabled():
        return {}
    return {"MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD), "MALLOC_TRIM_THRESHOLD_": str(TRIM_THRESHOLD)}
