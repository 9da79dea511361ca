"""SBUF/PSUM capacity judged by live range, as the compiler allocates.

The compiler gives a tile on-chip memory from its first access to its last, not from the line
that declares it to the moment Python drops it. So a kernel that declares its scratch tiles up
front is legal when the tiles' *live ranges* fit. After a run, this module sweeps the trace:
every on-chip allocation is live over ``[first access, last access]`` (tiles that are never
accessed take no space), its footprint is its per-partition bytes on its partitions, and the
peak over time of the per-partition sum is compared with the target's size. Tiles placed at an
explicit ``address=`` occupy their fixed rectangle of partitions x bytes (the NKI docs: an SBUF/PSUM
tensor's physical location is "a rectangle in the underlying memory"): tiles re-created over the same
rectangle are one block, and overlapping fixed rectangles share their bytes, which count once per
partition (the union), whatever each tile's partition count.

PSUM is judged in the order the compiler's dependency-driven scheduling allows: an instruction
that only *reads* PSUM (an evacuation: ``tensor_copy`` / ``activation`` / ``tensor_tensor`` … of
a finished accumulation) runs as soon as its inputs are written, not where the program wrote it.
So a kernel that accumulates several PSUM tiles in one loop nest and evacuates them in a second
is judged by how many accumulations are in flight at once, not by the whole first nest; tiles
accumulated in the same iterations are still live together (real over-subscription stays an
error). Instructions that write PSUM keep their program order.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from nkieval.hardware import get_target
from nkieval.sim.errors import NkiValidationError
from nkieval.sim.trace import AllocationRecord, Trace


@dataclass(frozen=True)
class CapacityPeak:
    buffer: str
    program: int
    peak_bytes: int
    capacity: int
    at_seq: int
    live: tuple[AllocationRecord, ...]

    @property
    def exceeded(self) -> bool:
        return self.peak_bytes > self.capacity

    def message(self) -> str:
        kind = self.buffer.upper()
        blocks = sorted(self.live, key=lambda a: -a.bytes_per_partition)
        listing = ", ".join(
            f"{a.name or 'tensor'}{list(a.shape)} {a.dtype} {a.bytes_per_partition} B" + (f" @ {a.site}" if a.site else "")
            for a in blocks[:6])
        more = f" and {len(blocks) - 6} more" if len(blocks) > 6 else ""
        prog = f" in program {self.program}" if self.program else ""
        return (f"tiles live at once{prog} need {self.peak_bytes} bytes per partition of {kind}, exceeding the "
                f"{self.capacity}-byte {kind} partition (live ranges, first to last access, at instruction "
                f"{self.at_seq}); {len(blocks)} live: {listing}{more}")


def live_range_peaks(trace: Trace, capacities: dict[str, int]) -> list[CapacityPeak]:
    """Peak live bytes per partition for each (on-chip buffer, program) in the trace."""
    first: dict[int, float] = {}
    last: dict[int, float] = {}
    written: dict[int, float] = {}  # alloc -> position of its latest write (PSUM readers are hoisted)
    for rec in trace.records:
        seq = rec.seq
        pos: float = seq
        ops = rec.operands
        reads_psum = writes_psum = False
        for op in ops:
            if op.buffer == "psum":
                m = op.mode
                reads_psum = reads_psum or "r" in m
                writes_psum = writes_psum or "w" in m
        if reads_psum and not writes_psum:  # reads PSUM and writes none: an evacuation
            ready = max((written.get(op.alloc, -1.0) for op in ops if "r" in op.mode), default=-1.0)
            pos = min(float(seq), ready + 0.5)
        for op in ops:
            a = op.alloc
            if "w" in op.mode:
                written[a] = pos
            buf = op.buffer
            if buf == "hbm":
                continue
            at = pos if buf == "psum" else seq
            f = first.get(a)
            if f is None:
                first[a] = at
                last[a] = at
            else:  # (what min / max keep: the earlier value on a tie)
                if at < f:
                    first[a] = at
                if at > last[a]:
                    last[a] = at
    groups: dict[tuple[str, int], list[AllocationRecord]] = {}
    for a in trace.allocations.values():
        if a.buffer in capacities and a.id in first:
            groups.setdefault((a.buffer, a.program), []).append(a)
    peaks: list[CapacityPeak] = []
    for (buf, prog), allocs in sorted(groups.items()):
        # Tiles at one explicit address range are one block live over the union of their ranges.
        blocks: dict[object, list] = {}
        for a in allocs:
            key = ("fixed", a.partition_offset, a.shape[0] if a.shape else 1, a.address, a.bytes_per_partition) \
                if a.fixed_address else ("auto", a.id)
            b = blocks.get(key)
            if b is None:
                blocks[key] = [first[a.id], last[a.id], a]
            else:
                b[0] = min(b[0], first[a.id])
                b[1] = max(b[1], last[a.id])
        best, best_seq, best_live = _sweep(list(blocks.values()), get_target(trace.target).partitions)
        peaks.append(CapacityPeak(buf, prog, best, capacities[buf], best_seq, best_live))
    return peaks


def _sweep(items: list[list], partitions: int) -> tuple[int, int, tuple[AllocationRecord, ...]]:
    """The peak per-partition bytes of blocks ``[first, last, tile]`` live over ``[first, last]``, where it
    is reached and the tiles live there."""
    events: list[tuple[float, int, int]] = []  # (position, +1 start / -1 end after, index)
    for i, (lo, hi, _a) in enumerate(items):
        events.append((lo, 0, i))
        events.append((hi + 0.25, -1, i))
    # by position, starts before ends; among equals by index, the order they were appended in
    events.sort()
    if all(not it[2].fixed_address and it[2].partition_offset == 0 for it in items):
        return _running_sum(events, items)
    auto = np.zeros(partitions, dtype=np.int64)  # compiler-placed tiles: each its own bytes
    fixed_live: set[int] = set()
    fixed = np.zeros(partitions, dtype=np.int64)  # the union of the live fixed rectangles, per partition
    live: set[int] = set()
    best, best_seq, best_live = 0, 0, ()
    for seq, kind, i in events:
        a = items[i][2]
        starts = kind != -1
        if a.fixed_address:
            if starts:
                fixed_live.add(i)
            else:
                fixed_live.discard(i)
            fixed = _union_bytes([_rectangle(items[j][2]) for j in fixed_live], partitions)
        else:
            p0, p1 = _partitions(a)
            auto[p0:p1] += a.bytes_per_partition if starts else -a.bytes_per_partition
        if not starts:
            live.discard(i)
            continue
        live.add(i)
        total = int((auto + fixed).max())
        if total > best:
            best, best_seq, best_live = total, int(seq), tuple(items[j][2] for j in live)
    return best, best_seq, best_live


def _running_sum(events: list[tuple[float, int, int]], items: list[list]) -> tuple[int, int, tuple]:
    """The sweep when every tile is compiler-placed from partition 0: partition 0 holds the most, so the peak
    is a plain running sum."""
    best, at = 0, -1
    total = 0
    for k, (_seq, kind, i) in enumerate(events):
        if kind == -1:
            total -= items[i][2].bytes_per_partition
        elif (total := total + items[i][2].bytes_per_partition) > best:
            best, at = total, k
    if at < 0:
        return 0, 0, ()
    # the tiles live at the peak: the same set operations up to it, so the set lists them in the same order
    live: set[int] = set()
    for _seq, kind, i in events[:at + 1]:
        if kind == -1:
            live.discard(i)
        else:
            live.add(i)
    return best, int(events[at][0]), tuple(items[j][2] for j in live)


def _partitions(a: AllocationRecord) -> tuple[int, int]:
    return a.partition_offset, a.partition_offset + (a.shape[0] if a.shape else 1)


def _rectangle(a: AllocationRecord) -> tuple[int, int, int, int]:
    """A fixed-address tile's (first partition, end partition, first byte, end byte)."""
    return (*_partitions(a), a.address, a.address + a.bytes_per_partition)


