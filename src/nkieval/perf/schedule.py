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
* ports (Trn1): VectorE and GpSimdE share the SBUF port, VectorE and ScalarE the PSUM port.

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
from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

from nkieval.perf.costs import cost_of
from nkieval.perf.dma import DmaPlan, plan_dma
from nkieval.perf.params import PerfParams
from nkieval.perf.rotation import RotationPlan, plan_rotation
from nkieval.sim.trace import OperandAccess, Trace

ScheduleMode = Literal["compiler", "physical", "serial"]
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
    """

    mode: ScheduleMode = "compiler"
    rotation_depth: int | None = None
    cores: int | None = None

    def __post_init__(self) -> None:
        if self.mode not in ("compiler", "physical", "serial"):
            raise ScheduleError(f"SchedulePolicy.mode must be 'compiler', 'physical' or 'serial', got {self.mode!r}")
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
    unmodelled: Counter = field(default_factory=Counter)
    rotation: RotationPlan | None = None
    # per record: the first record with the same cost signature (opcode, engine, attributes, operand roles,
    # modes, buffers, dtypes, shapes, patterns and sizes): records of one signature cost the same
    signature: array = field(default_factory=lambda: array("q"))

    @property
    def total_time(self) -> float:
        return max(self.end) if len(self.end) else 0.0

    def __len__(self) -> int:
        return len(self.start)


def _box(o: OperandAccess) -> tuple[int, int, int, int, int]:
    """(pitch, r0, r1, c0, c1): rows × byte columns an operand touches (pitch -1: partitions)."""
    if o.buffer != "hbm":
        return -1, o.partition_start, o.partition_start + max(1, o.partitions), o.addr_lo, o.addr_hi
    pat = o.pattern
    lo, hi = o.addr_lo, o.addr_hi
    if len(pat) >= 2 and pat[0][1] > 1:
        ne = 1
        for d in o.shape:
            ne *= d
        isz = max(1, o.nbytes // ne) if ne else 1
        pitch = pat[0][0] * isz
        rows = pat[0][1]
        if pitch > 0:
            width = hi - lo - (rows - 1) * pitch
            r0, c0 = divmod(lo, pitch)
            if 0 < width and c0 + width <= pitch:
                return pitch, r0, r0 + rows, c0, c0 + width
    return 0, 0, 1, lo, hi


def _flat(e: list) -> tuple[int, int]:
    p = e[0]
    if p <= 0:
        return e[3], e[4]
    return e[1] * p + e[3], (e[2] - 1) * p + e[4]


_DEAD = -2  # pitch of an entry a later write fully covered

# entry fields: box, last write (end, latency, engine, record), last read (end, record), allocation, insertion
# order, the wait reason a reader of the write gets ("dep:<engine>"), and the box as one tuple (its key)
_P, _R0, _R1, _C0, _C1, _WEND, _WLAT, _WENG, _WIDX, _REND, _RIDX, _ALLOC, _SEQ, _WLABEL, _BOX = range(15)

_INDEX_MIN = 16  # live entries before a table gets a grid index (below it a linear scan is faster)
_MISSES_BEFORE_INDEX = 4  # lookups that ``exact`` could not answer before a large table gets its grid
# The shortcuts below return what a scan of the live entries would; the switches exist for the tests
# that check exactly that (each off gives the same schedule).
_EXACT_INDEX = True  # tables keep ``exact`` (box -> entry) while their live entries are disjoint
_CACHE_LOOKUPS = True  # tables remember a looked-up box's hits until an entry is added or killed
_REWRITE_IN_PLACE = True  # a write replacing the table's last entry (same box) reuses it
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
        self.exact: dict[tuple, list] | None = {} if _EXACT_INDEX else None  # box -> live entry (disjoint)
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
            return [e for e in self.ents if e[0] == pitch and e[1] < r1 and r0 < e[2] and e[3] < c1 and c0 < e[4]]
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
        self.exact = {} if _EXACT_INDEX else None
        self.found = None
        self.pitch = None
        self.mixed = False
        self.dead = 0


class DmaPool:
    """The core's DMA engines as one pool: busy intervals (sorted, merged) of engine-time / engines.

    A transfer over ``e`` of the 16 engines for ``t`` ns each needs ``t·e/16`` of pool time. It takes
    the earliest gap at or after it is ready (backfilling idle time left by earlier transfers), so
    queues share the engines' bandwidth. Only the latest ``keep`` intervals are remembered.
    """

    __slots__ = ("ends", "floor", "keep", "starts")

    def __init__(self, keep: int = 512) -> None:
        self.starts: list[float] = []
        self.ends: list[float] = []
        self.floor = 0.0
        self.keep = keep

    def reserve(self, ready: float, dur: float) -> float:
        """Book ``dur`` ns at the earliest time ≥ ``ready`` with a free gap; returns the start."""
        starts, ends = self.starts, self.ends
        t = ready if ready > self.floor else self.floor
        if dur <= 0:
            return t
        j = bisect_right(ends, t)
        n = len(starts)
        while j < n and starts[j] < t + dur:
            if ends[j] > t:
                t = ends[j]
            j += 1
        e = t + dur
        # merge with the previous / next interval when touching
        if j > 0 and ends[j - 1] >= t - 1e-9:
            ends[j - 1] = e if e > ends[j - 1] else ends[j - 1]
            if j < n and starts[j] <= e + 1e-9:
                ends[j - 1] = max(ends[j - 1], ends[j])
                del starts[j], ends[j]
        elif j < n and starts[j] <= e + 1e-9:
            starts[j] = t
        else:
            starts.insert(j, t)
            ends.insert(j, e)
        if len(starts) > self.keep:
            self.trim()
        return t

    def trim(self) -> None:
        """Forget the older half of the intervals (nothing is booked before the new floor)."""
        cut = self.keep // 2
        self.floor = self.ends[cut - 1]
        del self.starts[:cut], self.ends[:cut]


def _static_costs(records: list, p: PerfParams) -> tuple[list, array, Counter, set[int]]:
    """Per record: a DmaPlan or (occ, lat, mode, has_rule), and the first record with its signature; the
    opcodes costed by the fallback rule; the allocations some record writes.

    Costs are memoised on the record's signature: opcode, engine, attributes (lists as tuples) and, per
    operand, everything a cost rule reads (role, mode, buffer, dtype, shape, pattern, nbytes,
    contiguous bytes, partitions). Most records repeat the signature of a recent record from the same
    source line, so the two latest signatures of each line are compared first (no key to hash).
    """
    memo: dict[tuple, tuple[object, int]] = {}  # signature -> (cost, first record with it)
    get = memo.get
    out: list = [None] * len(records)
    first: list[int] = [0] * len(records)
    unmodelled: Counter = Counter()
    written: set[int] = set()
    add_written = written.add
    # source line -> its two latest signatures: [operand signatures, attributes, opcode, engine, file, cost, first]
    recent: dict[int | None, list[list]] = {}
    list_at: dict[tuple, tuple[int, ...]] = {}  # attribute names -> positions that held a list
    for i, rec in enumerate(records):
        sig = []
        for o in rec.operands:
            m = o.mode
            if "w" in m:
                add_written(o.alloc)
            sig.append((o.role, m, o.buffer, o.dtype, o.shape, o.pattern, o.nbytes, o.contiguous_bytes, o.partitions))
        attrs = rec.attrs
        opcode = rec.opcode
        rl = recent.get(rec.line)
        v = None
        if rl is not None:
            v = rl[0]
            if not (v[0] == sig and v[1] == attrs and v[2] == opcode and v[3] == rec.engine and v[4] == rec.file):
                v = rl[1] if len(rl) > 1 else None
                if v is not None:
                    if v[0] == sig and v[1] == attrs and v[2] == opcode and v[3] == rec.engine and v[4] == rec.file:
                        rl.reverse()
                    else:
                        v = None
        if v is not None:
            c = v[5]
            f = v[6]
        else:
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
            key = (opcode, rec.engine, names, values, *sig)
            try:
                cf = get(key)
            except TypeError:  # list-valued attributes: make them hashable, and remember where they were
                list_at[names] = (*(pos or ()), *(j for j, x in enumerate(values) if isinstance(x, list)))
                values = tuple(tuple(x) if isinstance(x, list) else x for x in values)
                key = (opcode, rec.engine, names, values, *sig)
                cf = get(key)
            if cf is None:
                if rec.engine == "dma":
                    c = plan_dma(rec, p)
                else:
                    cost, ok = cost_of(rec, p)
                    c = (cost.occ, cost.lat, cost.mode, ok)
                f = i
                memo[key] = (c, f)
            else:
                c, f = cf
            v = [sig, attrs, opcode, rec.engine, rec.file, c, f]
            if rl is None:
                recent[rec.line] = [v]
            else:
                rl.insert(0, v)
                del rl[2:]
        if type(c) is tuple and not c[3]:
            unmodelled[opcode] += 1
        out[i] = c
        first[i] = f
    return out, array("q", first), unmodelled, written


def schedule(trace: Trace, params: PerfParams, policy: SchedulePolicy | None = None) -> Schedule:
    """Schedule every record of ``trace`` on ``params``' target (see module docstring)."""
    # The scheduler allocates many small lists and no reference cycles; with a large trace alive, the
    # cyclic collector's full passes over it would dominate the run time, so it is paused meanwhile.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _schedule(trace, params, policy)
    finally:
        if enabled:
            gc.enable()


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
    first_of: dict[int, int] = {}  # rotating instance -> the first instance of its buffer
    firsts: set[int] = set()
    if logical:
        rot = plan_rotation(trace, depth, {"sbuf": int(p.sbuf_usable_bytes_per_partition),
                                           "psum": int(p.psum_bytes_per_partition)})
        # per site, an instance comes after the one it reuses
        get_first = first_of.get
        for a, prev in rot.reuse_of.items():
            first_of[a] = get_first(prev, prev)
        firsts = set(rot.reuse_of.values()) - first_of.keys()
    static, signature, unmodelled, written = _static_costs(records, p)
    sem = float(p.cross_engine_sem_ns)
    dma_fixed = float(p.dma_fixed_ns)
    dma_pipelined = bool(p.dma_queue_pipelined)
    n_dma = int(p.dma_engines)
    n_queues = int(p.dma_queues)
    port_vg = bool(p.sbuf_port_shared_vector_gpsimd)
    port_vs = bool(p.psum_port_shared_vector_scalar)

    start = array("d", bytes(8 * n))
    end = array("d", bytes(8 * n))
    occ_a = array("d", bytes(8 * n))
    wait = array("d", bytes(8 * n))
    pred = array("q", [-1]) * n
    # the loop stores through memoryviews (cheaper per item than the arrays' own item assignment)
    views = [memoryview(x) for x in (start, end, occ_a, wait, pred)]
    v_start, v_end, v_occ, v_wait, v_pred = views
    reason: list[str | None] = [None] * n
    track: list[str] = [""] * n
    dma_plans: dict[int, DmaPlan] = {}
    perf_mode: dict[int, str] = {}
    issue_busy: dict[str, float] = {}

    tstate: dict[str, list] = {}  # track or port -> [free at (ns), last record on it]
    queue_of: dict[tuple[int, str | None, int | None], tuple[str, list]] = {}  # DMA queue -> (track, state)
    queue_count = [0] * cores
    pools = [DmaPool() for _ in range(cores)]
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
        shared: dict[int, _RangeTable] = {}  # first instance -> the buffer's table
        allocs = trace.allocations
        for a in written:
            key = first_of.get(a)
            if key is None:
                if a not in firsts:
                    tab_of[a] = (_RangeTable(), 0, 0)
                    continue
                key = a
            tab = shared.get(key)
            if tab is None:
                tab = shared[key] = _RangeTable()
            ra = allocs[a]
            tab_of[a] = (tab, ra.partition_offset, ra.address)
    else:
        tab_of = dict.fromkeys(written, (None, 0, 0))
    phys_tabs = [{"sbuf": _RangeTable(), "psum": _RangeTable()} for _ in range(cores)]
    # Trn1 shared ports, per core and engine: the SBUF port (Vector/GpSimd) always, the PSUM port
    # (Vector/Scalar) when the instruction touches PSUM
    sbuf_port: dict[tuple[int, str], str] = {}
    psum_port: dict[tuple[int, str], str] = {}
    for c, pre in enumerate(prefixes):
        for e in COMPUTE_ENGINES:
            if port_vg and e in ("vector", "gpsimd"):
                sbuf_port[(c, e)] = pre + "port:sbuf_vg"
            if port_vs and e in ("vector", "scalar"):
                psum_port[(c, e)] = pre + "port:psum_vs"
    any_ports = bool(sbuf_port or psum_port)
    # per core: compute engine -> (track, state, port states without / with PSUM, dependency label);
    # issue engine -> (track, state)
    eng_of: list[dict[str, tuple[str, list, tuple, tuple, str]]] = [{} for _ in range(cores)]
    issuer_of: list[dict[str, tuple[str, list]]] = [{} for _ in range(cores)]
    seq = 0  # insertion order of table entries
    tab_get = tab_of.get
    index_min = _INDEX_MIN
    cache_lookups = _CACHE_LOOKUPS
    in_place = _REWRITE_IN_PLACE
    core = 0
    phys = phys_tabs[0]
    pool = pools[0]

    for i in range(n):
        rec = records[i]
        if cores > 1:
            core = rec.program % cores
            phys = phys_tabs[core]
            pool = pools[core]
        eng = rec.engine
        # ---- dependencies -------------------------------------------------------------
        t_dep = 0.0
        d_pred = -1
        d_reason: str | None = None
        acc = []
        for o in rec.operands:
            a = o.alloc
            ti = tab_get(a)
            if ti is None:
                continue
            buf = o.buffer
            if buf == "hbm":
                tab = ti[0]
                if tab is None:
                    tab = _RangeTable()
                    tab_of[a] = (tab, 0, 0)
                bk = _box(o)
                pitch, r0, r1, c0, c1 = bk
            else:
                tab, pb, ab = ti
                if tab is None:
                    tab = phys[buf]
                pitch = -1
                r0 = o.partition_start - pb
                r1 = r0 + (o.partitions or 1)
                c0 = o.addr_lo - ab
                c1 = o.addr_hi - ab
                bk = (-1, r0, r1, c0, c1)
            m = o.mode
            isw = "w" in m
            isr = "r" in m
            ex = tab.exact
            one = ex.get(bk) if ex is not None else None
            if one is not None:
                hits = (one,)  # the only live entry that overlaps its own box (live entries are disjoint)
            else:
                found = tab.found
                hits = found.get(bk) if found is not None else None
                if hits is None:
                    if (tab.grid is None and tab.pitch == pitch and not tab.mixed
                            and len(tab.ents) - tab.dead < index_min):
                        # one pitch (not mixed): every live entry has it
                        hits = [e for e in tab.ents if e[0] == pitch and e[1] < r1 and r0 < e[2] and e[3] < c1
                                and c0 < e[4]]
                    else:
                        hits = tab.lookup(pitch, r0, r1, c0, c1)
                    if found is not None:
                        if len(found) < _FOUND_MAX:
                            found[bk] = hits
                    elif cache_lookups:
                        tab.found = {bk: hits}
            for e in hits:
                widx = e[8]
                if widx >= 0:
                    if isr:
                        # RAW: the write's end plus its result latency (plus a semaphore hop across engines)
                        t = e[5]
                        if e[7] != eng:
                            t += e[6] + sem
                        elif eng != "tensor":
                            t += e[6]
                        if t > t_dep:
                            t_dep, d_pred, d_reason = t, widx, e[13]
                    if isw and e[5] > t_dep:  # WAW
                        t_dep, d_pred = e[5], widx
                        d_reason = "capacity" if e[11] != a and logical else e[13]
                if isw and e[9] > t_dep:  # WAR
                    t_dep, d_pred, d_reason = e[9], e[10], ("capacity" if e[11] != a and logical else "war")
            acc.append((tab, bk, isr, isw, hits, a, one))
        if serial and global_end > t_dep:
            t_dep, d_pred, d_reason = global_end, global_last, "program_order"
        # ---- issue ----------------------------------------------------------------------
        sc = static[i]
        if eng == "dma":
            plan = sc
            dma_plans[i] = plan
            qk = (core, rec.file, rec.line)
            q = queue_of.get(qk)
            if q is None:
                tr = f"{prefixes[core]}dma:q{queue_count[core] % n_queues}"
                queue_count[core] += 1
                ts = tstate.get(tr)
                if ts is None:
                    ts = tstate[tr] = [0.0, -1]
                q = queue_of[qk] = (tr, ts)
            tr, ts = q
            prev_free = ts[0]
            # trigger: when the dependencies are met (pipelined queue) or also the queue's previous
            # transfer is done (unpipelined: each DMA pays its fixed latency after its predecessor)
            t0 = 0.0 if dma_pipelined else prev_free
            why: str | None = None
            pr = ts[1]
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
                if its[0] > t0:
                    t0, why, pr = its[0], "issue:" + issue_engine, its[1]
                issue_ns = plan.issue_ns
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
            if share > 0 and ends and slot < ends[-1]:
                slot = pool.reserve(xs, share)
            elif share > 0:  # after every booked interval: DmaPool.reserve's append / extend, inline
                done = slot + share
                if ends and ends[-1] >= slot - 1e-9:
                    if done > ends[-1]:
                        ends[-1] = done
                else:
                    pool.starts.append(slot)
                    ends.append(done)
                    if len(ends) > pool.keep:
                        pool.trim()
            done = slot + share
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
                ports = []
                for pk in (sbuf_port.get((core, eng)), psum_port.get((core, eng))):
                    if pk is not None:
                        ps = tstate.get(pk)
                        if ps is None:
                            ps = tstate[pk] = [0.0, -1]
                        ports.append(ps)
                with_psum = tuple(ports)
                plain = with_psum[:1] if sbuf_port.get((core, eng)) is not None else ()
                eq = eng_of[core][eng] = (tr, ts, plain, plain if len(plain) == len(with_psum) else with_psum,
                                          dep_label.get(eng) or "dep:" + eng)
            tr, ts, ports_plain, ports_psum, lbl = eq
            t0 = prev_free = ts[0]
            why = None
            pr = ts[1]
            if t_dep > t0:
                t0, why, pr = t_dep, d_reason, d_pred
            if any_ports:
                pstates = ports_plain
                if ports_psum is not ports_plain:
                    for o in rec.operands:
                        if o.buffer == "psum":
                            pstates = ports_psum
                            break
                for ps in pstates:
                    if ps[0] > t0:
                        t0, why, pr = ps[0], "port", ps[1]
                st = t0
                en = t0 + o_cost
                for ps in pstates:
                    ps[0] = en
                    ps[1] = i
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
        if en > global_end:
            global_end, global_last = en, i
        # ---- update byte-range tables ------------------------------------------------
        # Every hit was found before this record's updates: one that a write of this record killed (or
        # rewrote in place: seq >= seq0) counts as dead for the later operands, as does an entry added
        # by this record, which they did not see.
        seq0 = seq
        for tab, bk, isr, isw, hits, a, one in acc:
            if isw:
                if one is not None and in_place and one[12] < seq0 and one[0] != _DEAD and one is tab.ents[-1]:
                    # the write replaces the table's last entry, same box: rewrite it in place (the same
                    # live entries in the same order as killing it and appending a new one)
                    one[5] = en
                    one[6] = lat
                    one[7] = eng
                    one[8] = i
                    one[9] = en if isr else 0.0
                    one[10] = i if isr else -1
                    one[11] = a
                    one[12] = seq
                    one[13] = lbl
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
                            if ex is not None and ex.get(e[14]) is e:
                                del ex[e[14]]
                        else:
                            ex = tab.exact = None
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
                e = [pitch, r0, r1, c0, c1, en, lat, eng, i, (en if isr else 0.0), (i if isr else -1), a, seq, lbl,
                     bk]
            elif hits:
                for e in hits:
                    if en > e[9] and e[12] < seq0:
                        e[9] = en
                        e[10] = i
                continue
            else:
                pitch, r0, r1, c0, c1 = bk
                ex = tab.exact
                e = [pitch, r0, r1, c0, c1, 0.0, 0.0, "", -1, en, i, a, seq, "", bk]
            seq += 1
            ents = tab.ents
            if ex is not None:
                if tab.fresh_i == i:  # another entry of this record: the table stays disjoint if they are
                    for f in reversed(ents):
                        if f[12] < seq0:
                            break
                        if _overlaps(f, pitch, r0, r1, c0, c1):
                            ex = tab.exact = None
                            break
                if ex is not None and r0 < r1 and c0 < c1:
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
                    perf_mode=perf_mode, unmodelled=unmodelled, rotation=rot, signature=signature)
