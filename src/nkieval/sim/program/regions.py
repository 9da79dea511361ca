"""Live ranges of a program's large on-chip tensors, region by region, so that a replay holds only live regions.

Compiler dumps declare whole problems as on-chip block tensors (NKIBench's kernels: 2-6 GB of them, of a chip
with 24 MiB of SBUF), which the compiler places block by block as each block's live range allows. An eager run
holds every block until the kernel drops the tensor. A recorded program says, before it runs, which part of
which tensor each of its steps touches, so its replay need not:

* at compile time (:func:`scan_body`), the body's top-level steps are walked once for the views of every
  on-chip allocation that may be large (:data:`nkieval.sim.pages.MIN_BYTES`); an allocation is left out
  (held whole, as before) where any use of it is not a plain view at a top-level step: one inside a device
  loop, one a runtime index remakes, one placed at an explicit address or allocated with a fill value;
* at replay (:class:`RegionPlan`), once the allocation's storage is known: each partition's bytes are cut into
  regions of whole pages (a PSUM tile's in regions whose flag bytes are whole pages too), and each region's first
  and last touching step are found from the views' byte ranges within a partition (a view whose range within a
  partition cannot be bounded touches every region). The storage starts as untouched zero pages; a region's
  sentinels are written just before its first touching step (what allocating wrote to the whole tile before),
  and its pages are given back just after its last (:func:`nkieval.sim.pages.give_back`).

Nothing a step reads changes: a region holds the sentinels an eager allocation would have had when it is first
touched, and no step touches it after its pages are given back. Regions no step touches take no memory at all.

A region zeroed long before it is used (a block tensor declared with ``nl.zeros``: its blocks memset one by one
at the declaration, each then accumulated into far later) is *parked* between the two: after the touch that
begins the region's longest gap between touching steps, a region whose bytes are all zero (and, in PSUM, whose
matmul flags are all clear and whose other-write flags are all set or all clear: what a memset leaves) gives its
pages back, and just before its next touching step its other-write flags are set again where they were (its
bytes and matmul flags read as zeros already). What the next step reads is what it would have read; a region
whose bytes are not so found is left as it is (one look per region, at its longest gap).
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import numpy as np

from nkieval.sim.pages import MIN_BYTES, PAGE, give_back, own_mapping
from nkieval.sim.storage import drop_f32
from nkieval.sim.tensor import write_sentinels

#: the widest storage element of an NKI dtype, for the compile-time guess of which allocations may be large
_MAX_ITEMSIZE = 4


def scan_body(events: list[Any], ret: Any, sites: list[Any], views: list[Any]) -> dict[int, list[tuple[int, Any]]]:
    """For each large on-chip allocation of a body's top-level events that only plain views at top-level steps
    use: its allocating step's index and its uses as ``(step index, geometry)``, the allocating step first.
    ``ret``: the body's return value (an allocation it returns is held whole); ``sites``: the body's compiled
    allocation sites; ``views``: its compiled views (``aid``, ``g``)."""
    if not any(_may_be_large(s) for s in sites):
        return {}  # (the common case: one look at the sites, no walk of the events)
    uses: dict[int, list[tuple[int, Any]]] = {}
    excluded: set[int] = set()
    for i, ev in enumerate(events):
        kind = ev[0]
        if kind == "a":
            _, aid, site, addr, fill = ev
            if addr is None and fill is None and _may_be_large(sites[site]):
                uses[aid] = [(i, None)]
        elif kind == "f":
            continue
        else:
            _collect(ev[1:], i, views, uses, excluded, kind == "L")
    _collect(ret, len(events), views, uses, excluded, True)
    for aid in excluded:
        uses.pop(aid, None)
    return uses


def _may_be_large(site: Any) -> bool:
    return bool(site.buf.on_chip and math.prod(site.shape) * _MAX_ITEMSIZE >= MIN_BYTES)


def _collect(x: Any, step: int, views: list[Any], uses: dict[int, list[tuple[int, Any]]], excluded: set[int],
             exclude: bool) -> None:
    """The plain views in ``x`` (an event's payload) as uses at ``step``; in a remade view or with ``exclude``
    (a device loop), their allocations are excluded."""
    if type(x) is list:
        for e in x:
            _collect(e, step, views, uses, excluded, exclude)
    elif type(x) is dict:
        if len(x) == 1:
            (k, v), = x.items()
            if k == "T" and type(v) is int and 0 <= v < len(views):
                view = views[v]
                if exclude:
                    excluded.add(view.aid)
                else:
                    got = uses.get(view.aid)
                    if got is not None:
                        got.append((step, view.g))
                return
            if k == "V":
                _collect(v, step, views, uses, excluded, True)
                return
        for e in x.values():
            _collect(e, step, views, uses, excluded, exclude)


class RegionPlan:
    """One replayed allocation's regions: which to fill before, and which to give back after, each step."""

    __slots__ = ("alloc", "fills", "gives", "other_set", "parked", "parks", "region", "resumes", "row")

    def __init__(self, alloc: Any, uses: list[tuple[int, Any]]) -> None:
        storage = alloc.storage
        self.alloc = alloc
        self.row = storage.nbytes // storage.shape[0]
        self.region = _region_bytes(alloc)
        first, last, park, resume = self._ranges(uses[1:])
        self.fills = _runs(first)
        self.gives = _runs(last)
        self.parks = _runs(park)
        self.resumes = _runs(resume)
        n = self.row // self.region
        self.parked = np.zeros(n, dtype=bool)
        self.other_set = np.zeros(n, dtype=bool)  # (a parked PSUM region's other-write flags were all set)

    def before(self) -> set[int]:
        """The steps before which this plan has work (:meth:`run_before`)."""
        return set(self.fills) | set(self.resumes)

    def after(self) -> set[int]:
        """The steps after which this plan has work (:meth:`run_after`)."""
        return set(self.gives) | set(self.parks)

    def run_before(self, step: int) -> None:
        if step in self.resumes:
            self.resume(step)
        if step in self.fills:
            self.fill(step)

    def run_after(self, step: int) -> None:
        if step in self.gives:
            self.give_back(step)
        if step in self.parks:
            self.park(step)

    @staticmethod
    def usable(alloc: Any) -> bool:
        """Whether the allocation's storage can be cut into regions (its partition's bytes, whole regions)."""
        st = alloc.storage
        if st.ndim < 2 or not st.flags.c_contiguous or alloc.slot is not None or not own_mapping(st):
            return False
        return (st.nbytes // st.shape[0]) % _region_bytes(alloc) == 0

    def _ranges(self, uses: list[tuple[int, Any]]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Each region's first and last touching step, and the two touching steps around its longest gap (the
        most steps between two touching steps, at least one): where it may be parked and where it resumes (-1:
        none)."""
        n = self.row // self.region
        first = np.full(n, -1, dtype=np.int64)
        last = np.full(n, -1, dtype=np.int64)
        park = np.full(n, -1, dtype=np.int64)
        resume = np.full(n, -1, dtype=np.int64)
        longest = np.ones(n, dtype=np.int64)  # (a gap must leave at least one step out)
        for step, g in uses:
            span = _within_partition(g, self.row)
            if span is None:
                continue
            r0, r1 = span[0] // self.region, (span[1] - 1) // self.region + 1
            f, prev = first[r0:r1], last[r0:r1]
            gap = step - prev  # (uses come in step order)
            longer = (prev >= 0) & (gap > longest[r0:r1])
            if longer.any():
                np.copyto(park[r0:r1], prev, where=longer)
                np.copyto(resume[r0:r1], step, where=longer)
                np.copyto(longest[r0:r1], gap, where=longer)
            np.copyto(f, step, where=f < 0)  # (the first use sets it)
            prev[...] = step
        return first, last, park, resume

    def fill(self, step: int) -> None:
        """Write the sentinels of the regions first touched at ``step``."""
        st = self.alloc.storage
        flat = st.reshape(st.shape[0], -1)
        per = self.region // st.itemsize
        for r0, r1 in self.fills[step]:
            write_sentinels(flat[:, r0 * per:r1 * per], self.alloc.dtype)

    def give_back(self, step: int) -> None:
        """Hand back the pages of the regions last touched at ``step`` (and their flags')."""
        a = self.alloc
        for r0, r1 in self.gives[step]:
            self._release(r0, r1)
        if a.f32:
            drop_f32(a)  # (conversions of what was read: caches, some of them now of dead regions)

    def park(self, step: int) -> None:
        """After ``step``, where some regions' longest gaps begin: give back the pages of those whose bytes are all
        zero and whose flags are as a memset leaves them (:meth:`resume` sets the flags again)."""
        a = self.alloc
        for r0, r1 in self.parks[step]:
            zero, other_set = self._zeroed(r0, r1)
            for z0, z1 in _true_runs(zero):
                g0, g1 = r0 + z0, r0 + z1
                self._release(g0, g1)
                self.parked[g0:g1] = True
                self.other_set[g0:g1] = other_set[z0:z1]
        if a.f32:
            drop_f32(a)

    def _release(self, r0: int, r1: int) -> None:
        """Hand back the pages of regions ``[r0, r1)`` (and their flags')."""
        a = self.alloc
        isz = a.storage.itemsize
        give_back(a.storage, r0 * self.region, (r1 - r0) * self.region)
        for flags in (a.mm_written, a.other_written):
            if flags is not None:
                give_back(flags, r0 * self.region // isz, (r1 - r0) * self.region // isz)

    def resume(self, step: int) -> None:
        """Before ``step``, the parked regions it touches again: their bytes and matmul flags read as zeros;
        their other-write flags are set again where they were."""
        a = self.alloc
        per = self.region // a.storage.itemsize  # (elements, so flag bytes, of a region per partition)
        for r0, r1 in self.resumes[step]:
            if a.other_written is not None:
                flags = a.other_written.reshape(a.other_written.shape[0], -1)
                for s0, s1 in _true_runs(self.parked[r0:r1] & self.other_set[r0:r1]):
                    flags[:, (r0 + s0) * per:(r0 + s1) * per] = True
            self.parked[r0:r1] = False

    def _zeroed(self, r0: int, r1: int) -> tuple[np.ndarray, np.ndarray]:
        """Of regions ``[r0, r1)``: which can be parked (bytes all zero; matmul flags all clear, other-write flags
        all set or all clear), and which of those have their other-write flags set."""
        a = self.alloc
        if a.elem_written is not None:  # (which elements were written is kept for this tile: not parked)
            return np.zeros(r1 - r0, dtype=bool), np.zeros(r1 - r0, dtype=bool)
        words = _words(a.storage, r0, r1, self.region)
        zero = ~words[:, :, 0].any(axis=0)  # (a region whose first word is not zero fails at once)
        if zero.any():
            zero &= ~words.any(axis=(0, 2))
        other_set = np.zeros(r1 - r0, dtype=bool)
        if a.mm_written is None or not zero.any():
            return zero, other_set
        flag_region = self.region // a.storage.itemsize
        zero &= ~_words(a.mm_written, r0, r1, flag_region).any(axis=(0, 2))
        other = _words(a.other_written, r0, r1, flag_region)
        other_set = (other == _TRUE_WORD).all(axis=(0, 2))
        zero &= other_set | ~other.any(axis=(0, 2))
        return zero, other_set & zero


#: eight bool flags set, as one 8-byte word
_TRUE_WORD = np.frombuffer(np.ones(8, dtype=bool).tobytes(), dtype=np.uint64)[0]


def _words(arr: np.ndarray, r0: int, r1: int, region: int) -> np.ndarray:
    """Regions ``[r0, r1)`` (``region`` bytes per partition each) of ``arr`` as 8-byte words, [partition, region,
    word] (a view)."""
    rows = arr.reshape(arr.shape[0], -1).view(np.uint64)
    per = region // 8
    return rows[:, r0 * per:r1 * per].reshape(rows.shape[0], r1 - r0, per)


def _true_runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """The runs ``(first, end)`` of consecutive True entries of ``mask``."""
    if not mask.any():
        return []
    edges = np.flatnonzero(np.diff(np.concatenate([[False], mask, [False]]).astype(np.int8)))
    return list(zip(edges[0::2].tolist(), edges[1::2].tolist()))


def _region_bytes(alloc: Any) -> int:
    """A region's bytes per partition: a page; a PSUM tile's flags (one byte per element) are given back with it,
    so its regions are whole flag pages too."""
    return PAGE * (alloc.storage.itemsize if alloc.mm_written is not None else 1)


def _within_partition(g: Any, row: int) -> tuple[int, int] | None:
    """The bytes ``[lo, hi)`` of a partition that a view of geometry ``g`` touches in each partition it touches
    (the whole partition where that is not bounded so), or None for an empty view."""
    if g.hi <= g.off:
        return None
    lo = hi = g.off % row
    for n, s in zip(g.shape, g.strides):
        if n > 1 and s % row:
            if s > 0:
                hi += (n - 1) * s
            else:
                lo += (n - 1) * s
    hi += g.sd.itemsize
    if lo < 0 or hi > row:
        return 0, row
    return lo, hi


def _runs(steps: np.ndarray) -> dict[int, list[tuple[int, int]]]:
    """Regions by step (-1 left out), as runs ``(first, end)`` of consecutive regions of that step."""
    out: dict[int, list[tuple[int, int]]] = defaultdict(list)
    if not steps.size:
        return {}
    cuts = np.flatnonzero(np.diff(steps)) + 1
    starts = np.concatenate([[0], cuts])
    ends = np.concatenate([cuts, [steps.size]])
    for a, b in zip(starts.tolist(), ends.tolist()):
        s = int(steps[a])
        if s >= 0:
            out[s].append((a, b))
    return dict(out)
