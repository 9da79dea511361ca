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

from array import array
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Literal

from nkieval.perf.costs import cost_of, itemsize
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

    @property
    def total_time(self) -> float:
        return max(self.end) if len(self.end) else 0.0

    def __len__(self) -> int:
        return len(self.start)


def _box(o: OperandAccess, isz: int) -> tuple[int, int, int, int, int]:
    """(pitch, r0, r1, c0, c1): rows × byte columns an operand touches (pitch -1: partitions)."""
    if o.buffer != "hbm":
        return -1, o.partition_start, o.partition_start + max(1, o.partitions), o.addr_lo, o.addr_hi
    pat = o.pattern
    lo, hi = o.addr_lo, o.addr_hi
    if len(pat) >= 2 and pat[0][1] > 1:
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


def _overlaps(e: list, pitch: int, r0: int, r1: int, c0: int, c1: int) -> bool:
    if e[0] == _DEAD:
        return False
    if e[0] == pitch:
        return e[1] < r1 and r0 < e[2] and e[3] < c1 and c0 < e[4]
    # different row pitches in HBM: compare flat byte ranges
    a0, a1 = _flat(e)
    b0, b1 = (r0 * pitch + c0, (r1 - 1) * pitch + c1) if pitch > 0 else (c0, c1)
    return a0 < b1 and b0 < a1


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
            cut = self.keep // 2
            self.floor = ends[cut - 1]
            del starts[:cut], ends[:cut]
        return t


# entry fields
_P, _R0, _R1, _C0, _C1, _WEND, _WLAT, _WENG, _WIDX, _REND, _RIDX, _ALLOC = range(12)


_OPERAND_SIGNATURE = attrgetter("role", "mode", "buffer", "dtype", "shape", "pattern", "nbytes", "contiguous_bytes",
                                "partitions")


def _static_costs(records: list, p: PerfParams) -> tuple[list, Counter]:
    """Per record: a DmaPlan or (occ, lat, mode, has_rule); memoised on the record's shape signature."""
    memo: dict[tuple, object] = {}
    out: list = [None] * len(records)
    unmodelled: Counter = Counter()
    sig = _OPERAND_SIGNATURE
    get = memo.get
    for i, rec in enumerate(records):
        attrs = rec.attrs
        key = (rec.opcode, rec.engine, tuple(map(sig, rec.operands)), tuple(attrs.items()) if attrs else ())
        try:
            c = get(key)
        except TypeError:  # list-valued attributes: make them hashable
            key = (*key[:3], tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in attrs.items()))
            c = get(key)
        if c is None:
            if rec.engine == "dma":
                c = plan_dma(rec, p)
            else:
                cost, ok = cost_of(rec, p)
                c = (cost.occ, cost.lat, cost.mode, ok)
            memo[key] = c
        if type(c) is tuple and not c[3]:
            unmodelled[rec.opcode] += 1
        out[i] = c
    return out, unmodelled


