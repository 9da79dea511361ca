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
whose next access is furthest away. Among segments of one size it needs the fewest reloads of any
eviction order (tests/perf holds it to an exhaustive search); with mixed sizes, or dirty segments that
cost a save as well, it is a heuristic, not a bound: evicting a small segment needed sooner can move
fewer bytes than evicting a large one needed later. Per program (each LNC program has its own SBUF),
the walk visits every segment access once. The access events are built with numpy and the walk runs
compiled (``_schedule_c.belady``) where the package was built with it; :func:`_belady` is the reference. The scheduler runs it when the trace's SBUF peak exceeds the
usable SBUF, and (unless ``SchedulePolicy.spill_traffic`` is ``"off"``) schedules the transfers:
:func:`with_spill_traffic` inserts a ``spill_save`` / ``spill_reload`` DMA before the instruction
that needed the room or the data (adjacent segments of one allocation merged into one DMA), on a spill queue
of the engine that runs that instruction (the Sync engine for a DMA), to and from a spill area in HBM.

Belady's choice minimises traffic, not time: its victim is often the segment the previous
instruction just read, so a reload that must wait for its victim to be done with (``on_demand``)
cannot start before it is needed, and its DMA latency is exposed. ``prefetch`` (the default) lets a
reload run as soon as its own save is done, as a compiler that evicts early would arrange; the
published profiles of over-subscribed tutorial kernels (Tensor engine ~99.5 % active) favour it.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from nkieval.perf.compiled import ENABLED as _NATIVE_DEFAULT
from nkieval.perf.compiled import module as _schedule_c  # the operand read and the eviction walk compiled
from nkieval.sim.trace import AllocationRecord, OperandAccess, Trace, TraceRecord

_NATIVE = _NATIVE_DEFAULT  # tests switch the compiled loops off to hold them to the Python ones

SPILL_OPCODES = ("spill_save", "spill_reload", "spill_refill")
SPILL_SITE = "<spill>"  # the allocation site of the HBM spill areas :func:`with_spill_traffic` adds


class SpillTransfer(NamedTuple):
    """Bytes ``[addr_lo, addr_hi)`` of each of the partitions of an allocation, moved for one instruction.

    A ``save`` (SBUF -> HBM) or ``reload`` (HBM -> SBUF) is one DMA of spill traffic; an ``evict`` moves no
    data but gives up the range's space (after its save, if it has one) to the reloads for the same
    instruction; a ``refill`` makes constant contents again with a memset (no DMA). (A named tuple: an over-subscribed kernel can have hundreds of thousands.)"""

    before: int  # the instruction (trace position) it is issued for: it runs ahead of that one
    kind: str  # "save", "reload", "evict" or "refill"
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
    refill_bytes: int = 0  # constant (memset) contents made again by a memset after eviction: no HBM traffic


# bits of an access row's flags (:func:`_sbuf_accesses`)
ROW_DIRTIES = 1  # writes data not read from HBM by the same instruction (a DMA from HBM leaves its destination clean)
ROW_READS = 2  # reads the range
ROW_WRITES = 4  # writes the range
ROW_CONSTANT = 8  # writes a constant (memset): the contents can be made again without HBM
ROW_DENSE = 16  # touches every byte of its range in each of its partitions (no stride gaps)
# bits of an event's flags (one instruction's accesses to one unit; :func:`_walk_events`)
EV_DIRTIES = 1  # leaves the unit with contents that exist nowhere else
EV_CONSTANT = 2  # overwrites the unit with a constant
EV_OVERWRITES = 4  # writes all of the unit without reading it: what it held before is dead
EV_NEXT_OVERWRITES = 8  # the unit's next access overwrites it: its contents are dead from now on
EV_WRITES = 16


