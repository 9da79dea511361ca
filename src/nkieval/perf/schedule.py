"""Event-driven schedule of a trace: in-order engines, DMA queues and engines, byte-range dependencies.

Each compute engine (tensor, vector, scalar, gpsimd, sync) runs its instructions in program
order. Each DMA instruction goes to a queue (one per issuing source line, as the compiler
assigns a queue per DMA instruction), queues are FIFO, and the transfer is spread over the
core's 16 DMA engines, each serving one transfer at a time. An instruction starts when its
engine (or queue) is free and every dependency is satisfied:

* RAW: the producer's end plus its result latency (plus a semaphore hop across engines);
* WAR: every earlier reader of the bytes has finished; WAW: the earlier write has finished;
* rotation (``mode="compiler"``): a new tile of an allocation site waits until the tile whose
  buffer it reuses (``depth`` instances back) is dead;
* ports (Trn1): VectorE and GpSimdE share the SBUF port, VectorE and ScalarE the PSUM port; a port is
  granted by time (the earliest moment its occupancy fits between the intervals booked on it), not in program
  order across the engines that share it.

The DMA engines are one pool per core (:class:`DmaPool`): a transfer's engine time fills the pool's idle
gaps from when it is ready until it is covered.

On Trn2/Trn3 the Tensor engine's dI/dt throttling stretches its instructions after idle time
(:class:`PeThrottle`).

Dependencies are computed from the byte ranges each operand touches: on-chip as partitions ×
bytes per partition, in HBM as rows × columns of the access pattern (falling back to the
flat byte range), keyed by allocation (``compiler``: logical tiles, the compiler may
rename) or by physical address (``physical``: exactly the simulator's buffer reuse).
``serial`` additionally starts every instruction after the previous one ends: the strict
program-order upper bound.
"""

from __future__ import annotations

import gc
from array import array
from bisect import bisect_right
from collections import Counter, deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

import numpy as np

from nkieval.perf.compiled import ENABLED as _NATIVE_DEFAULT
from nkieval.perf.compiled import module as _schedule_c  # the per-record loop compiled
from nkieval.perf.costs import cost_of
from nkieval.perf.dma import DmaPlan, plan_dma
from nkieval.perf.params import PerfParams
from nkieval.perf.rotation import RotationPlan, plan_rotation
from nkieval.perf.spill import SpillEstimate, estimate_spill, with_spill_traffic
from nkieval.sim.trace import Trace

ScheduleMode = Literal["compiler", "physical", "serial"]
EngineOrder = Literal["program", "backfill"]
SpillTraffic = Literal["prefetch", "on_demand", "off"]
RotationRoom = Literal["fit", "spill"]
COMPUTE_ENGINES = ("tensor", "vector", "scalar", "gpsimd", "sync")


class ScheduleError(ValueError):
    """A schedule request the model cannot honour (bad policy value)."""


@dataclass(frozen=True)
class SchedulePolicy:
    """What freedom the modelled compiler has.

    Attributes:
        mode: ``compiler`` (default: logical tiles with per-site buffer rotation),
            ``physical`` (the simulator's own addresses, no renaming), or ``serial`` (every
            instruction after the previous one: the strict program-order bound).
        rotation_depth: buffers per allocation site (default: the target's ``rotation_depth``).
        cores: NeuronCores the programs run on (default: one per program for 1–2 programs
            (LNC), else 1, running programs back to back).
        engine_order: ``program`` (default: each compute engine runs its instructions in program
            order) or ``backfill`` (opt-in: an instruction whose dependencies are met may run in an
            idle gap its engine left before later-issued instructions, as a list-scheduling compiler
            would place it; see :class:`TrackBook`). DMA queues stay FIFO either way.
        spill_traffic: when the trace's SBUF peak exceeds the usable SBUF, the spill saves and
            reloads of :mod:`nkieval.perf.spill` are scheduled as DMAs: ``prefetch`` (default) lets a
            reload run ahead of its use, after its save; ``on_demand`` also makes it wait until the data it
            displaces is done with (Belady's victims, taken at the instruction that needs the room); ``off``
            only reports them.
        rotation_room: ``fit`` (default): rotation sets beyond what the kernel keeps alive get only the room the
            kernel's own tiles leave; ``spill`` (opt-in): they may also take the room of tiles allocated once (a
            long-lived buffer the kernel touches a slice at a time), and the spill estimate evicts that much more
            (its capacity is the usable SBUF less those sets), so a kernel that fills the SBUF with one buffer
            keeps its pipelining and pays spill traffic instead, at the sizes where it spills.
    """

    mode: ScheduleMode = "compiler"
    rotation_depth: int | None = None
    cores: int | None = None
    engine_order: EngineOrder = "program"
    spill_traffic: SpillTraffic = "prefetch"
    rotation_room: RotationRoom = "fit"

    def __post_init__(self) -> None:
        if self.mode not in ("compiler", "physical", "serial"):
            raise ScheduleError(f"SchedulePolicy.mode must be 'compiler', 'physical' or 'serial', got {self.mode!r}")
        if self.spill_traffic not in ("prefetch", "on_demand", "off"):
            raise ScheduleError("SchedulePolicy.spill_traffic must be 'prefetch', 'on_demand' or 'off', "
                                f"got {self.spill_traffic!r}")
        if self.rotation_room not in ("fit", "spill"):
            raise ScheduleError(f"SchedulePolicy.rotation_room must be 'fit' or 'spill', got {self.rotation_room!r}")
        if self.engine_order not in ("program", "backfill"):
            raise ScheduleError(f"SchedulePolicy.engine_order must be 'program' or 'backfill', got {self.engine_order!r}")
        if self.rotation_depth is not None and self.rotation_depth < 1:
            raise ScheduleError(f"SchedulePolicy.rotation_depth must be >= 1, got {self.rotation_depth}")
        if self.cores is not None and self.cores < 1:
            raise ScheduleError(f"SchedulePolicy.cores must be >= 1, got {self.cores}")


@dataclass
class Schedule:
    """Start/end of every trace record and why it started when it did."""

    trace: Trace
    params: PerfParams
    policy: SchedulePolicy
    cores: int
    track: list[str]  # per record: "tensor", "vector", ..., "dma:q3" (prefixed "nc1/" on core 1)
    start: array  # ns
    end: array  # ns
    occ: array  # engine occupancy ns (DMA: queue time)
    wait: array  # idle gap on the record's track before it, ns
    reason: list[str | None]  # what ended the wait ("dep:tensor", "dep:dma", "capacity", "port", ...)
    pred: array  # record whose constraint set the start (-1: none)
    dma: dict[int, DmaPlan]
    dma_slot: dict[int, float]  # DMA record -> when its transfers start on the DMA engines
    issue_busy: dict[str, float]  # track -> ns of hwdge/swdge issue occupancy added to compute engines
    perf_mode: dict[int, str] = field(default_factory=dict)
    throttled: dict[int, float] = field(default_factory=dict)  # Tensor record -> ns its throttling added
    unmodelled: Counter = field(default_factory=Counter)
    rotation: RotationPlan | None = None
    spill: SpillEstimate | None = None  # set when the SBUF peak exceeds the usable SBUF
    # per record: the first record with the same cost signature (opcode, engine, attributes, operand roles,
    # modes, buffers, dtypes, shapes, patterns and sizes): records of one signature cost the same
    signature: array = field(default_factory=lambda: array("q"))

    @property
    def total_time(self) -> float:
        return max(self.end) if len(self.end) else 0.0

    def __len__(self) -> int:
        return len(self.start)


def _flat(e: list) -> tuple[int, int]:
    p = e[0]
    if p <= 0:
        return e[3], e[4]
    return e[1] * p + e[3], (e[2] - 1) * p + e[4]


_DEAD = -2  # pitch of an entry a later write fully covered

# entry fields: box, last write (end, when a reader on the writer's engine sees the result, engine, record),
# last read (end, record), allocation, insertion order, the wait reason a reader of the write gets
# ("dep:<engine>"), the box as one tuple (its key), and when a reader on another engine sees the result
_P, _R0, _R1, _C0, _C1, _WEND, _WSAME, _WENG, _WIDX, _REND, _RIDX, _ALLOC, _SEQ, _WLABEL, _BOX, _WOTHER = range(16)