def _union_bytes(rects: list[tuple[int, int, int, int]], partitions: int) -> np.ndarray:
    """Per partition, the bytes covered by the union of the rectangles (shared bytes count once)."""
    out = np.zeros(partitions, dtype=np.int64)
    cuts = sorted({0, partitions, *(r[0] for r in rects), *(r[1] for r in rects)})
    for start, end in pairwise(cuts):
        spans = sorted((lo, hi) for p0, p1, lo, hi in rects if p0 <= start and end <= p1)
        covered, reach = 0, None
        for lo, hi in spans:
            if reach is None or hi > reach:
                covered += hi - (lo if reach is None else max(lo, reach))
                reach = hi
        out[start:end] = covered
    return out


def check_capacity(trace: Trace, capacities: dict[str, int], mode: str, emit: bool = True) -> list[CapacityPeak]:
    """Record live-range peaks on the trace and raise (``mode="error"``) or warn when one is exceeded (on the
    trace; also on Python's warning stream with ``emit``)."""
    peaks = live_range_peaks(trace, capacities)
    for kind in ("sbuf", "psum"):
        vals = [p.peak_bytes for p in peaks if p.buffer == kind]
        setattr(trace, f"peak_{kind}_bytes", max(vals) if vals else 0)
    over = [p for p in peaks if p.exceeded]
    if over and mode != "off":
        p = over[0]
        if mode == "error":
            raise NkiValidationError(p.message(), instruction="kernel", rule=f"{p.buffer}-capacity")
        import warnings

        from nkieval.sim.errors import NkiSimulatorWarning

        for p in over:
            w = NkiSimulatorWarning(p.message(), rule=f"{p.buffer}-capacity", instruction="kernel")
            trace.warnings.append({"rule": w.rule, "instruction": "kernel", "location": None, "message": str(w),
                                   "program": p.program})
            if emit:
                warnings.warn(w, stacklevel=3)
    return peaks