def _sbuf_accesses(trace: Trace) -> np.ndarray:
    """One row per SBUF operand of ``trace`` on an allocation that can be spilled (kernel arguments excepted):
    ``[seq, alloc, addr_lo, addr_hi, partition_start, partition_end, flags]`` (``ROW_*`` bits)."""
    spillable = {a for a, al in trace.allocations.items() if not al.kernel_arg}
    if _NATIVE and _schedule_c is not None:
        try:
            return np.frombuffer(_schedule_c.sbuf_accesses(trace.records, spillable), dtype=np.int64).reshape(-1, 7)
        except (OverflowError, TypeError):  # a value beyond 64 bits, or records not in a list: the loop below
            pass
    rows: list[tuple[int, int, int, int, int, int, int]] = []
    add = rows.append
    for r in trace.records:
        from_hbm: bool | None = None
        for o in r.operands:
            if o.buffer != "sbuf" or o.alloc not in spillable:
                continue
            flags = ROW_DENSE if o.nbytes == (o.addr_hi - o.addr_lo) * o.partitions else 0
            if "r" in o.mode:
                flags |= ROW_READS
            if "w" in o.mode:
                flags |= ROW_WRITES
                if r.opcode == "memset":
                    flags |= ROW_CONSTANT
                else:
                    if from_hbm is None:
                        from_hbm = r.engine == "dma" and any(x.buffer == "hbm" and "r" in x.mode for x in r.operands)
                    if not from_hbm:
                        flags |= ROW_DIRTIES
            add((r.seq, o.alloc, o.addr_lo, o.addr_hi, o.partition_start, o.partition_start + o.partitions,
                 flags))
    return np.array(rows, dtype=np.int64).reshape(-1, 7)


_ROW_COVERS = 32  # (while building events) the access writes all of its unit


def _event_flags(bits: np.ndarray) -> np.ndarray:
    """``EV_*`` flags of events from their accesses' or-ed ``ROW_*`` bits (and ``_ROW_COVERS``).

    An event that overwrites a unit with a constant (a memset over all of it) leaves it clean: its contents
    can be made again by another memset, with no save and no HBM read. A constant written over part of a
    unit leaves a mix that exists nowhere else (dirty)."""
    reads = (bits & ROW_READS) != 0
    overwrites = ((bits & _ROW_COVERS) != 0) & ~reads
    dirties = (bits & ROW_DIRTIES) != 0
    constant = ((bits & ROW_CONSTANT) != 0) & overwrites & ~dirties
    dirties |= ((bits & ROW_CONSTANT) != 0) & ~constant
    return (np.where(dirties, EV_DIRTIES, 0) | np.where(constant, EV_CONSTANT, 0)
            | np.where(overwrites, EV_OVERWRITES, 0) | np.where((bits & ROW_WRITES) != 0, EV_WRITES, 0))


@dataclass(frozen=True)
class _Walk:
    """The access events the eviction walk visits, and what it needs of each unit (segment).

    Events are sorted by (program, instruction, unit); ``bounds[k]:bounds[k + 1]`` are program k's."""

    seq: np.ndarray  # per event: the instruction
    unit: np.ndarray  # per event: the unit it touches
    next_seq: np.ndarray  # per event: the unit's next access (-1: none, the unit dies after this one)
    flags: np.ndarray  # per event: ``EV_*`` bits
    bounds: np.ndarray  # event offsets of the programs' runs
    size: np.ndarray  # per unit: bytes per partition
    p0: np.ndarray  # per unit: the first partition of its allocation's accesses
    parts: np.ndarray  # per unit: partitions of its allocation's accesses (from p0)
    alloc: np.ndarray  # per unit: its allocation
    lo: np.ndarray  # per unit: its first byte in each partition


