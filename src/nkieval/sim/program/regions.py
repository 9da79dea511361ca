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

    __slots__ = ("alloc", "fills", "gives", "region", "row")

    def __init__(self, alloc: Any, uses: list[tuple[int, Any]]) -> None:
        storage = alloc.storage
        self.alloc = alloc
        self.row = storage.nbytes // storage.shape[0]
        self.region = _region_bytes(alloc)
        first, last = self._ranges(uses[1:])
        self.fills = _runs(first)
        self.gives = _runs(last)

    @staticmethod
    def usable(alloc: Any) -> bool:
        """Whether the allocation's storage can be cut into regions (its partition's bytes, whole regions)."""
        st = alloc.storage
        if st.ndim < 2 or not st.flags.c_contiguous or alloc.slot is not None or not own_mapping(st):
            return False
        return (st.nbytes // st.shape[0]) % _region_bytes(alloc) == 0

    def _ranges(self, uses: list[tuple[int, Any]]) -> tuple[np.ndarray, np.ndarray]:
        """Each region's first and last touching step (-1: never touched)."""
        n = self.row // self.region
        first = np.full(n, -1, dtype=np.int64)
        last = np.full(n, -1, dtype=np.int64)
        for step, g in uses:
            span = _within_partition(g, self.row)
            if span is None:
                continue
            r0, r1 = span[0] // self.region, (span[1] - 1) // self.region + 1
            f = first[r0:r1]
            np.copyto(f, step, where=f < 0)  # (uses come in step order: the first use sets it)
            last[r0:r1] = step
        return first, last

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
        isz = a.storage.itemsize
        for r0, r1 in self.gives[step]:
            give_back(a.storage, r0 * self.region, (r1 - r0) * self.region)
            for flags in (a.mm_written, a.other_written):
                if flags is not None:
                    give_back(flags, r0 * self.region // isz, (r1 - r0) * self.region // isz)
        if a.f32:
            drop_f32(a)  # (conversions of what was read: caches, some of them now of dead regions)


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
