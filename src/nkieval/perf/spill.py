"""Spill traffic when a kernel's SBUF working set exceeds the usable SBUF: an estimate, not scheduled.

The simulator checks capacity against live ranges (first to last access) and, where capacity checks
are relaxed (``SimOptions(capacity_check="warn")``, the Beta-1 front end's default), lets a kernel
keep more tiles alive than the SBUF holds. The compiler would then have to evict some: write a tile
back to HBM (a *save*) and read it again before its next use (a *reload*). A tile whose contents
are a plain copy of HBM data (every write to it a DMA from HBM) is rematerialised instead: dropped
and read again from its source, with no save.

The unit of eviction is a *segment*: an allocation is cut at every byte offset where one of its
accesses begins or ends, so a segment is the smallest byte range the kernel always touches whole
(one [128, 512] fp32 tile of a large accumulator, say). Evicting whole allocations instead would
overstate the traffic of a kernel that keeps one big SBUF tensor and works on a slice of it at a
time. A strided access counts as touching its whole bounding range.

Which segments the compiler evicts is not documented. We take Belady's choice, the live segment
whose next access is furthest away: it minimises reloads, so the estimate is a lower bound on the
traffic of any eviction order at segment granularity. Per program (each LNC program has its own
SBUF), the walk visits every segment access once; ``estimate`` runs it only when the rotation
plan's demand exceeds capacity.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from collections import defaultdict
from dataclasses import dataclass

from nkieval.sim.trace import Trace


@dataclass(frozen=True)
class SpillEstimate:
    """HBM traffic of evicting SBUF segments when the live ones exceed ``capacity_bytes`` per partition."""

    capacity_bytes: int  # usable SBUF per partition
    save_bytes: int = 0  # SBUF -> HBM (dirty segments written back)
    reload_bytes: int = 0  # HBM -> SBUF (spilled segments read back, clean ones re-read from their source)
    evictions: int = 0
    peak_live_bytes: int = 0  # per partition, first-to-last-access live ranges of segments, before eviction

    @property
    def bytes(self) -> int:
        """All spill traffic between SBUF and HBM."""
        return self.save_bytes + self.reload_bytes


def _segments(trace: Trace) -> dict[int, list[int]]:
    """Per SBUF allocation (kernel arguments excepted), the sorted byte offsets that cut it into segments."""
    cuts: dict[int, set[int]] = defaultdict(set)
    allocs = trace.allocations
    for r in trace.records:
        for o in r.operands:
            if o.buffer == "sbuf":
                c = cuts[o.alloc]
                c.add(o.addr_lo)
                c.add(o.addr_hi)
    return {a: sorted(c) for a, c in cuts.items() if a in allocs and not allocs[a].kernel_arg and len(c) > 1}


def estimate_spill(trace: Trace, capacity_bytes: int) -> SpillEstimate:
    """Belady eviction over the SBUF segments of ``trace`` with ``capacity_bytes`` usable per partition."""
    allocs = trace.allocations
    cuts = _segments(trace)
    unit_of: dict[tuple[int, int], int] = {}  # (alloc, segment index) -> unit id
    size: list[int] = []  # bytes per partition of each unit
    parts: list[int] = []  # partitions each unit spans (the highest partition its allocation's accesses reach)
    program: list[int] = []
    alloc_parts: dict[int, int] = defaultdict(int)
    for r in trace.records:
        for o in r.operands:
            if o.buffer == "sbuf":
                hi = o.partition_start + o.partitions
                if hi > alloc_parts[o.alloc]:
                    alloc_parts[o.alloc] = hi
    for a, c in cuts.items():
        for k in range(len(c) - 1):
            unit_of[(a, k)] = len(size)
            size.append(c[k + 1] - c[k])
            parts.append(alloc_parts[a])
            program.append(allocs[a].program)
    acc: list[list[int]] = [[] for _ in size]  # unit -> seqs of the instructions touching it
    dirty_at: list[set[int]] = [set() for _ in size]  # unit -> seqs that write it with data not from HBM
    for r in trace.records:
        ops = r.operands
        from_hbm = r.engine == "dma" and any(o.buffer == "hbm" and "r" in o.mode for o in ops)
        for o in ops:
            c = cuts.get(o.alloc) if o.buffer == "sbuf" else None
            if c is None:
                continue
            for k in range(bisect_right(c, o.addr_lo) - 1, bisect_left(c, o.addr_hi)):
                u = unit_of[(o.alloc, k)]
                seqs = acc[u]
                if not seqs or seqs[-1] != r.seq:
                    seqs.append(r.seq)
                if "w" in o.mode and not from_hbm:
                    dirty_at[u].add(r.seq)
    by_prog: dict[int, list[int]] = defaultdict(list)
    for u in range(len(size)):
        by_prog[program[u]].append(u)
    save = reload = evictions = peak = 0
    for ids in by_prog.values():
        events = sorted((s, u) for u in ids for s in acc[u])
        pos = dict.fromkeys(ids, 0)  # index of the next access of each unit
        resident: set[int] = set()
        evicted: set[int] = set()
        dirty: set[int] = set()  # resident units whose contents exist nowhere else
        heap: list[tuple[int, int]] = []  # (-next access seq, unit), lazily invalidated
        used = live = 0  # bytes per partition: resident units; live units (resident or not)
        i, n = 0, len(events)
        while i < n:
            seq = events[i][0]
            now: list[int] = []
            while i < n and events[i][0] == seq:
                now.append(events[i][1])
                i += 1
            incoming = [u for u in now if u not in resident]
            need = sum(size[u] for u in incoming)
            live += sum(size[u] for u in incoming if u not in evicted)
            peak = max(peak, live)
            # make room before the instruction: the units it touches have their next access now, the nearest
            # of all, so they come off the heap last and are never chosen
            while used + need > capacity_bytes and heap:
                neg, v = heapq.heappop(heap)
                if v not in resident or acc[v][pos[v]] != -neg or -neg == seq:
                    continue  # stale entry, or touched by this instruction
                resident.discard(v)
                used -= size[v]
                evicted.add(v)
                evictions += 1
                if v in dirty:
                    save += size[v] * parts[v]
                    dirty.discard(v)  # its HBM copy is current until the next write not from HBM
            for u in incoming:
                if u in evicted:
                    reload += size[u] * parts[u]
                    evicted.discard(u)
                resident.add(u)
                used += size[u]
            for u in now:
                if seq in dirty_at[u]:
                    dirty.add(u)
                k = pos[u] + 1
                pos[u] = k
                if k < len(acc[u]):
                    heapq.heappush(heap, (-acc[u][k], u))
                else:  # past its last access: the unit is dead and its space free
                    resident.discard(u)
                    dirty.discard(u)
                    used -= size[u]
                    live -= size[u]
    return SpillEstimate(capacity_bytes, save, reload, evictions, peak)