def _walk_events(trace: Trace, rows: np.ndarray) -> _Walk:
    """Cut each allocation into units at every offset where an access begins or ends; expand each access into
    the units it covers; one event per (instruction, unit)."""
    seq, alloc, lo, hi, p0, p1, row_flags = rows.T
    # allocations ranked by their first access: units are numbered allocation by allocation in that order
    ids, first = np.unique(alloc, return_index=True)
    rank_of = np.empty(len(ids), dtype=np.int64)
    rank_of[np.argsort(first, kind="stable")] = np.arange(len(ids))
    rank = rank_of[np.searchsorted(ids, alloc)]
    # cuts: the distinct (allocation, offset) pairs, sorted
    c_rank = np.concatenate([rank, rank])
    c_off = np.concatenate([lo, hi])
    order = np.lexsort((c_off, c_rank))
    c_rank, c_off = c_rank[order], c_off[order]
    keep = np.ones(len(c_rank), dtype=bool)
    keep[1:] = (c_rank[1:] != c_rank[:-1]) | (c_off[1:] != c_off[:-1])
    c_rank, c_off = c_rank[keep], c_off[keep]
    pair = c_rank[1:] == c_rank[:-1]  # cut i and i + 1 bound a unit
    unit_at = np.concatenate([[0], np.cumsum(pair)])  # units before cut i
    u_cut = np.flatnonzero(pair)
    size = c_off[u_cut + 1] - c_off[u_cut]
    u_rank = c_rank[u_cut]
    # each access's cut range, by (rank, offset) lookup in the sorted cuts
    span = int(c_off.max()) + 1 if len(c_off) else 1
    key = c_rank * span + c_off
    i0 = np.searchsorted(key, rank * span + lo)
    i1 = np.searchsorted(key, rank * span + hi)
    u0, u1 = unit_at[i0], unit_at[i1]
    count = u1 - u0
    ev_row = np.repeat(np.arange(len(rows)), count)
    ev_unit = np.repeat(u0, count) + (np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count))
    ev_seq = seq[ev_row]
    # allocation facts per rank; per unit through its rank
    r_alloc = np.empty(len(ids), dtype=np.int64)
    r_alloc[rank] = alloc
    r_p0 = np.full(len(ids), np.iinfo(np.int64).max)
    r_p1 = np.zeros(len(ids), dtype=np.int64)
    np.minimum.at(r_p0, rank, p0)
    np.maximum.at(r_p1, rank, p1)
    prog_of_alloc = {a: al.program for a, al in trace.allocations.items()}
    r_prog = np.array([prog_of_alloc[int(a)] for a in r_alloc], dtype=np.int64)
    ev_prog = r_prog[u_rank[ev_unit]] if len(ev_unit) else ev_unit
    # an access covers its unit when it writes every byte of it in every partition the unit spans
    ev_bits = row_flags[ev_row]
    u_of = u_rank[ev_unit] if len(ev_unit) else ev_unit
    covers = ((ev_bits & (ROW_WRITES | ROW_DENSE)) == (ROW_WRITES | ROW_DENSE)) \
        & (p0[ev_row] <= r_p0[u_of]) & (p1[ev_row] >= r_p1[u_of])
    ev_bits = ev_bits | np.where(covers, _ROW_COVERS, 0)
    # one event per (instruction, unit), its accesses' bits or-ed; sorted by program, instruction, unit
    order = np.lexsort((ev_unit, ev_seq, ev_prog))
    ev_prog, ev_seq, ev_unit, ev_bits = ev_prog[order], ev_seq[order], ev_unit[order], ev_bits[order]
    new = np.ones(len(ev_seq), dtype=bool)
    new[1:] = (ev_seq[1:] != ev_seq[:-1]) | (ev_unit[1:] != ev_unit[:-1]) | (ev_prog[1:] != ev_prog[:-1])
    grp = np.cumsum(new) - 1
    bits = np.zeros(int(new.sum()), dtype=np.int64)
    np.bitwise_or.at(bits, grp, ev_bits)
    ev_prog, ev_seq, ev_unit = ev_prog[new], ev_seq[new], ev_unit[new]
    flags = _event_flags(bits)
    # each event's next access of the same unit (units belong to one program: order by unit, then instruction)
    by_unit = np.lexsort((ev_seq, ev_unit))
    next_seq = np.full(len(ev_seq), -1, dtype=np.int64)
    same = ev_unit[by_unit[1:]] == ev_unit[by_unit[:-1]]
    next_seq[by_unit[:-1][same]] = ev_seq[by_unit[1:][same]]
    next_over = np.zeros(len(ev_seq), dtype=bool)
    next_over[by_unit[:-1][same]] = (flags[by_unit[1:][same]] & EV_OVERWRITES) != 0
    flags = flags | np.where(next_over, EV_NEXT_OVERWRITES, 0)
    bounds = np.flatnonzero(np.concatenate([[True], ev_prog[1:] != ev_prog[:-1], [True]])) if len(ev_seq) \
        else np.zeros(1, dtype=np.int64)
    return _Walk(ev_seq, ev_unit, next_seq, flags.astype(np.int64), bounds.astype(np.int64), size, r_p0[u_rank],
                 r_p1[u_rank] - r_p0[u_rank], r_alloc[u_rank], c_off[u_cut])