def schedule(trace: Trace, params: PerfParams, policy: SchedulePolicy | None = None) -> Schedule:
    """Schedule every record of ``trace`` on ``params``' target (see module docstring)."""
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
    buf_of: dict[int, tuple[int, int, int]] = {}  # alloc -> (buffer key, partition base, address base)
    if logical:
        rot = plan_rotation(trace, depth, {"sbuf": int(p.sbuf_usable_bytes_per_partition),
                                           "psum": int(p.psum_bytes_per_partition)})
        allocs = trace.allocations
        for a in sorted(rot.reuse_of, key=lambda x: allocs[x].alloc_seq):
            prev = rot.reuse_of[a]
            if prev not in buf_of:
                pa = allocs[prev]
                buf_of[prev] = (prev, pa.partition_offset, pa.address)
            ra = allocs[a]
            buf_of[a] = (buf_of[prev][0], ra.partition_offset, ra.address)
    written: set[int] = set()
    for r in records:
        for o in r.operands:
            if "w" in o.mode:
                written.add(o.alloc)
    static, unmodelled = _static_costs(records, p)
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
    reason: list[str | None] = [None] * n
    track: list[str] = [""] * n
    dma_plans: dict[int, DmaPlan] = {}
    perf_mode: dict[int, str] = {}
    issue_busy: dict[str, float] = {}

    eng_free: dict[str, float] = {}
    eng_last: dict[str, int] = {}
    queue_of: dict[tuple[int, str | None, int | None], str] = {}
    queue_count = [0] * cores
    pools = [DmaPool() for _ in range(cores)]
    dma_slot: dict[int, float] = {}
    port_free: dict[str, float] = {}
    table: dict[object, list[list]] = {}
    compact_at: dict[int, int] = {}
    last_end: dict[int, tuple[float, int]] = {}
    global_end = 0.0
    global_last = -1
    prefixes = [("" if c == 0 else f"nc{c}/") for c in range(cores)]
    dep_label = {e: "dep:" + e for e in (*COMPUTE_ENGINES, "dma", "")}

    for i in range(n):
        rec = records[i]
        core = rec.program % cores if cores > 1 else 0
        pre = prefixes[core]
        eng = rec.engine
        is_dma = eng == "dma"
        # ---- dependencies -------------------------------------------------------------
        t_dep = 0.0
        d_pred = -1
        d_reason: str | None = None
        acc = []
        onchip_allocs = []
        for o in rec.operands:
            a = o.alloc
            if o.buffer != "hbm":
                onchip_allocs.append(a)
                if a not in written:
                    continue
                pitch = -1
                r0 = o.partition_start
                c0 = o.addr_lo
                c1 = o.addr_hi
                if logical:
                    bo = buf_of.get(a)
                    if bo is None:
                        key = a
                    else:
                        key = bo[0]
                        r0 -= bo[1]
                        c0 -= bo[2]
                        c1 -= bo[2]
                else:
                    key = (core, o.buffer)
                r1 = r0 + (o.partitions or 1)
            else:
                if a not in written:
                    continue
                key = a
                pitch, r0, r1, c0, c1 = _box(o, itemsize(o))
            ents = table.get(key)
            if ents is None:
                ents = table[key] = []
            m = o.mode
            isw = "w" in m
            isr = "r" in m
            hits = []
            for e in ents:
                ep = e[0]
                if ep == pitch:
                    if not (e[1] < r1 and r0 < e[2] and e[3] < c1 and c0 < e[4]):
                        continue
                elif ep == _DEAD or not _overlaps(e, pitch, r0, r1, c0, c1):
                    continue
                hits.append(e)
                widx = e[8]
                if widx >= 0:
                    if isr:
                        weng = e[7]
                        t = e[5]
                        if weng != eng:
                            t += e[6] + sem
                        elif eng != "tensor":
                            t += e[6]
                        if t > t_dep:
                            t_dep, d_pred, d_reason = t, widx, dep_label.get(weng) or "dep:" + weng
                    if isw and e[5] > t_dep:
                        t_dep, d_pred = e[5], widx
                        d_reason = "capacity" if e[11] != a and logical else (dep_label.get(e[7]) or "dep:" + e[7])
                if isw and e[9] > t_dep:
                    t_dep, d_pred, d_reason = e[9], e[10], ("capacity" if e[11] != a and logical else "war")
            acc.append((ents, pitch, r0, r1, c0, c1, isr, isw, hits, a))
        if serial and global_end > t_dep:
            t_dep, d_pred, d_reason = global_end, global_last, "program_order"
        # ---- issue ----------------------------------------------------------------------
        sc = static[i]
        if is_dma:
            plan = sc
            dma_plans[i] = plan
            qk = (core, rec.file, rec.line)
            tr = queue_of.get(qk)
            if tr is None:
                tr = f"{pre}dma:q{queue_count[core] % n_queues}"
                queue_count[core] += 1
                queue_of[qk] = tr
            prev_free = eng_free.get(tr, 0.0)
            # trigger: when the dependencies are met (pipelined queue) or also the queue's previous
            # transfer is done (unpipelined: each DMA pays its fixed latency after its predecessor)
            t0 = 0.0 if dma_pipelined else prev_free
            why: str | None = None
            pr = eng_last.get(tr, -1)
            if t_dep > t0:
                t0, why, pr = t_dep, d_reason, d_pred
            if plan.issue_engine is not None:
                itr = pre + plan.issue_engine
                ti = eng_free.get(itr, 0.0)
                if ti > t0:
                    t0, why, pr = ti, "issue:" + plan.issue_engine, eng_last.get(itr, -1)
                eng_free[itr] = t0 + plan.issue_ns
                issue_busy[itr] = issue_busy.get(itr, 0.0) + plan.issue_ns
                t0 += plan.issue_ns
            # the fixed (semaphore-to-start) latency runs from the trigger; the queue is FIFO, so the
            # transfer itself starts no earlier than its predecessor on the queue is done
            xs = t0 + dma_fixed
            if xs <= prev_free:
                xs = prev_free
                pr = eng_last.get(tr, -1)
            if t0 < prev_free:
                t0 = prev_free
            svc = plan.service_ns
            pool = pools[core]
            slot = pool.reserve(xs, svc * plan.engines / n_dma)
            done = slot + svc * plan.engines / n_dma
            if done < xs + svc:
                done = xs + svc
            dma_slot[i] = slot
            st, en = t0, done
            if why is None and slot > xs + 1e-9:
                why = "dma_engines"
            o_cost = en - st
            lat = sem
            weng_out = "dma"
        else:
            o_cost, lat, pmode, _ok = sc
            if pmode:
                perf_mode[i] = pmode
            tr = pre + eng
            t0 = eng_free.get(tr, 0.0)
            prev_free = t0
            why = None
            pr = eng_last.get(tr, -1)
            if t_dep > t0:
                t0, why, pr = t_dep, d_reason, d_pred
            ports = None
            if port_vg and (eng == "vector" or eng == "gpsimd"):
                ports = [pre + "port:sbuf_vg"]
            if port_vs and (eng == "vector" or eng == "scalar"):
                for o in rec.operands:
                    if o.buffer == "psum":
                        ports = (ports or []) + [pre + "port:psum_vs"]
                        break
            if ports:
                for pk in ports:
                    pf = port_free.get(pk, 0.0)
                    if pf > t0:
                        t0, why, pr = pf, "port", eng_last.get(pk, -1)
            st = t0
            en = t0 + o_cost
            if ports:
                for pk in ports:
                    port_free[pk] = en
                    eng_last[pk] = i
            weng_out = eng
        eng_free[tr] = en
        eng_last[tr] = i
        start[i] = st
        end[i] = en
        occ_a[i] = o_cost
        w = st - prev_free
        if w > 0:
            wait[i] = w
            reason[i] = why
        pred[i] = pr
        track[i] = tr
        if en > global_end:
            global_end, global_last = en, i
        # ---- update byte-range tables ------------------------------------------------
        for ents, pitch, r0, r1, c0, c1, isr, isw, hits, a in acc:
            if isw:
                if hits:
                    # entries the write fully covers are dead: mark them, compact the list now and then
                    for e in hits:
                        if e[0] == pitch and r0 <= e[1] and e[2] <= r1 and c0 <= e[3] and e[4] <= c1:
                            e[0] = _DEAD
                            e[1] = e[2] = 0
                    if len(hits) == len(ents) and hits[-1][0] == _DEAD and all(e[0] == _DEAD for e in hits):
                        ents.clear()
                    elif len(ents) >= 32 and len(ents) >= compact_at.get(id(ents), 32):
                        ents[:] = [e for e in ents if e[0] != _DEAD]
                        compact_at[id(ents)] = max(32, 2 * len(ents))
                ents.append([pitch, r0, r1, c0, c1, en, lat, weng_out, i, (en if isr else 0.0), (i if isr else -1), a])
            elif hits:
                for e in hits:
                    if en > e[9]:
                        e[9] = en
                        e[10] = i
            else:
                ents.append([pitch, r0, r1, c0, c1, 0.0, 0.0, "", -1, en, i, a])
        for a in onchip_allocs:
            le = last_end.get(a)
            if le is None or en > le[0]:
                last_end[a] = (en, i)
    return Schedule(trace=trace, params=p, policy=pol, cores=cores, track=track, start=start, end=end, occ=occ_a,
                    wait=wait, reason=reason, pred=pred, dma=dma_plans, dma_slot=dma_slot,
                    issue_busy=issue_busy, perf_mode=perf_mode, unmodelled=unmodelled, rotation=rot)