_INDEX_MIN = 16  # live entries before a table gets a grid index (below it a linear scan is faster)
_MISSES_BEFORE_INDEX = 4  # lookups that ``exact`` could not answer before a large table gets its grid
# The shortcuts below return what a scan of the live entries would; the switches exist for the tests
# that check exactly that (each off gives the same schedule).
_EXACT_INDEX = True  # tables keep ``exact`` (box -> entry) while their live entries are disjoint
# ``exact`` of a table without that index (its live entries may overlap): empty and read-only, so a lookup needs
# no test for it
_NO_EXACT: Mapping[tuple, list] = MappingProxyType({})
_CACHE_LOOKUPS = True  # tables remember a looked-up box's hits until an entry is added or killed
_REWRITE_IN_PLACE = True  # a write replacing the table's last entry (same box) reuses it
_EXACT_READS = True  # a read of exactly a live entry's box (an ``exact`` hit) skips the general hit handling
# Use the compiled loop where it is built (NKIEVAL_PURE_PYTHON_SCHEDULER=1 turns it off); tests/perf hold the two
# loops to identical schedules
_NATIVE = _NATIVE_DEFAULT
_POOL_KEEP = 512  # busy intervals each core's DmaPool remembers (both loops)
_FOUND_MAX = 4096  # boxes a table remembers the hits of (between two changes of its entries)
_QUERY_MAX_CELLS = 64  # a query box covering more grid cells scans the table instead
_ENTRY_MAX_CELLS = 16  # an entry covering more cells goes to the table's "wide" list


def _overlaps(e: list, pitch: int, r0: int, r1: int, c0: int, c1: int) -> bool:
    if e[0] == _DEAD:
        return False
    if e[0] == pitch:
        return e[1] < r1 and r0 < e[2] and e[3] < c1 and c0 < e[4]
    # different row pitches in HBM: compare flat byte ranges
    a0, a1 = _flat(e)
    b0, b1 = (r0 * pitch + c0, (r1 - 1) * pitch + c1) if pitch > 0 else (c0, c1)
    return a0 < b1 and b0 < a1