def _belady(w: _Walk, capacity_bytes: int) -> tuple[list[int], list[tuple[int, int, int]]]:
    """The eviction walk (the reference for ``_schedule_c.belady``): ``[save, reload, evictions, peak, overfull,
    refill]`` bytes and counts, and the moves ``(before, 0 save / 1 reload / 2 evict / 3 refill, unit)`` in the
    order made.

    What moves follows what the data is: a unit whose next access overwrites it is evicted without a save and
    comes back without a reload (its contents are dead); a unit holding a constant (a memset) is evicted
    without a save and refilled (a memset, no HBM traffic) if it is read again."""
    seq, unit, nxt, flags = w.seq.tolist(), w.unit.tolist(), w.next_seq.tolist(), w.flags.tolist()
    size, parts = w.size.tolist(), w.parts.tolist()
    n_units = len(size)
    resident = [False] * n_units
    evicted = [False] * n_units
    dirty = [False] * n_units  # resident units whose contents exist nowhere else
    constant = [False] * n_units  # units whose contents are a constant a memset can make again
    cur_next = [-1] * n_units  # the unit's next access (what a valid heap entry carries)
    cur_flags = [0] * n_units  # the flags of the unit's last access (EV_NEXT_OVERWRITES: its contents are dead)
    save = reload = evictions = peak = overfull = refill = 0
    moves: list[tuple[int, int, int]] = []
    b = w.bounds.tolist()
    for k in range(len(b) - 1):
        heap: list[tuple[int, int]] = []  # (-next access, unit), lazily invalidated
        used = live = 0  # bytes per partition: resident units; live units (resident or not)
        i, end = b[k], b[k + 1]
        while i < end:
            s = seq[i]
            j = i
            need = 0
            while j < end and seq[j] == s:
                u = unit[j]
                if not resident[u]:
                    need += size[u]
                    if not evicted[u]:
                        live += size[u]
                j += 1
            peak = max(peak, live)
            # make room before the instruction: the units it touches have their next access now, the nearest
            # of all, so they come off the heap last and are never chosen
            while used + need > capacity_bytes and heap:
                neg, v = heapq.heappop(heap)
                if not resident[v] or cur_next[v] != -neg or -neg == s:
                    continue  # stale entry, or touched by this instruction
                resident[v] = False
                used -= size[v]
                evicted[v] = True
                evictions += 1
                moves.append((s, 2, v))
                if cur_flags[v] & EV_NEXT_OVERWRITES:
                    dirty[v] = False  # dead: the next access overwrites it
                elif dirty[v]:
                    save += size[v] * parts[v]
                    moves.append((s, 0, v))
                    dirty[v] = False  # its HBM copy is current until the next write not from HBM
            if used + need > capacity_bytes:
                overfull += 1
            for e in range(i, j):
                u = unit[e]
                if not resident[u]:
                    if evicted[u]:
                        if flags[e] & EV_OVERWRITES:
                            pass  # written whole before it is read: nothing to bring back
                        elif constant[u]:
                            refill += size[u] * parts[u]
                            moves.append((s, 3, u))
                        else:
                            reload += size[u] * parts[u]
                            moves.append((s, 1, u))
                        evicted[u] = False
                    resident[u] = True
                    used += size[u]
            for e in range(i, j):
                u = unit[e]
                f = flags[e]
                if f & EV_WRITES:
                    constant[u] = bool(f & EV_CONSTANT)
                    if f & EV_OVERWRITES:
                        dirty[u] = False  # what it held is gone; a dirtying write sets it again below
                if f & EV_DIRTIES:
                    dirty[u] = True
                nx = nxt[e]
                cur_next[u] = nx
                cur_flags[u] = f
                if nx >= 0:
                    heapq.heappush(heap, (-nx, u))
                else:  # past its last access: the unit is dead and its space free
                    resident[u] = False
                    dirty[u] = False
                    constant[u] = False
                    used -= size[u]
                    live -= size[u]
            i = j
    return [save, reload, evictions, peak, overfull, refill], moves


def estimate_spill(trace: Trace, capacity_bytes: int) -> SpillEstimate:
    """Belady eviction over the SBUF segments of ``trace`` with ``capacity_bytes`` usable per partition."""
    rows = _sbuf_accesses(trace)
    if not len(rows):
        return SpillEstimate(capacity_bytes)
    w = _walk_events(trace, rows)
    if _NATIVE and _schedule_c is not None:
        totals, raw = _schedule_c.belady(w.seq, w.unit, w.next_seq, w.flags, w.bounds, w.size, w.parts,
                                      capacity_bytes)
        moves = np.frombuffer(raw, dtype=np.int64).reshape(-1, 3)
    else:
        totals, made = _belady(w, capacity_bytes)
        moves = np.array(made, dtype=np.int64).reshape(-1, 3)
    save, reload, evictions, peak, overfull, refill = totals
    return SpillEstimate(capacity_bytes, save, reload, evictions, peak, _merge(moves, w), overfull, refill)


