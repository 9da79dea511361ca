"""SBUF spill when a kernel's live tiles exceed the usable SBUF: Belady eviction, and its DMA traffic.

The simulator checks capacity against live ranges (first to last access) and, where capacity checks
are relaxed (``SimOptions(capacity_check="warn")``, the Beta-1 front end's default), lets a kernel
keep more tiles alive than the SBUF holds. The compiler would then have to evict some: write a tile
back to HBM (a *save*) and read it again before its next use (a *reload*). A tile whose contents
are a plain copy of HBM data (every write to it a DMA from HBM) is rematerialised instead: dropped
and read again, with no save.

The unit of eviction is a *segment*: an allocation is cut at every byte offset where one of its
accesses begins or ends, so a segment is the smallest byte range the kernel always touches whole
(one [128, 512] fp32 tile of a large accumulator, say). Evicting whole allocations instead would
overstate the traffic of a kernel that keeps one big SBUF tensor and works on a slice of it at a
time. A strided access counts as touching its whole bounding range.

Which segments the compiler evicts is not documented. We take Belady's choice, the live segment
whose next access is furthest away: it minimises reloads, so the traffic is a lower bound for any
eviction order at segment granularity. Per program (each LNC program has its own SBUF), the walk
visits every segment access once. The scheduler runs it when the trace's SBUF peak exceeds the
usable SBUF, and (unless ``SchedulePolicy.spill_traffic`` is ``"off"``) schedules the transfers:
:func:`with_spill_traffic` inserts a ``spill_save`` / ``spill_reload`` DMA before the instruction
that needed the room or the data (adjacent segments of one allocation merged into one DMA), on the
DMA queue of that instruction's source line, to and from a spill area in HBM.

Belady's choice minimises traffic, not time: its victim is often the segment the previous
instruction just read, so a reload that must wait for its victim to be done with (``on_demand``)
cannot start before it is needed, and its DMA latency is exposed. ``prefetch`` (the default) lets a
reload run as soon as its own save is done, as a compiler that evicts early would arrange; the
published profiles of over-subscribed tutorial kernels (Tensor engine ~99.5 % active) favour it.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from collections import defaultdict
from dataclasses import dataclass, replace

from nkieval.sim.trace import AllocationRecord, OperandAccess, Trace, TraceRecord

SPILL_OPCODES = ("spill_save", "spill_reload")
SPILL_SITE = "<spill>"  # the allocation site of the HBM spill areas :func:`with_spill_traffic` adds


@dataclass(frozen=True)
class SpillTransfer:
    """Bytes ``[addr_lo, addr_hi)`` of each of the partitions of an allocation, moved for one instruction.

    A ``save`` (SBUF -> HBM) or ``reload`` (HBM -> SBUF) is one DMA of spill traffic; an ``evict`` moves no
    data but gives up the range's space (after its save, if it has one) to the reloads for the same
    instruction."""

    before: int  # the instruction (trace position) it is issued for: it runs ahead of that one
    kind: str  # "save", "reload" or "evict"
    alloc: int
    addr_lo: int
    addr_hi: int
    partition_start: int
    partitions: int


@dataclass(frozen=True)
class SpillEstimate:
    """HBM traffic of evicting SBUF segments when the live ones exceed ``capacity_bytes`` per partition."""

    capacity_bytes: int  # usable SBUF per partition
    save_bytes: int = 0  # SBUF -> HBM (dirty segments written back)
    reload_bytes: int = 0  # HBM -> SBUF (spilled segments read back, clean ones re-read from their source)
    evictions: int = 0
    peak_live_bytes: int = 0  # per partition, first-to-last-access live ranges of segments, before eviction
    transfers: tuple[SpillTransfer, ...] = ()  # per instruction: saves, reloads, evictions
    # instructions whose own SBUF operands exceed the capacity: no eviction makes them fit (the compiler would
    # have to split them); their excess is not in the traffic
    overfull_instructions: int = 0


def _segments(trace: Trace) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
    """Per SBUF allocation (kernel arguments excepted): the sorted byte offsets that cut it into segments; and per
    SBUF allocation the [lowest, highest + 1] partitions its accesses reach."""
    cuts: dict[int, set[int]] = defaultdict(set)
    p_range: dict[int, list[int]] = {}
    allocs = trace.allocations
    for r in trace.records:
        for o in r.operands:
            if o.buffer == "sbuf":
                c = cuts[o.alloc]
                c.add(o.addr_lo)
                c.add(o.addr_hi)
                hi = o.partition_start + o.partitions
                pr = p_range.get(o.alloc)
                if pr is None:
                    p_range[o.alloc] = [o.partition_start, hi]
                else:
                    if o.partition_start < pr[0]:
                        pr[0] = o.partition_start
                    if hi > pr[1]:
                        pr[1] = hi
    return ({a: sorted(c) for a, c in cuts.items() if a in allocs and not allocs[a].kernel_arg and len(c) > 1},
            p_range)


def estimate_spill(trace: Trace, capacity_bytes: int) -> SpillEstimate:
    """Belady eviction over the SBUF segments of ``trace`` with ``capacity_bytes`` usable per partition."""
    allocs = trace.allocations
    cuts, p_range = _segments(trace)
    base: dict[int, int] = {}  # alloc -> unit id of its first segment (an allocation's segments are consecutive units)
    unit_alloc: list[int] = []
    lo_of: list[int] = []  # the unit's byte range in its partitions
    size: list[int] = []  # bytes per partition of each unit
    for a, c in cuts.items():
        base[a] = len(size)
        for k in range(len(c) - 1):
            unit_alloc.append(a)
            lo_of.append(c[k])
            size.append(c[k + 1] - c[k])
    parts = [p_range[a][1] - p_range[a][0] for a in unit_alloc]
    acc: list[list[int]] = [[] for _ in size]  # unit -> seqs of the instructions touching it
    dirty_at: list[set[int]] = [set() for _ in size]  # unit -> seqs that write it with data not from HBM
    for r in trace.records:
        ops = r.operands
        from_hbm = r.engine == "dma" and any(o.buffer == "hbm" and "r" in o.mode for o in ops)
        for o in ops:
            c = cuts.get(o.alloc) if o.buffer == "sbuf" else None
            if c is None:
                continue
            b0 = base[o.alloc]
            for u in range(b0 + bisect_right(c, o.addr_lo) - 1, b0 + bisect_left(c, o.addr_hi)):
                seqs = acc[u]
                if not seqs or seqs[-1] != r.seq:
                    seqs.append(r.seq)
                if "w" in o.mode and not from_hbm:
                    dirty_at[u].add(r.seq)
    by_prog: dict[int, list[int]] = defaultdict(list)
    for u in range(len(size)):
        by_prog[allocs[unit_alloc[u]].program].append(u)
    save = reload = evictions = peak = overfull = 0
    moves: list[tuple[int, int, int]] = []  # (before, 0 save / 1 reload / 2 evict, unit)
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
                moves.append((seq, 2, v))
                if v in dirty:
                    save += size[v] * parts[v]
                    moves.append((seq, 0, v))
                    dirty.discard(v)  # its HBM copy is current until the next write not from HBM
            if used + need > capacity_bytes:
                overfull += 1
            for u in incoming:
                if u in evicted:
                    reload += size[u] * parts[u]
                    moves.append((seq, 1, u))
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
    return SpillEstimate(capacity_bytes, save, reload, evictions, peak,
                         _merge(moves, unit_alloc, lo_of, size, p_range), overfull)


def _merge(moves: list[tuple[int, int, int]], unit_alloc: list[int], lo_of: list[int], size: list[int],
           p_range: dict[int, list[int]]) -> tuple[SpillTransfer, ...]:
    """One transfer per run of adjacent segments of one allocation moved the same way for the same instruction;
    per instruction, the saves (which make room) before the reloads, then the evictions."""
    runs: list[list[int]] = []  # [before, kind, alloc, lo, hi]
    for before, kind, a, lo, u in sorted((b, k, unit_alloc[u], lo_of[u], u) for b, k, u in moves):
        last = runs[-1] if runs else None
        if last and last[4] == lo and last[2] == a and last[1] == kind and last[0] == before:
            last[4] = lo + size[u]
        else:
            runs.append([before, kind, a, lo, lo + size[u]])
    kinds = ("save", "reload", "evict")
    return tuple(SpillTransfer(b, kinds[k], a, lo, hi, p_range[a][0], p_range[a][1] - p_range[a][0])
                 for b, k, a, lo, hi in runs)


def _element_bytes(al: AllocationRecord) -> int:
    free = 1
    for d in al.shape[1:]:
        free *= d
    return max(1, al.bytes_per_partition // free) if free else 1


def _evicted_range(t: SpillTransfer) -> OperandAccess:
    """A write of the bytes an eviction gives up (no data moved): what reusing their space depends on."""
    w = t.addr_hi - t.addr_lo
    return OperandAccess("evicts", "w", "sbuf", t.alloc, (t.partitions, w), "uint8", t.partition_start, t.partitions,
                         t.addr_lo, t.addr_hi, 0, w, ((1, w),))


def with_spill_traffic(trace: Trace, spill: SpillEstimate, on_demand: bool = False) -> Trace:
    """A copy of ``trace`` with each of ``spill``'s transfers as a DMA record ahead of the instruction it serves.

    ``on_demand``: each reload also writes (an ``evicts`` operand, no bytes moved) the ranges evicted for the
    same instruction, so it waits for their last readers and their saves, as reusing their space requires.

    The HBM side is a spill area per program (one new allocation, ``site=SPILL_SITE``) where every spilled
    allocation has a slot of its partitions × its spilled byte span, so a reload reads what the save wrote
    (a RAW dependency through HBM) and a rematerialised segment reads its slot as it would its source.
    """
    if not spill.transfers:
        return trace
    allocs = dict(trace.allocations)
    span: dict[int, list[int]] = {}  # alloc -> [lowest, highest] spilled byte, partitions
    for t in spill.transfers:
        if t.kind == "evict":
            continue
        sp = span.setdefault(t.alloc, [t.addr_lo, t.addr_hi, t.partitions])
        sp[0], sp[1] = min(sp[0], t.addr_lo), max(sp[1], t.addr_hi)
    next_id = max(allocs, default=0) + 1
    area: dict[int, AllocationRecord] = {}  # program -> its spill area
    slot: dict[int, int] = {}  # alloc -> offset of its slot in its program's area
    fill: dict[int, int] = defaultdict(int)
    for a, (lo, hi, parts) in sorted(span.items()):
        prog = allocs[a].program
        slot[a] = fill[prog]
        fill[prog] += (hi - lo) * parts
    for prog, nbytes in sorted(fill.items()):
        area[prog] = AllocationRecord(next_id, "hbm", "spill", (nbytes,), "uint8", 0, 0, nbytes, SPILL_SITE, prog, 0)
        allocs[next_id] = area[prog]
        next_id += 1
    by_before: dict[int, list[SpillTransfer]] = defaultdict(list)
    for t in spill.transfers:
        by_before[t.before].append(t)
    records: list[TraceRecord] = []
    new_pos: list[int] = []  # old position -> new position of the first record inserted for it (or of itself)
    for r in trace.records:
        new_pos.append(len(records))
        group = by_before.get(r.seq, ())
        # a reload writes into space its instruction's evictions gave up: it waits for their readers and saves
        room = [_evicted_range(t) for t in group if t.kind == "evict"] if on_demand else []
        for t in group:
            if t.kind == "evict":
                continue
            al = allocs[t.alloc]
            w = t.addr_hi - t.addr_lo
            row = span[t.alloc][1] - span[t.alloc][0]
            e = _element_bytes(al)
            dt, e = (al.dtype, e) if w % e == 0 and row % e == 0 else ("uint8", 1)
            n = w // e
            nbytes = w * t.partitions
            sb = OperandAccess("dst" if t.kind == "reload" else "src", "w" if t.kind == "reload" else "r", "sbuf",
                               t.alloc, (t.partitions, n), dt, t.partition_start, t.partitions, t.addr_lo,
                               t.addr_hi, nbytes, w, ((1, n),), al.name)
            off = slot[t.alloc] + t.addr_lo - span[t.alloc][0]
            hb = OperandAccess("src" if t.kind == "reload" else "dst", "r" if t.kind == "reload" else "w", "hbm",
                               area[al.program].id, (t.partitions, n), dt, 0, 0, off,
                               off + (t.partitions - 1) * row + w, nbytes, w, ((row // e, t.partitions), (1, n)),
                               "spill")
            ops = [hb, sb] if t.kind == "save" else [sb, hb, *room]
            records.append(TraceRecord(len(records), f"spill_{t.kind}", "dma", ops, {"dge_mode": 0, "spill": t.kind},
                                       r.program, r.loops, r.file, r.line, r.function))
        records.append(replace(r, seq=len(records)))
    end = len(records)

    def moved(x: int | None) -> int | None:
        return None if x is None else (new_pos[x] if x < len(new_pos) else end)

    for a, al in trace.allocations.items():
        allocs[a] = replace(al, alloc_seq=moved(al.alloc_seq), free_seq=moved(al.free_seq))
    return Trace(target=trace.target, records=records, allocations=allocs, warnings=list(trace.warnings),
                 num_programs=trace.num_programs, kernel=trace.kernel, peak_sbuf_bytes=trace.peak_sbuf_bytes,
                 peak_psum_bytes=trace.peak_psum_bytes)