def _pow2_shift(sizes: list[int]) -> int:
    """log2 of the smallest power of two >= the median of ``sizes`` (a grid cell side)."""
    sizes.sort()
    return max(0, sizes[len(sizes) // 2] - 1).bit_length()


class _RangeTable:
    """The byte-range entries of one buffer (or HBM tensor), in insertion order, with indexes.

    ``ents`` holds every entry (dead ones until the next compaction). While no two live entries
    overlap, ``exact`` maps each live entry's box to it: a query for exactly that box then hits that
    entry and nothing else (whatever overlaps the query would overlap the entry). ``found`` remembers
    the hits of other queries until an entry is added or killed. Once a table with ``_INDEX_MIN``
    live entries that all share one row pitch has had ``_MISSES_BEFORE_INDEX`` lookups that neither
    could answer (since its last compaction), each entry is also filed in the cells of a 2-D grid
    (rows × byte columns, power-of-two cells sized like the typical entry) so a lookup visits only
    the cells its box covers; entries covering many cells sit in ``wide``. Every lookup returns the
    same entries, in the same order, as a scan of ``ents`` would.
    """

    __slots__ = ("cs", "dead", "ents", "exact", "found", "fresh_i", "grid", "misses", "mixed", "pitch", "rs", "wide")

    def __init__(self) -> None:
        self.ents: list[list] = []
        self.grid: dict[tuple[int, int], list[list]] | None = None
        self.wide: list[list] = []
        self.exact: Mapping[tuple, list] = {} if _EXACT_INDEX else _NO_EXACT  # box -> live entry (disjoint)
        self.pitch: int | None = None  # row pitch shared by every live entry
        self.mixed = False  # entries with different pitches: linear scans only
        self.dead = 0
        self.rs = self.cs = 0
        self.fresh_i = -1  # the record that last added an entry
        self.misses = 0  # lookups through scan or grid since the last rebuild
        self.found: dict[tuple, list] | None = None  # box -> its hits, while no entry is added or killed

    def scan(self, pitch: int, r0: int, r1: int, c0: int, c1: int) -> list[list]:
        """Live entries overlapping the box, in insertion order (linear scan)."""
        if pitch == self.pitch and not self.mixed:
            # columns first: most entries of a table lie beside the box (tiles written slice by slice), and
            # one column test tells so; the same conjunction as ``_overlaps`` in a cheaper order
            return [e for e in self.ents if c0 < e[4] and e[3] < c1 and e[0] == pitch and e[1] < r1 and r0 < e[2]]
        hits = []
        for e in self.ents:
            ep = e[0]
            if ep == pitch:
                if e[1] < r1 and r0 < e[2] and e[3] < c1 and c0 < e[4]:
                    hits.append(e)
            elif ep != _DEAD and _overlaps(e, pitch, r0, r1, c0, c1):
                hits.append(e)
        return hits

    def lookup(self, pitch: int, r0: int, r1: int, c0: int, c1: int) -> list[list]:
        """Live entries overlapping the box, in insertion order (through the grid when there is one)."""
        grid = self.grid
        self.misses += 1
        if (grid is None and self.misses >= _MISSES_BEFORE_INDEX and not self.mixed
                and len(self.ents) - self.dead >= _INDEX_MIN):
            self.rebuild(True)
            grid = self.grid
        if grid is None or pitch != self.pitch or r1 <= r0 or c1 <= c0:
            return self.scan(pitch, r0, r1, c0, c1)
        rs, cs = self.rs, self.cs
        rb0, rb1 = r0 >> rs, (r1 - 1) >> rs
        cb0, cb1 = c0 >> cs, (c1 - 1) >> cs
        if (rb1 - rb0 + 1) * (cb1 - cb0 + 1) > _QUERY_MAX_CELLS:
            return self.scan(pitch, r0, r1, c0, c1)
        found: dict[int, list] = {}
        get = grid.get
        for rb in range(rb0, rb1 + 1):
            for cb in range(cb0, cb1 + 1):
                cell = get((rb, cb))
                if cell:
                    for e in cell:
                        if e[0] == pitch and e[1] < r1 and r0 < e[2] and e[3] < c1 and c0 < e[4]:
                            found[e[12]] = e
        for e in self.wide:
            if e[0] == pitch and e[1] < r1 and r0 < e[2] and e[3] < c1 and c0 < e[4]:
                found[e[12]] = e
        if len(found) > 1:
            return [found[k] for k in sorted(found)]
        return list(found.values())

    def added(self) -> None:
        """Account for the entry just appended to ``ents``: pitch tracking, grid filing."""
        e = self.ents[-1]
        if self.pitch != e[0]:
            if self.pitch is None:
                self.pitch = e[0]
            else:
                self.mixed = True
                self.grid = None
        if self.grid is not None:
            self._file(e)

    def _file(self, e: list) -> None:
        rs, cs = self.rs, self.cs
        rb0, rb1 = e[1] >> rs, (e[2] - 1) >> rs
        cb0, cb1 = e[3] >> cs, (e[4] - 1) >> cs
        if rb1 < rb0 or cb1 < cb0 or (rb1 - rb0 + 1) * (cb1 - cb0 + 1) > _ENTRY_MAX_CELLS:
            self.wide.append(e)
            return
        grid = self.grid
        for rb in range(rb0, rb1 + 1):
            for cb in range(cb0, cb1 + 1):
                cell = grid.get((rb, cb))
                if cell is None:
                    grid[(rb, cb)] = [e]
                else:
                    cell.append(e)

    def rebuild(self, index: bool) -> None:
        """Drop dead entries; (re)build the grid if ``index`` and the live entries share a pitch and are many."""
        live = [e for e in self.ents if e[0] != _DEAD] if self.dead else self.ents
        self.ents = live
        self.dead = 0
        self.misses = 0
        self.grid = None
        self.wide = []
        pitches = {e[0] for e in live}
        self.mixed = len(pitches) > 1
        self.pitch = next(iter(pitches)) if len(pitches) == 1 else None
        if not index or self.mixed or len(live) < _INDEX_MIN:
            return
        self.rs = _pow2_shift([e[2] - e[1] for e in live])
        self.cs = _pow2_shift([e[4] - e[3] for e in live])
        self.grid = {}
        for e in live:
            self._file(e)

    def clear(self) -> None:
        """Every entry is dead: forget them all."""
        self.ents.clear()
        self.grid = None
        self.wide = []
        self.exact = {} if _EXACT_INDEX else _NO_EXACT
        self.found = None
        self.pitch = None
        self.mixed = False
        self.dead = 0


def ramp_time(u0: float, work: float, f0: float, ramp: float) -> float:
    """Time to do ``work`` ns of full-rate work when the rate is ``f0 + (1 - f0)·u/ramp`` (capped at 1) ``u`` ns
    after the ramp began, starting ``u0`` ns after it."""
    if u0 >= ramp or f0 >= 1.0 or work <= 0:
        return work
    k = (1.0 - f0) / ramp  # rate gained per ns
    r0 = f0 + k * u0
    w_ramp = (ramp - u0) * (r0 + 1.0) / 2.0  # work done by the end of the ramp
    if work >= w_ramp:
        return (ramp - u0) + (work - w_ramp)
    # r0·t + k·t²/2 = work
    return (-r0 + (r0 * r0 + 2.0 * k * work) ** 0.5) / k


class PeThrottle:
    """Trn2/Trn3 dI/dt throttling of the Tensor engine (Neuron Explorer glossary): after idle the engine
    restarts at ``f0`` of its rate and ramps linearly to full over ``ramp`` ns; throttling re-engages
    whenever its utilization over the last ``window`` ns falls below ``threshold``.

    Modelled at instruction starts: an instruction that starts after a gap, with the engine busy less than
    ``threshold`` of the window before it, begins a new ramp; every instruction runs at the ramp's rate (its
    full-rate occupancy stretched by :func:`ramp_time`). Back-to-back instructions never re-engage it.
    """

    __slots__ = ("busy", "end", "f0", "need", "ramp", "since", "window")

    def __init__(self, f0: float, ramp: float, window: float, threshold: float) -> None:
        self.f0, self.ramp, self.window = f0, ramp, window
        self.need = threshold * window
        self.since = -float("inf")  # when the current ramp began
        self.end = -float("inf")  # when the engine's last instruction ended
        self.busy: deque[tuple[float, float]] = deque()  # (start, end) of instructions ending within the window

    def run(self, st: float, work: float) -> float:
        """Occupancy of an instruction of ``work`` ns (at full rate) starting at ``st``; records it."""
        busy = self.busy
        w0 = st - self.window
        while busy and busy[0][1] <= w0:
            busy.popleft()
        if st > self.end:  # after a gap: re-engaged if the window was busy less than the threshold
            b = 0.0
            for s0, e0 in busy:
                b += (e0 if e0 < st else st) - (s0 if s0 > w0 else w0)
            if b < self.need:
                self.since = st
        dur = ramp_time(st - self.since, work, self.f0, self.ramp)
        self.end = st + dur
        busy.append((st, self.end))
        return dur


def _earliest_gap(starts: list[float], ends: list[float], t: float, dur: float) -> tuple[float, int]:
    """In sorted disjoint intervals: the earliest start ≥ ``t`` with ``dur`` free, and the position of the first
    interval after it."""
    j = bisect_right(ends, t)
    n = len(starts)
    while j < n and starts[j] < t + dur:
        if ends[j] > t:
            t = ends[j]
        j += 1
    return t, j


class TrackBook:
    """The busy intervals of one engine track (or shared port) under ``engine_order="backfill"``: sorted,
    disjoint, each with the record that occupies it (-1: a DMA's issue time on the engine), and for the Tensor
    engine the start of the dI/dt ramp it ran under. Only the latest ``keep`` intervals are remembered; nothing
    is placed before the forgotten ones (``floor``)."""

    __slots__ = ("ends", "floor", "keep", "recs", "since", "starts")

    def __init__(self, keep: int = 512) -> None:
        self.starts: list[float] = []
        self.ends: list[float] = []
        self.recs: list[int] = []
        self.since: list[float] = []
        self.floor = 0.0
        self.keep = keep

    def gap(self, t: float, dur: float) -> tuple[float, int]:
        """The earliest start ≥ ``t`` with ``dur`` ns free, and the position of the first interval after it."""
        return _earliest_gap(self.starts, self.ends, t if t > self.floor else self.floor, dur)

    def book(self, j: int, st: float, en: float, rec: int, since: float = -float("inf")) -> None:
        """Insert the interval [st, en) at position ``j`` (as :meth:`gap` returned it)."""
        self.starts.insert(j, st)
        self.ends.insert(j, en)
        self.recs.insert(j, rec)
        self.since.insert(j, since)
        if len(self.starts) > self.keep:
            cut = self.keep // 2
            self.floor = self.ends[cut - 1]
            del self.starts[:cut], self.ends[:cut], self.recs[:cut], self.since[:cut]

    def before(self, j: int) -> tuple[float, int]:
        """End and record of the interval before position ``j`` (the track's start, or its floor, if none)."""
        if j > 0:
            return self.ends[j - 1], self.recs[j - 1]
        return self.floor, -1

    def throttled(self, j: int, st: float, work: float, f0: float, ramp: float, window: float,
                  need: float) -> tuple[float, float]:
        """(occupancy, ramp start) of ``work`` ns of Tensor work starting at ``st`` in the gap before position
        ``j``: :class:`PeThrottle`'s rule on the intervals before it (back to back: the ramp goes on; after a
        gap with the window busy less than the threshold: a new ramp)."""
        since = self.since[j - 1] if j > 0 else -float("inf")
        if j == 0 or self.ends[j - 1] < st:
            w0 = st - window
            b = 0.0
            k = j - 1
            while k >= 0 and self.ends[k] > w0:
                b += self.ends[k] - (self.starts[k] if self.starts[k] > w0 else w0)
                k -= 1
            if b < need:
                since = st
        return ramp_time(st - since, work, f0, ramp), since


class DmaPool:
    """The core's DMA engines as one pool: busy intervals (sorted, merged) of engine-time / engines.

    A transfer over ``e`` of the 16 engines for ``t`` ns each needs ``t·e/16`` of pool time. It fills the idle
    gaps from when it is ready, in order, until that is covered (backfilling idle time left by earlier
    transfers and interleaving with those booked before it), so queues share the engines' bandwidth. Only the
    latest ``keep`` intervals are remembered.
    """

    __slots__ = ("ends", "floor", "keep", "starts")

    def __init__(self, keep: int = 512) -> None:
        self.starts: list[float] = []
        self.ends: list[float] = []
        self.floor = 0.0
        self.keep = keep

    def reserve(self, ready: float, dur: float) -> tuple[float, float]:
        """Book ``dur`` ns of pool time from the earliest free moment ≥ ``ready``, filling the idle gaps between
        booked intervals in order until ``dur`` is covered (a transfer interleaves with those booked before it
        rather than waiting for one gap long enough for all of it); returns (start, end of the last piece)."""
        starts, ends = self.starts, self.ends
        t = ready if ready > self.floor else self.floor
        if dur <= 0:
            return t, t
        n = len(starts)
        j = bisect_right(ends, t)  # the first interval ending after t
        if j < n and starts[j] <= t:  # t is inside it: start when it ends
            t = ends[j]
            j += 1
        first, j0, left = t, j, dur
        while j < n and starts[j] - t < left:  # the gap before interval j is used up: go on after it
            left -= starts[j] - t
            t = ends[j]
            j += 1
        e = t + left
        # [first, e) is now busy: it absorbs intervals j0 .. j-1 and merges with touching neighbours
        lo = j0 - 1 if j0 > 0 and ends[j0 - 1] >= first - 1e-9 else j0
        if j < n and starts[j] <= e + 1e-9:
            e = ends[j]
            j += 1
        new_start = starts[lo] if lo < j0 else first
        starts[lo:j] = [new_start]
        ends[lo:j] = [e]
        if len(starts) > self.keep:
            self.trim()
        return first, t + left

    def trim(self) -> None:
        """Forget the older half of the intervals (nothing is booked before the new floor)."""
        cut = self.keep // 2
        self.floor = self.ends[cut - 1]
        del self.starts[:cut], self.ends[:cut]


def _operand_info(sig: tuple) -> tuple[bool, bool, str, int, tuple[int, int, int] | None]:
    """What the scheduler needs of an operand besides where it sits, from its cost signature.

    (reads, writes, buffer, partitions spanned (on-chip; 0 for HBM), and for HBM the row pitch, row count
    and ``(rows - 1) * pitch`` of its access pattern, or None where the box is the flat byte range): the
    same for every record of a signature, so worked out once per signature class. An operand's box is then
    partitions × its byte range (on-chip), or the rows × columns its HBM access pattern spans (tests/perf
    hold the loop's box to the straightforward definition from the operand's own fields).
    """
    _role, mode, buf, _dtype, shape, pat, nbytes, _contiguous, partitions = sig
    if buf != "hbm":
        return "r" in mode, "w" in mode, buf, partitions or 1, None
    rows = None
    if len(pat) >= 2 and pat[0][1] > 1:
        ne = 1
        for d in shape:
            ne *= d
        isz = max(1, nbytes // ne) if ne else 1
        pitch = pat[0][0] * isz
        if pitch > 0:
            rows = (pitch, pat[0][1], (pat[0][1] - 1) * pitch)
    return "r" in mode, "w" in mode, buf, 0, rows


def _static_costs(records: list, p: PerfParams) -> tuple[list, array, Counter, set[int]]:
    """Per record: its signature class ``(cost, operand info, touches PSUM)``, where the cost is a DmaPlan or
    (occ, lat, mode, has_rule) and the operand info is (position, *:func:`_operand_info`) per operand; the first record
    with its signature; the opcodes costed by the fallback rule; the allocations some record writes.

    (The per-record view of :func:`_classify`.)
    """
    classes, idx, unmodelled, written = _classify(records, p)
    return [classes[k][0] for k in idx], array("q", [classes[k][1] for k in idx]), unmodelled, written


def _classify(records: list, p: PerfParams) -> tuple[list[tuple], array, Counter, set[int]]:
    """The records' signature classes: per class ``(class, first record, write positions, costed by the fallback
    rule)`` in order of first occurrence, where the class is ``(cost, operand info, touches PSUM)`` as in
    :func:`_static_costs`; per record its class; the opcodes costed by the fallback rule; the allocations some
    record writes.

    Costs are memoised on the record's signature: opcode, engine, attributes (lists as tuples) and, per
    operand, everything a cost rule reads (role, mode, buffer, dtype, shape, pattern, nbytes,
    contiguous bytes, partitions). Most records repeat the signature of a recent record from the same
    source line, so the two latest signatures of each line are compared first (one tuple comparison, no
    key to hash); only a record matching neither is looked up by its key (``resolve``). The compiled module
    runs the comparisons where it is built (``_schedule_c.classify``, held to this loop by tests/perf).
    """
    memo: dict[tuple, int] = {}  # signature key -> class
    get = memo.get
    classes: list[tuple] = []
    list_at: dict[tuple, tuple[int, ...]] = {}  # attribute names -> positions that held a list

    def resolve(i: int, rec) -> int:
        """The class of ``records[i]``, by its full key (a new class if it has none yet)."""
        ops = rec.operands
        attrs = rec.attrs
        names = tuple(attrs)
        values = tuple(attrs.values())
        pos = list_at.get(names)
        if pos:
            vl = list(values)
            for j in pos:
                x = vl[j]
                if type(x) is list:
                    vl[j] = tuple(x)
            values = tuple(vl)
        opsig = [(o.role, o.mode, o.buffer, o.dtype, o.shape, o.pattern, o.nbytes, o.contiguous_bytes,
                  o.partitions) for o in ops]
        key = (rec.opcode, rec.engine, names, values, *opsig)
        try:
            m = get(key)
        except TypeError:  # list-valued attributes: make them hashable, and remember where they were
            list_at[names] = (*(pos or ()), *(j for j, x in enumerate(values) if isinstance(x, list)))
            values = tuple(tuple(x) if isinstance(x, list) else x for x in values)
            key = (rec.opcode, rec.engine, names, values, *opsig)
            m = get(key)
        if m is None:
            ok = True
            if rec.engine == "dma":
                c = plan_dma(rec, p)
            else:
                cost, ok = cost_of(rec, p)
                c = (cost.occ, cost.lat, cost.mode, ok)
            cls = (c, tuple((j, *_operand_info(s)) for j, s in enumerate(opsig)), any(s[2] == "psum" for s in opsig))
            wpos = tuple(j for j, s in enumerate(opsig) if "w" in s[1])
            m = memo[key] = len(classes)
            classes.append((cls, i, wpos, not ok))
        return m

    written: set[int] = set()
    if _NATIVE and _schedule_c is not None:
        idx = array("q", bytes(8 * len(records)))
        _schedule_c.classify(records, resolve, classes, written, idx)
    else:
        idx = _classify_loop(records, resolve, classes, written)
    unmodelled: Counter = Counter()
    if any(c[3] for c in classes):
        counts = np.bincount(np.frombuffer(idx, dtype=np.int64), minlength=len(classes))
        for k, (_, f, _, unmod) in enumerate(classes):
            if unmod:
                unmodelled[records[f].opcode] += int(counts[k])
    return classes, idx, unmodelled, written


def _classify_loop(records: list, resolve, classes: list[tuple], written: set[int]) -> array:
    """Each record's class: the class of the latest or the previous signature of its source line when it equals
    one of them, else ``resolve(i, record)`` (which appends new classes to ``classes``); adds the allocations
    each record writes (a class's write positions: its item 2) to ``written``."""
    idx = array("q", bytes(8 * len(records)))
    add_written = written.add
    # source line -> [latest signature, its class, previous signature, its class]
    recent: dict[int | None, list] = {}
    for i, rec in enumerate(records):
        ops = rec.operands
        # the signature compared with the line's recent ones: one flat tuple for the common one- to three-operand
        # records (fewer objects to build and compare), else a list of one tuple per operand; both end with
        # (attributes, opcode, engine, file). Records of a line compare equal only with the same operand count.
        if len(ops) == 2:
            o, q = ops
            sig = (o.role, o.mode, o.buffer, o.dtype, o.shape, o.pattern, o.nbytes, o.contiguous_bytes, o.partitions,
                   q.role, q.mode, q.buffer, q.dtype, q.shape, q.pattern, q.nbytes, q.contiguous_bytes, q.partitions,
                   rec.attrs, rec.opcode, rec.engine, rec.file)
        elif len(ops) == 3:  # matmuls (dst, stationary, moving) and other two-input instructions
            o, q, u = ops
            sig = (o.role, o.mode, o.buffer, o.dtype, o.shape, o.pattern, o.nbytes, o.contiguous_bytes, o.partitions,
                   q.role, q.mode, q.buffer, q.dtype, q.shape, q.pattern, q.nbytes, q.contiguous_bytes, q.partitions,
                   u.role, u.mode, u.buffer, u.dtype, u.shape, u.pattern, u.nbytes, u.contiguous_bytes, u.partitions,
                   rec.attrs, rec.opcode, rec.engine, rec.file)
        elif len(ops) == 1:
            o = ops[0]
            sig = (o.role, o.mode, o.buffer, o.dtype, o.shape, o.pattern, o.nbytes, o.contiguous_bytes, o.partitions,
                   rec.attrs, rec.opcode, rec.engine, rec.file)
        else:
            sig = [(o.role, o.mode, o.buffer, o.dtype, o.shape, o.pattern, o.nbytes, o.contiguous_bytes, o.partitions)
                   for o in ops]
            sig.append((rec.attrs, rec.opcode, rec.engine, rec.file))
        rl = recent.get(rec.line)
        if rl is not None and rl[0] == sig:
            m = rl[1]
        elif rl is not None and rl[2] == sig:
            m = rl[3]
            rl[0], rl[1], rl[2], rl[3] = sig, m, rl[0], rl[1]
        else:
            m = resolve(i, rec)
            if rl is None:
                recent[rec.line] = [sig, m, None, None]
            else:
                rl[0], rl[1], rl[2], rl[3] = sig, m, rl[0], rl[1]
        idx[i] = m
        for j in classes[m][2]:
            add_written(ops[j].alloc)
    return idx


def _rotation_tables(rot: RotationPlan, written: set[int]) -> tuple[int, dict[int, tuple[int, int, int]]]:
    """The byte-range tables rotating buffers share: the instances of a site with more instances than buffers,
    instance j using buffer j mod depth. Returns the number of shared tables and, for each written allocation
    among those instances, (its table, partition base, address base); other written allocations get tables of
    their own when first met."""
    n_tables = 0
    shared: dict[int, tuple[int, int, int]] = {}
    for site, inst in zip(rot.sites, rot.instances):
        k = site.depth
        if len(inst) > k:
            for j, (_, _, _, a, pb, ab) in enumerate(inst):
                if a in written:
                    shared[a] = (n_tables + j % k, pb, ab)
            n_tables += k
    return n_tables, shared


def _engine_ports(prefix: str, engine: str, p: PerfParams) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The Trn1 shared ports an instruction of ``engine`` holds (track names): without a PSUM operand (the SBUF
    port, Vector/GpSimd) and with one (also the PSUM port, Vector/Scalar)."""
    sb = prefix + "port:sbuf_vg" if p.sbuf_port_shared_vector_gpsimd and engine in ("vector", "gpsimd") else None
    ps = prefix + "port:psum_vs" if p.psum_port_shared_vector_scalar and engine in ("vector", "scalar") else None
    return ((sb,) if sb else ()), tuple(x for x in (sb, ps) if x)


def _empty_outputs(n: int) -> tuple[array, array, array, array, array, list[str | None], list[str]]:
    """Per-record outputs before scheduling: start, end, occupancy, wait (ns, zero), predecessor (-1), reason
    (None), track ("")."""
    return (array("d", bytes(8 * n)), array("d", bytes(8 * n)), array("d", bytes(8 * n)), array("d", bytes(8 * n)),
            array("q", [-1]) * n, [None] * n, [""] * n)


def _backfill(i: int, eb: TrackBook, pbs: list[TrackBook], ready: float, d_pred: int, d_reason: str | None,
              work: float, throttle: bool, thr_args: tuple[float, float, float, float],
              shorten_wait_after) -> tuple[float, float, float, str | None, int, float]:
    """Place compute record ``i`` (``engine_order="backfill"``): the earliest time ≥ ``ready`` (its dependencies)
    at which its engine and its shared ports (Trn1) are all idle for its occupancy (stretched by the Tensor
    engine's throttle at that time). Books the interval and shortens the wait of the record after the gap it
    fills. Returns (start, end, occupancy, wait reason, predecessor, start of the idle gap it waited in)."""
    dur = work
    t = ready
    since = -float("inf")
    placed = False
    for _ in range(8):
        st, j = eb.gap(t, dur)
        at = st
        for pb in pbs:
            x, _ = pb.gap(at, dur)
            if x > at:
                at = x
        if at > st:  # a port is busy then: look again from when it is free
            t = at
            continue
        if throttle:
            d, since = eb.throttled(j, st, work, *thr_args)
            if d > dur:  # the stretched instruction may not fit this gap: look again with its length
                dur, t = d, st
                continue
            dur = d
        placed = True
        break
    if not placed:  # no stable gap found: after everything booked on the engine and its ports
        st = max(ready, eb.ends[-1] if eb.ends else eb.floor, *(pb.ends[-1] if pb.ends else pb.floor for pb in pbs))
        j = len(eb.starts)
        dur = work
        if throttle:
            dur, since = eb.throttled(j, st, work, *thr_args)
    g0, prec = eb.before(j)
    why: str | None = None
    pr = prec
    if st == ready and ready > g0:
        why, pr = d_reason, d_pred
    elif st > ready and st > g0:
        prec_port = _port_holder(pbs, st, dur)
        if prec_port is not None:
            why, pr = "port", prec_port
    en = st + dur
    shorten_wait_after(eb, j, en)
    eb.book(j, st, en, i, since)
    _book_ports(pbs, st, dur, i)
    return st, en, dur, why, pr, g0


def _port_holder(pbs: list[TrackBook], st: float, dur: float) -> int | None:
    """The record whose interval on one of the shared ports ``pbs`` ended when an instruction of ``dur`` ns
    starting at ``st`` got them (what it waited for); None if no port interval ends at ``st``."""
    for pb in pbs:
        pe, prec = pb.before(pb.gap(st, dur)[1])
        if pe == st:
            return prec
    return None


def _book_ports(pbs: list[TrackBook], st: float, dur: float, i: int) -> None:
    """Book record ``i``'s interval [st, st + dur) on each of the shared ports ``pbs``."""
    en = st + dur
    for pb in pbs:
        pb.book(pb.gap(st, dur)[1], st, en, i)


def schedule(trace: Trace, params: PerfParams, policy: SchedulePolicy | None = None) -> Schedule:
    """Schedule every record of ``trace`` on ``params``' target (see module docstring)."""
    # The scheduler allocates many small lists and no reference cycles; with a large trace alive, the
    # cyclic collector's full passes over it would dominate the run time, so it is paused meanwhile.
    enabled = gc.isenabled()
    gc.disable()
    try:
        pol = policy or SchedulePolicy()
        usable = int(params.sbuf_usable_bytes_per_partition)
        if pol.rotation_room == "spill" and pol.mode != "physical":  # the room rotation takes from single tiles
            usable -= plan_rotation(trace, pol.rotation_depth or int(params.rotation_depth), _capacity(params),
                                    spill_singles=True).spill_room_bytes.get("sbuf", 0)
        spill = None
        if trace.peak_sbuf_bytes > usable:  # below it no tile is ever evicted
            spill = estimate_spill(trace, usable)
            if pol.spill_traffic != "off":
                trace = with_spill_traffic(trace, spill, on_demand=pol.spill_traffic == "on_demand")
        s = _schedule(trace, params, pol)
        s.spill = spill
        return s
    finally:
        if enabled:
            gc.enable()


def _capacity(p: PerfParams) -> dict[str, int]:
    """Usable bytes per partition of each on-chip memory (what the rotation plan fills)."""
    return {"sbuf": int(p.sbuf_usable_bytes_per_partition), "psum": int(p.psum_bytes_per_partition)}


def _schedule(trace: Trace, params: PerfParams, policy: SchedulePolicy | None) -> Schedule:
    pol = policy or SchedulePolicy()
    p = params
    mode = pol.mode
    logical = mode != "physical"
    serial = mode == "serial"
    records = trace.records
    n = len(records)
    cores = pol.cores or (trace.num_programs if trace.num_programs <= 2 else 1)
    depth = pol.rotation_depth or int(p.rotation_depth)
    rot = None
    # compiler mode: an allocation that reuses an earlier one's rotating buffer is tracked in that
    # buffer's byte-range table (offsets relative to the allocation), so a new instance's write to a
    # slice waits only for the readers of the same slice of the instance it replaces
    if logical:
        rot = plan_rotation(trace, depth, _capacity(p), spill_singles=pol.rotation_room == "spill")
    classes, cls_idx, unmodelled, written = _classify(records, p)
    # per record: the first record of its class
    signature = array("q")
    if n:
        firsts = np.fromiter((c[1] for c in classes), dtype=np.int64, count=len(classes))
        signature.frombytes(firsts[np.frombuffer(cls_idx, dtype=np.int64)].tobytes())
    if _NATIVE and _schedule_c is not None and pol.engine_order == "program":
        s = _schedule_native(trace, p, pol, cores, rot, classes, cls_idx, signature, unmodelled, written)
        if s is not None:
            return s
    static = [classes[k][0] for k in cls_idx]
    sem = float(p.cross_engine_sem_ns)
    dma_fixed = float(p.dma_fixed_ns)
    dma_pipelined = bool(p.dma_queue_pipelined)
    n_dma = int(p.dma_engines)
    n_queues = int(p.dma_queues)
    pe_f0 = float(p.pe_throttle_start_fraction)

    start, end, occ_a, wait, pred, reason, track = _empty_outputs(n)
    # the loop stores through memoryviews (cheaper per item than the arrays' own item assignment)
    views = [memoryview(x) for x in (start, end, occ_a, wait, pred)]
    v_start, v_end, v_occ, v_wait, v_pred = views
    dma_plans: dict[int, DmaPlan] = {}
    perf_mode: dict[int, str] = {}
    throttled: dict[int, float] = {}
    issue_busy: dict[str, float] = {}

    tstate: dict[str, list] = {}  # track or port -> [free at (ns), last record on it]
    queue_of: dict[tuple[int, str | None, int | None], tuple[str, list]] = {}  # DMA queue -> (track, state)
    queue_count = [0] * cores
    pools = [DmaPool(_POOL_KEEP) for _ in range(cores)]
    dma_slot: dict[int, float] = {}
    global_end = 0.0
    global_last = -1
    prefixes = [("" if c == 0 else f"nc{c}/") for c in range(cores)]
    dep_label = {e: "dep:" + e for e in (*COMPUTE_ENGINES, "dma")}
    lbl_dma = dep_label["dma"]
    # Byte-range tables. Only allocations something writes can carry a dependency. ``logical``: each
    # written allocation -> (its table, partition base, address base): its own table (bases 0), or the
    # table of the rotating buffer it reuses with offsets relative to the allocation. ``physical``:
    # one table per core and on-chip buffer (table None here); HBM tensors keep their own table.
    tab_of: dict[int, tuple[_RangeTable | None, int, int]] = {}
    if logical:
        # rotating buffers' shared tables; the other written allocations get their own (bases 0) when first met
        n_shared, shared = _rotation_tables(rot, written)
        tabs = [_RangeTable() for _ in range(n_shared)]
        tab_of = {a: (tabs[t], pb, ab) for a, (t, pb, ab) in shared.items()}
    else:
        tab_of = dict.fromkeys(written, (None, 0, 0))
    phys_tabs = [{"sbuf": _RangeTable(), "psum": _RangeTable()} for _ in range(cores)]
    # Trn1 shared ports (``_engine_ports``): the SBUF port (Vector/GpSimd) always, the PSUM port (Vector/Scalar)
    # when the instruction touches PSUM
    any_ports = bool(p.sbuf_port_shared_vector_gpsimd or p.psum_port_shared_vector_scalar)
    backfill = pol.engine_order == "backfill"
    books: dict[int, TrackBook] = {}  # backfill: id of a track's (or port's) state -> its booked intervals
    thr_args = (pe_f0, float(p.pe_throttle_ramp_ns), float(p.pe_throttle_window_ns),
                float(p.pe_throttle_util_threshold) * float(p.pe_throttle_window_ns))

    def book_of(state: list) -> TrackBook:
        b = books.get(id(state))
        if b is None:
            b = books[id(state)] = TrackBook(_POOL_KEEP)
        return b

    def shorten_wait_after(b: TrackBook, j: int, en: float) -> None:
        """The record after a filled gap now waits from ``en`` (its idle time shrinks)."""
        if j < len(b.starts):
            x = b.recs[j]
            if x >= 0:
                w = b.starts[j] - en
                if w > 0:
                    v_wait[x] = w
                else:
                    v_wait[x] = 0.0
                    reason[x] = None

    # per core: compute engine -> (track, state, port states without / with PSUM, dependency label, its dI/dt
    # throttle (Tensor engine, trn2+) or None);
    # issue engine -> (track, state)
    eng_of: list[dict[str, tuple[str, list, tuple, tuple, str, PeThrottle | None]]] = [{} for _ in range(cores)]
    issuer_of: list[dict[str, tuple[str, list]]] = [{} for _ in range(cores)]
    seq = 0  # insertion order of table entries
    tab_get = tab_of.get
    index_min = _INDEX_MIN
    cache_lookups = _CACHE_LOOKUPS
    in_place = _REWRITE_IN_PLACE
    exact_reads = _EXACT_READS
    core = 0
    phys = phys_tabs[0]
    pool = pools[0]

    for i, rec, (sc, opinfo, psum) in zip(range(n), records, static):
        if cores > 1:
            core = rec.program % cores
            phys = phys_tabs[core]
            pool = pools[core]
        eng = rec.engine
        # ---- dependencies -------------------------------------------------------------
        t_dep = 0.0
        d_pred = -1
        d_reason: str | None = None
        acc = []  # writes, and reads that found no entry: table updates, in operand order
        w_last = None  # unless set: the first table update, an in-place rewrite of the write's exact entry
        reads = []  # the entries the other reads hit: their last reader becomes this record
        ops = rec.operands
        for j, isr, isw, buf, nparts, hrows in opinfo:
            o = ops[j]
            a = o.alloc
            ti = tab_get(a)
            if ti is None:
                if a not in written:
                    continue  # nothing writes this allocation: it carries no dependency
                ti = tab_of[a] = (_RangeTable(), 0, 0)
            tab, pb, ab = ti
            if nparts:  # on-chip: partitions × bytes per partition, relative to the table's bases
                if tab is None:
                    tab = phys[buf]
                r0 = o.partition_start - pb
                c0 = o.addr_lo - ab
                bk = (-1, r0, r0 + nparts, c0, o.addr_hi - ab)
            else:  # HBM: rows × columns of the access pattern when it has rows, else the flat byte range
                if tab is None:
                    tab = _RangeTable()
                    tab_of[a] = (tab, 0, 0)
                lo = o.addr_lo
                hi = o.addr_hi
                bk = (0, 0, 1, lo, hi)
                if hrows is not None:
                    pitch, rows, skip = hrows
                    width = hi - lo - skip
                    r0 = lo // pitch
                    c0 = lo - r0 * pitch
                    if 0 < width and c0 + width <= pitch:
                        bk = (pitch, r0, r0 + rows, c0, c0 + width)
            one = tab.exact.get(bk)
            if one is not None and not isw and exact_reads:
                # a read of exactly a live entry's box (the common case): that entry is its only hit
                if isr and one[8] >= 0:  # RAW, as below
                    t = one[6] if one[7] == eng else one[15]
                    if t > t_dep:
                        t_dep, d_pred, d_reason = t, one[8], one[13]
                reads.append(one)
                continue
            if one is not None:
                hits = (one,)  # the only live entry that overlaps its own box (live entries are disjoint)
            else:
                found = tab.found
                hits = found.get(bk) if found is not None else None
                if hits is None:
                    pitch, r0, r1, c0, c1 = bk
                    if (tab.grid is None and tab.pitch == pitch and not tab.mixed
                            and len(tab.ents) - tab.dead < index_min):
                        hits = tab.scan(pitch, r0, r1, c0, c1)  # small table: a linear scan, not counted as a miss
                    else:
                        hits = tab.lookup(pitch, r0, r1, c0, c1)
                    if found is not None:
                        if len(found) < _FOUND_MAX:
                            found[bk] = hits
                    elif cache_lookups:
                        tab.found = {bk: hits}
            if isw:
                for e in hits:
                    widx = e[8]
                    if widx >= 0:
                        if isr:
                            # RAW: the write's end plus its result latency (plus a semaphore hop across
                            # engines), worked out when the entry was written
                            t = e[6] if e[7] == eng else e[15]
                            if t > t_dep:
                                t_dep, d_pred, d_reason = t, widx, e[13]
                        if e[5] > t_dep:  # WAW
                            t_dep, d_pred = e[5], widx
                            d_reason = "capacity" if e[11] != a and logical else e[13]
                    if e[9] > t_dep:  # WAR
                        t_dep, d_pred, d_reason = e[9], e[10], ("capacity" if e[11] != a and logical else "war")
                if one is not None and in_place and one is tab.ents[-1]:
                    # the exact hit is the table's last entry: the write may rewrite it in place
                    if acc or w_last is not None:
                        acc.append((tab, bk, isr, True, hits, a, one))
                    else:  # the record's first table update: kept apart from ``acc`` (most records)
                        w_last, w_tab, w_isr, w_a = one, tab, isr, a
                else:
                    acc.append((tab, bk, isr, True, hits, a, None))
            elif hits:
                if isr:
                    for e in hits:
                        if e[8] >= 0:  # RAW, as above
                            t = e[6] if e[7] == eng else e[15]
                            if t > t_dep:
                                t_dep, d_pred, d_reason = t, e[8], e[13]
                reads.extend(hits)
            else:
                acc.append((tab, bk, isr, False, hits, a, None))
        if serial and global_end > t_dep:
            t_dep, d_pred, d_reason = global_end, global_last, "program_order"
        # ---- issue ----------------------------------------------------------------------
        if eng == "dma":
            plan = sc
            dma_plans[i] = plan
            qn = rec.attrs.get("queue")  # a spill transfer's queue; else one queue per source line
            qk = (core, rec.file, rec.line) if qn is None else (core, qn, None)
            q = queue_of.get(qk)
            if q is None:
                tr = f"{prefixes[core]}dma:q{queue_count[core] % n_queues}"
                queue_count[core] += 1
                ts = tstate.get(tr)
                if ts is None:
                    ts = tstate[tr] = [0.0, -1]
                q = queue_of[qk] = (tr, ts)
            tr, ts = q
            prev_free, pr = ts
            # trigger: when the dependencies are met (pipelined queue) or also the queue's previous
            # transfer is done (unpipelined: each DMA pays its fixed latency after its predecessor)
            t0 = 0.0 if dma_pipelined else prev_free
            why: str | None = None
            if t_dep > t0:
                t0, why, pr = t_dep, d_reason, d_pred
            issue_engine = plan.issue_engine
            if issue_engine is not None:
                iq = issuer_of[core].get(issue_engine)
                if iq is None:
                    itr = prefixes[core] + issue_engine
                    its = tstate.get(itr)
                    if its is None:
                        its = tstate[itr] = [0.0, -1]
                    iq = issuer_of[core][issue_engine] = (itr, its)
                itr, its = iq
                issue_ns = plan.issue_ns
                if backfill:  # the issue takes the issuing engine's earliest idle gap
                    ib = book_of(its)
                    at, ij = ib.gap(t0, issue_ns)
                    if at > t0:
                        t0, why, pr = at, "issue:" + issue_engine, ib.before(ij)[1]
                    shorten_wait_after(ib, ij, t0 + issue_ns)
                    ib.book(ij, t0, t0 + issue_ns, -1)
                elif its[0] > t0:
                    t0, why, pr = its[0], "issue:" + issue_engine, its[1]
                its[0] = t0 + issue_ns
                issue_busy[itr] = issue_busy.get(itr, 0.0) + issue_ns
                t0 += issue_ns
            # the fixed (semaphore-to-start) latency runs from the trigger; the queue is FIFO, so the
            # transfer itself starts no earlier than its predecessor on the queue is done
            xs = t0 + dma_fixed
            if xs <= prev_free:
                xs = prev_free
                pr = ts[1]
            if t0 < prev_free:
                t0 = prev_free
            svc = plan.service_ns
            share = svc * plan.engines / n_dma
            ends = pool.ends
            slot = xs if xs > pool.floor else pool.floor
            done = slot + share
            if share > 0 and ends and slot < ends[-1]:
                slot, done = pool.reserve(xs, share)
            elif share > 0:  # after every booked interval: DmaPool.reserve's append / extend, inline
                if ends and ends[-1] >= slot - 1e-9:
                    if done > ends[-1]:
                        ends[-1] = done
                else:
                    pool.starts.append(slot)
                    ends.append(done)
                    if len(ends) > pool.keep:
                        pool.trim()
            if done < xs + svc:
                done = xs + svc
            dma_slot[i] = slot
            st, en = t0, done
            if why is None and slot > xs + 1e-9:
                why = "dma_engines"
            o_cost = en - st
            lat = sem
            lbl = lbl_dma
        else:
            o_cost, lat, pmode, _ok = sc
            if pmode:
                perf_mode[i] = pmode
            eq = eng_of[core].get(eng)
            if eq is None:
                tr = eng if core == 0 else prefixes[core] + eng
                ts = tstate.get(tr)
                if ts is None:
                    ts = tstate[tr] = [0.0, -1]
                plain_names, psum_names = _engine_ports(prefixes[core], eng, p)
                plain = tuple(tstate.setdefault(pk, [0.0, -1]) for pk in plain_names)
                with_psum = tuple(tstate.setdefault(pk, [0.0, -1]) for pk in psum_names)
                thr = (PeThrottle(pe_f0, float(p.pe_throttle_ramp_ns), float(p.pe_throttle_window_ns),
                                  float(p.pe_throttle_util_threshold)) if eng == "tensor" and pe_f0 < 1.0 else None)
                eq = eng_of[core][eng] = (tr, ts, plain, with_psum, dep_label.get(eng) or "dep:" + eng, thr)
            tr, ts, ports_plain, ports_psum, lbl, thr = eq
            if backfill:
                full = o_cost
                st, en, o_cost, why, pr, prev_free = _backfill(
                    i, book_of(ts), [book_of(ps) for ps in (ports_psum if psum else ports_plain)] if any_ports else [],
                    t_dep, d_pred, d_reason, full, thr is not None, thr_args, shorten_wait_after)
                if o_cost > full:
                    throttled[i] = o_cost - full
            else:
                prev_free, pr = ts
                t0 = prev_free
                why = None
                if t_dep > t0:
                    t0, why, pr = t_dep, d_reason, d_pred
                if thr is not None:
                    full = o_cost
                    o_cost = thr.run(t0, full)
                    if o_cost > full:
                        throttled[i] = o_cost - full
                if any_ports:
                    # a shared port (Trn1) goes to whichever engine's instruction is ready, by time, not by
                    # program order across the engines: the earliest moment ≥ t0 at which every port it needs
                    # has o_cost free, which may be a gap before intervals booked by later-ready instructions
                    pbs = [book_of(ps) for ps in (ports_psum if psum else ports_plain)]
                    at = t0
                    moved = True
                    while moved:
                        moved = False
                        for pb in pbs:
                            x = pb.gap(at, o_cost)[0]
                            if x > at:
                                at, moved = x, True
                    if at > t0:
                        t0, why = at, "port"
                        prec_port = _port_holder(pbs, at, o_cost)
                        if prec_port is not None:
                            pr = prec_port
                    st = t0
                    en = t0 + o_cost
                    _book_ports(pbs, st, o_cost, i)
                else:
                    st = t0
                    en = t0 + o_cost
        ts[0] = en
        ts[1] = i
        v_start[i] = st
        v_end[i] = en
        v_occ[i] = o_cost
        w = st - prev_free
        if w > 0:
            v_wait[i] = w
            reason[i] = why
        v_pred[i] = pr
        track[i] = tr
        if serial and en > global_end:
            global_end, global_last = en, i
        # ---- update byte-range tables ------------------------------------------------
        # The entries that reads hit get this record as their last reader. Doing that before the writes
        # gives what operand order gives: a write of this record that kills such an entry leaves it dead
        # either way, and one that rewrites it in place sets its last read itself.
        for e in reads:
            if en > e[9]:
                e[9] = en
                e[10] = i
        # Every hit was found before this record's updates: one that a write of this record killed (or
        # rewrote in place: seq >= seq0) counts as dead for the later operands, as does an entry added
        # by this record, which they did not see.
        seq0 = seq
        if acc or w_last is not None:
            # when readers see this record's writes: on its own engine (PE accumulation into the same bank:
            # at once; Vector/Scalar/...: after the result latency) or on another engine (plus a semaphore hop)
            same = en if eng == "tensor" else en + lat
            other = en + (lat + sem)
            if w_last is not None:  # (it comes before every entry of ``acc`` in operand order)
                w_last[5:14] = (en, same, eng, i, en if w_isr else 0.0, i if w_isr else -1, w_a, seq, lbl)
                w_last[15] = other
                seq += 1
                w_tab.fresh_i = i
        for tab, bk, isr, isw, hits, a, last in acc:
            if isw:
                if last is not None and tab.fresh_i != i:
                    # the write replaces the table's last entry, same box: rewrite it in place (the same
                    # live entries in the same order as killing it and appending a new one). Unless an
                    # earlier operand of this record added or rewrote an entry of the table (then it set
                    # ``fresh_i``), that entry is still the last, live and not yet rewritten.
                    # fields _WEND .. _WLABEL in one slice assignment, then _WOTHER
                    last[5:14] = (en, same, eng, i, en if isr else 0.0, i if isr else -1, a, seq, lbl)
                    last[15] = other
                    seq += 1
                    tab.fresh_i = i
                    continue
                pitch, r0, r1, c0, c1 = bk
                ex = tab.exact
                if hits:
                    # entries the write fully covers are dead; one it only overlaps ends the disjointness
                    k = 0
                    for e in hits:
                        if e[12] >= seq0 or e[0] == _DEAD:
                            continue
                        if e[0] == pitch and r0 <= e[1] and e[2] <= r1 and c0 <= e[3] and e[4] <= c1:
                            e[0] = _DEAD
                            k += 1
                            if ex is not _NO_EXACT and ex.get(e[14]) is e:
                                del ex[e[14]]
                        else:
                            ex = tab.exact = _NO_EXACT
                    if k:
                        tab.found = None
                        k += tab.dead
                        if k >= len(tab.ents):
                            tab.clear()
                            ex = tab.exact
                        elif k >= 16 and 2 * k >= len(tab.ents):
                            tab.dead = k
                            tab.rebuild(tab.misses >= _MISSES_BEFORE_INDEX)
                        else:
                            tab.dead = k
                e = [pitch, r0, r1, c0, c1, en, same, eng, i, (en if isr else 0.0), (i if isr else -1), a, seq, lbl,
                     bk, other]
            else:  # a read that found no entry
                pitch, r0, r1, c0, c1 = bk
                ex = tab.exact
                e = [pitch, r0, r1, c0, c1, 0.0, 0.0, "", -1, en, i, a, seq, "", bk, 0.0]
            seq += 1
            ents = tab.ents
            if ex is not _NO_EXACT:
                if tab.fresh_i == i:  # another entry of this record: the table stays disjoint if they are
                    for f in reversed(ents):
                        if f[12] < seq0:
                            break
                        if _overlaps(f, pitch, r0, r1, c0, c1):
                            ex = tab.exact = _NO_EXACT
                            break
                if ex is not _NO_EXACT and r0 < r1 and c0 < c1:
                    ex[bk] = e
            tab.fresh_i = i
            tab.found = None
            ents.append(e)
            tp = tab.pitch
            if tp != pitch:
                if tp is None:
                    tab.pitch = pitch
                else:
                    tab.added()
            elif tab.grid is not None:
                tab._file(e)
    for v in views:
        v.release()
    return Schedule(trace=trace, params=p, policy=pol, cores=cores, track=track, start=start, end=end, occ=occ_a,
                    wait=wait, pred=pred, reason=reason, dma=dma_plans, dma_slot=dma_slot, issue_busy=issue_busy,
                    perf_mode=perf_mode, throttled=throttled, unmodelled=unmodelled, rotation=rot, signature=signature)


_NATIVE_BUFFERS = {"sbuf": 0, "psum": 1, "hbm": 2}


def native_available() -> bool:
    """Whether ``schedule`` runs its per-record loop compiled (the ``_schedule_c`` extension is built and not
    switched off)."""
    return _NATIVE and _schedule_c is not None


def _schedule_native(trace: Trace, p: PerfParams, pol: SchedulePolicy, cores: int, rot: RotationPlan | None,
                     sig_classes: list[tuple], cls_idx: array, signature: array, unmodelled: Counter,
                     written: set[int]) -> Schedule | None:
    """The loop of :func:`_schedule`, compiled: the same schedule. Prepares what the C loop needs once per run
    (tracks, reasons, the rotation's shared tables) and once per cost signature (costs, operand facts); returns
    None (the Python loop runs) for a trace outside what the C loop knows (an engine or buffer not named in
    ``COMPUTE_ENGINES`` / ``_NATIVE_BUFFERS``)."""
    records = trace.records
    n = len(records)
    logical = pol.mode != "physical"
    eng_code = {e: k for k, e in enumerate(COMPUTE_ENGINES)}
    eng_code["dma"] = len(COMPUTE_ENGINES)
    issuers: list[str] = []
    classes = []
    for (sc, opinfo, psum), f, _wpos, _unmod in sig_classes:
        e = eng_code.get(records[f].engine)
        if e is None:
            return None
        ops = []
        for j, isr, isw, buf, nparts, hrows in opinfo:
            b = _NATIVE_BUFFERS.get(buf)
            if b is None:
                return None
            pitch, rows, skip = hrows if hrows is not None else (0, 0, 0)
            ops.append((j, int(isr), int(isw), b, nparts, pitch, rows, skip))
        if e == len(COMPUTE_ENGINES):
            plan = sc
            issue = -1
            if plan.issue_engine is not None:
                if plan.issue_engine not in issuers:
                    issuers.append(plan.issue_engine)
                issue = issuers.index(plan.issue_engine)
            classes.append((1, e, 0.0, 0.0, None, int(psum), plan, issue, float(plan.issue_ns),
                            float(plan.service_ns), int(plan.engines), tuple(ops)))
        else:
            occ, lat, pmode, _ok = sc
            classes.append((0, e, float(occ), float(lat), pmode, int(psum), None, -1, 0.0, 0.0, 0, tuple(ops)))
    # tracks, by name (a DMA issued by the Sync or GpSimd engine occupies that engine's own track)
    names: dict[str, int] = {}

    def tid(name: str) -> int:
        return names.setdefault(name, len(names))

    n_queues = int(p.dma_queues)
    eng_tracks, plain_ports, psum_ports, queue_tracks, issuer_tracks = [], [], [], [], []
    for c in range(cores):
        pre = "" if c == 0 else f"nc{c}/"
        for e in COMPUTE_ENGINES:
            eng_tracks.append(tid(pre + e))
            plain_names, psum_names = _engine_ports(pre, e, p)
            plain_ports.append(tuple(tid(x) for x in plain_names))
            psum_ports.append(tuple(tid(x) for x in psum_names))
        queue_tracks.extend(tid(f"{pre}dma:q{q}") for q in range(n_queues))
        issuer_tracks.extend(tid(pre + name) for name in issuers)
    track_names = tuple(names)
    reasons = ("capacity", "war", "program_order", "dma_engines", "port",
               *("dep:" + e for e in (*COMPUTE_ENGINES, "dma")), *("issue:" + name for name in issuers))
    rot_tables, rot_allocs = _rotation_tables(rot, written) if logical and rot is not None else (0, {})
    pe_f0 = float(p.pe_throttle_start_fraction)
    cfg = (int(logical), int(pol.mode == "serial"), cores, float(p.cross_engine_sem_ns), float(p.dma_fixed_ns),
           int(bool(p.dma_queue_pipelined)), int(p.dma_engines), n_queues,
           int(bool(p.sbuf_port_shared_vector_gpsimd or p.psum_port_shared_vector_scalar)), int(pe_f0 < 1.0),
           pe_f0, float(p.pe_throttle_ramp_ns), float(p.pe_throttle_window_ns), float(p.pe_throttle_util_threshold),
           _POOL_KEEP)
    start, end, occ_a, wait, pred, reason, track = _empty_outputs(n)
    dma_plans: dict[int, DmaPlan] = {}
    dma_slot: dict[int, float] = {}
    perf_mode: dict[int, str] = {}
    throttled: dict[int, float] = {}
    try:
        busy = _schedule_c.run(records, cls_idx, classes, cfg,
                               (track_names, eng_tracks, plain_ports, psum_ports, queue_tracks, issuer_tracks,
                                len(issuers)),
                               reasons, rot_tables, rot_allocs, written,
                               (start, end, occ_a, wait, pred, reason, track, dma_plans, dma_slot, perf_mode,
                                throttled))
    except OverflowError:  # an address or allocation id beyond 64 bits: Python's integers take it
        return None
    issue_busy = {track_names[t]: ns for t, ns in busy}
    return Schedule(trace=trace, params=p, policy=pol, cores=cores, track=track, start=start, end=end, occ=occ_a,
                    wait=wait, pred=pred, reason=reason, dma=dma_plans, dma_slot=dma_slot, issue_busy=issue_busy,
                    perf_mode=perf_mode, throttled=throttled, unmodelled=unmodelled, rotation=rot, signature=signature)