def _merge(moves: np.ndarray, w: _Walk) -> tuple[SpillTransfer, ...]:
    """One transfer per run of adjacent segments of one allocation moved the same way for the same instruction;
    per instruction, the saves (which make room) before the reloads, then the evictions."""
    if not len(moves):
        return ()
    before, kind, u = moves[:, 0], moves[:, 1], moves[:, 2]
    order = np.lexsort((w.lo[u], w.alloc[u], kind, before))
    before, kind, u = before[order], kind[order], u[order]
    alloc, lo = w.alloc[u], w.lo[u]
    hi = lo + w.size[u]
    start = np.ones(len(u), dtype=bool)
    start[1:] = (before[1:] != before[:-1]) | (kind[1:] != kind[:-1]) | (alloc[1:] != alloc[:-1]) \
        | (lo[1:] != hi[:-1])
    first = np.flatnonzero(start)
    last = np.append(first[1:], len(u)) - 1
    kinds = ("save", "reload", "evict", "refill")
    return tuple(map(SpillTransfer._make, zip(
        before[first].tolist(), [kinds[k] for k in kind[first].tolist()], alloc[first].tolist(),
        lo[first].tolist(), hi[last].tolist(), w.p0[u[first]].tolist(), w.parts[u[first]].tolist())))


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


def _memset_of(trace: Trace, allocs: set[int]) -> dict[int, TraceRecord]:
    """The first memset of each allocation in ``allocs``: a refill repeats it, on its engine."""
    out: dict[int, TraceRecord] = {}
    if not allocs:
        return out
    for r in trace.records:
        if r.opcode == "memset":
            for o in r.operands:
                if o.alloc in allocs and o.alloc not in out:
                    out[o.alloc] = r
    return out


def _refill_record(seq: int, t: SpillTransfer, al: AllocationRecord, memset: TraceRecord, before: TraceRecord,
                   room: list[OperandAccess]) -> TraceRecord:
    """A memset of the refilled range on the engine of the allocation's memset (``spill_refill``)."""
    w = t.addr_hi - t.addr_lo
    e = _element_bytes(al)
    dt, e = (al.dtype, e) if w % e == 0 else ("uint8", 1)
    n = w // e
    dst = OperandAccess("dst", "w", "sbuf", t.alloc, (t.partitions, n), dt, t.partition_start, t.partitions,
                        t.addr_lo, t.addr_hi, w * t.partitions, w, ((1, n),), al.name)
    return TraceRecord(seq, "spill_refill", memset.engine, [dst, *room], {"value": memset.attrs.get("value", 0),
                       "spill": "refill"}, before.program, before.loops, before.file, before.line, before.function)


_ENGINE_NAMES = {"dma": "Sync", "gpsimd": "GpSimd"}  # the engine names of the profiler's queue names


def _spill_queue(engine: str) -> str:
    """The DMA queue of the spill transfers made for an instruction of ``engine``: one per triggering engine (a DMA
    instruction's are the Sync engine's), apart from the kernel's own transfers, as the profiler's queue names
    show (``qSyncSpillReload0``, ``qVectorSpillReload0``: research note perf-model.md §1.2)."""
    return f"q{_ENGINE_NAMES.get(engine, engine.capitalize())}SpillReload"


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
        if t.kind in ("evict", "refill"):
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
    memsets = _memset_of(trace, {t.alloc for t in spill.transfers if t.kind == "refill"})
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
        queue = _spill_queue(r.engine) if group else None
        for t in group:
            if t.kind == "evict":
                continue
            al = allocs[t.alloc]
            if t.kind == "refill":
                records.append(_refill_record(len(records), t, al, memsets[t.alloc], r, room))
                continue
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
            records.append(TraceRecord(len(records), f"spill_{t.kind}", "dma", ops,
                                       {"dge_mode": 0, "spill": t.kind, "queue": queue}, r.program, r.loops, r.file,
                                       r.line, r.function))
        records.append(TraceRecord(len(records), r.opcode, r.engine, r.operands, r.attrs, r.program, r.loops, r.file,
                                   r.line, r.function))  # (what ``replace(r, seq=...)`` makes, at a third of its cost)
    end = len(records)

    def moved(x: int | None) -> int | None:
        return None if x is None else (new_pos[x] if x < len(new_pos) else end)

    for a, al in trace.allocations.items():  # (what ``replace(al, alloc_seq=..., free_seq=...)`` makes, faster)
        allocs[a] = AllocationRecord(al.id, al.buffer, al.name, al.shape, al.dtype, al.address, al.partition_offset,
                                     al.bytes_per_partition, al.site, al.program, moved(al.alloc_seq),
                                     moved(al.free_seq), al.kernel_arg, al.fixed_address)
    return Trace(target=trace.target, records=records, allocations=allocs, warnings=list(trace.warnings),
                 num_programs=trace.num_programs, kernel=trace.kernel, peak_sbuf_bytes=trace.peak_sbuf_bytes,
                 peak_psum_bytes=trace.peak_psum_bytes)
