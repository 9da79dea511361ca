"""Profiler metrics from a schedule, under the Neuron Explorer ``Summary`` names and definitions.

Definitions follow the Explorer profile-schema reference (research note perf-model.md §1.2):
``total_time``, ``<engine>_active_time(_percent)`` (busy, semaphore waits excluded),
``<engine>_instruction_time/count``, ``hardware_flops`` (Σ 2·rows·cols·elements of Tensor-engine
instructions, transposes included), ``adjusted_hardware_flops`` (FP32 ×4, FP8 per generation),
``mfu/hfu_estimated_percent`` (against the peak of the dtype used: adjusted FLOPs over the BF16 peak
2·128²·f_PE; ``*_bf16_peak_percent`` against the BF16 peak alone), ``mm_arithmetic_intensity``,
``peak_flops_bandwidth_ratio``, ``mbu_estimated_percent`` (per-stack HBM bandwidth), DMA and
memory traffic. Beyond the profiler: stall breakdown by reason, critical path, roofline
lower bound and a bottleneck class.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from nkieval.perf.costs import matmul_flops, pe_peak_flops_per_ns
from nkieval.perf.dma import effective_bw
from nkieval.perf.schedule import COMPUTE_ENGINES, Schedule
from nkieval.perf.spill import SPILL_OPCODES, SPILL_SITE, SpillEstimate

# Classification thresholds (research note §1.3 / §5.8, Neuron performance guide).
ENGINE_BOUND_ACTIVE = 0.5  # below this on every engine and DMA: overhead/latency-bound
# the busiest engine idle this share of the total time waiting on transfers is bound by them (assumed: a tenth
# of the time is a cost worth naming ahead of the engine's own work)
WAIT_BOUND_SHARE = 0.1


@dataclass(frozen=True)
class Bottleneck:
    resource: str  # "dma" | "spill" | "tensor" | "vector" | "scalar" | "gpsimd" | "sync" | "overhead"
    bound: str  # "memory" | "compute" | "overhead"
    utilization: dict[str, float]  # resource -> active fraction of total_time
    reason: str


def _base_engine(track: str) -> str:
    t = track.split("/", 1)[-1]
    return "dma" if t.startswith("dma:") else t


def _seq_sum(x: np.ndarray) -> float | int:
    """``x[0] + x[1] + ...`` added left to right (as a Python loop would; 0 for none)."""
    return float(np.cumsum(x)[-1]) if len(x) else 0


def _union_length(st: np.ndarray, en: np.ndarray) -> float:
    """Total length of the union of the intervals ``(st[k], en[k])``, with the same float operations as the
    plain sorted-merge loop (``merged_length`` in tests/perf/metrics_reference.py, which the tests compare)."""
    n = len(st)
    if not n:
        return 0.0
    order = np.lexsort((en, st))
    st = st[order]
    run = np.maximum.accumulate(en[order])  # the end of the merged interval so far
    brk = np.flatnonzero(st[1:] > run[:-1]) + 1  # where a new merged interval begins
    first = np.concatenate(([0], brk))
    last = np.concatenate((brk - 1, [n - 1]))
    return _seq_sum(run[last] - st[first]) + 0.0


def _groups(key: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """(key, positions in increasing order) per distinct key, keys in order of first occurrence."""
    if not len(key):
        return []
    order = np.argsort(key, kind="stable")
    ks = key[order]
    cut = np.flatnonzero(ks[1:] != ks[:-1]) + 1
    parts = np.split(order, cut)
    parts.sort(key=lambda ix: ix[0])
    return [(int(key[ix[0]]), ix) for ix in parts]


def _f64(a: Any) -> np.ndarray:
    return np.frombuffer(a, dtype=np.float64) if len(a) else np.zeros(0)


def spill_metrics(s: Schedule) -> dict[str, int]:
    """The spill estimate's figures (zeros when the SBUF peak is within the usable SBUF)."""
    usable = int(s.params.sbuf_usable_bytes_per_partition)
    spill = s.spill or SpillEstimate(usable)
    return {"spill_save_bytes": spill.save_bytes, "spill_reload_bytes": spill.reload_bytes,
            "spill_refill_bytes": spill.refill_bytes,
            "spill_evictions": spill.evictions, "spill_overfull_instructions": spill.overfull_instructions,
            "sbuf_usable_bytes_per_partition": usable}


def compute_metrics(s: Schedule) -> dict[str, Any]:
    """Every metric of the estimate, as a flat dict (Explorer names) plus tables.

    Per-record quantities that depend only on the record's cost signature (opcode, FLOPs, bytes per
    memory) are worked out once per signature (``Schedule.signature``); sums of floats are formed in
    record order, as a loop over the records would.
    """
    p = s.params
    recs = s.trace.records
    n = len(recs)
    total = s.total_time
    tsec = total * 1e-9
    cores = s.cores
    start, end, occ, track = _f64(s.start), _f64(s.end), _f64(s.occ), s.track
    # tracks and their engines, in order of first use
    tracks = list(dict.fromkeys(track))
    t_ix = {t: k for k, t in enumerate(tracks)}
    tid = np.fromiter(map(t_ix.__getitem__, track), np.int64, n)
    engines = list(dict.fromkeys(_base_engine(t) for t in tracks))
    e_ix = {e: k for k, e in enumerate(engines)}
    eid = np.array([e_ix[_base_engine(t)] for t in tracks], np.int64)[tid] if n else np.zeros(0, np.int64)
    dma_e = e_ix.get("dma", -1)
    is_dma = eid == dma_e
    # cost signatures: per signature, its opcode and what its records add to the totals
    sig = np.frombuffer(s.signature, dtype=np.int64) if len(s.signature) == n and n else np.arange(n)
    present = np.zeros(n, bool)
    present[sig] = True
    reps = np.flatnonzero(present)
    remap = np.zeros(n, np.int64)
    remap[reps] = np.arange(len(reps))
    sid = remap[sig]
    opcodes: dict[str, int] = {}
    op_of_sig = []
    flops_of_sig = []  # (raw, adjusted, is_transpose) of a Tensor-engine record
    bytes_of_sig = []  # (psum read, psum write, sbuf read, sbuf write, psum->sbuf) of a compute record
    hbm_of_sig: list[list[tuple[int, bool, int]]] = []  # HBM operands of a DMA record: (position, write, bytes)
    for r in reps.tolist():
        rec = recs[r]
        op_of_sig.append(opcodes.setdefault(rec.opcode, len(opcodes)))
        flops_of_sig.append(matmul_flops(rec, p) if engines[eid[r]] == "tensor" else (0.0, 0.0, False))
        pr = pw = sr = sw = 0
        for o in rec.operands:
            if o.buffer == "psum":
                if "r" in o.mode:
                    pr += o.nbytes
                if "w" in o.mode:
                    pw += o.nbytes
            elif o.buffer == "sbuf":
                if "r" in o.mode:
                    sr += o.nbytes
                if "w" in o.mode:
                    sw += o.nbytes
        reads_psum = any(o.buffer == "psum" and "r" in o.mode for o in rec.operands)
        writes_sbuf = any(o.buffer == "sbuf" and "w" in o.mode for o in rec.operands)
        p2s = (sum(o.nbytes for o in rec.operands if o.buffer == "sbuf" and "w" in o.mode)
               if reads_psum and writes_sbuf else 0)
        bytes_of_sig.append((pr, pw, sr, sw, p2s))
        hbm_of_sig.append([(j, "w" in o.mode, o.nbytes) for j, o in enumerate(rec.operands) if o.buffer == "hbm"])
    n_ops = len(opcodes)
    op_names = list(opcodes)
    pair = eid * n_ops + np.asarray(op_of_sig, np.int64)[sid] if n else np.zeros(0, np.int64)
    # (engine, opcode): instruction count and time (DMA: end - start), active time of compute opcodes
    op_count: Counter = Counter()
    op_time: Counter = Counter()
    op_active: dict[tuple[str, str], float] = {}
    comp_end = start + occ
    for k, ix in _groups(pair):
        key = (engines[k // n_ops], op_names[k % n_ops])
        op_count[key] = len(ix)
        if k // n_ops == dma_e:
            op_time[key] = _seq_sum(end[ix] - start[ix])
        else:
            op_time[key] = _seq_sum(occ[ix])
            op_active[key] = _union_length(start[ix], comp_end[ix])
    instr_count: Counter = Counter()
    instr_time: Counter = Counter()
    for k, ix in _groups(eid):
        instr_count[engines[k]] = len(ix)
        if k != dma_e:
            instr_time[engines[k]] = _seq_sum(occ[ix])
    for tr, t in s.issue_busy.items():
        instr_time[_base_engine(tr)] += t
    # busy time per compute track (order of first use)
    busy_len: dict[str, float] = {}
    comp = ~is_dma
    for k, ix in _groups(tid[comp]):
        ix = np.flatnonzero(comp)[ix]
        busy_len[tracks[k]] = _union_length(start[ix], comp_end[ix])
    # FLOPs of Tensor-engine records, bytes of compute records, DMA plans (per signature x records)
    hw_flops = adj_flops = tr_flops = adj_tr_flops = 0.0
    if "tensor" in e_ix:
        ts = sid[eid == e_ix["tensor"]]
        fl = np.array(flops_of_sig, dtype=np.float64).reshape(-1, 3)
        raw, adj, is_t = fl[ts, 0], fl[ts, 1], fl[ts, 2] != 0
        hw_flops = 0.0 + _seq_sum(raw)
        adj_flops = 0.0 + _seq_sum(adj)
        tr_flops = 0.0 + _seq_sum(raw[is_t])
        adj_tr_flops = 0.0 + _seq_sum(adj[is_t])
    per_sig_comp = np.bincount(sid[comp], minlength=len(reps)).tolist()
    psum_r = psum_w = sbuf_r = sbuf_w = psum_to_sbuf = 0
    for c, (pr, pw, sr, sw, p2s) in zip(per_sig_comp, bytes_of_sig):
        if c:
            psum_r += c * pr
            psum_w += c * pw
            sbuf_r += c * sr
            sbuf_w += c * sw
            psum_to_sbuf += c * p2s
    dma_ix = np.flatnonzero(is_dma)
    per_sig_dma = np.bincount(sid[dma_ix], minlength=len(reps)).tolist()
    hbm_r = hbm_w = dma_bytes = dma_desc = hbm_to_hbm = 0
    for c, r in zip(per_sig_dma, reps.tolist()):
        if c:
            pl = s.dma[r]
            dma_bytes += c * pl.bytes
            hbm_to_hbm += c * min(pl.hbm_read, pl.hbm_write)  # bytes read and written in HBM by one transfer
            dma_desc += c * pl.descriptors
            hbm_r += c * pl.hbm_read
            hbm_w += c * pl.hbm_write
            sbuf_r += c * pl.sbuf_read
            sbuf_w += c * pl.sbuf_write
    hbm_touch_r: dict[int, int] = {}
    hbm_touch_w: dict[int, int] = {}
    for i, k in zip(dma_ix.tolist(), sid[dma_ix].tolist()):
        hl = hbm_of_sig[k]
        if hl:
            ops = recs[i].operands
            for j, w, nb in hl:
                d = hbm_touch_w if w else hbm_touch_r
                a = ops[j].alloc
                d[a] = d.get(a, 0) + nb
    perf_modes = Counter(s.perf_mode.values())
    m: dict[str, Any] = {}
    m["total_time"] = tsec
    m["total_time_ns"] = total
    m["neuroncore_cycle_count"] = round(total * p.base_clock_ghz)
    act = _union_length(start, np.where(is_dma, end, comp_end))
    m["total_active_time"] = act * 1e-9
    m["total_active_time_percent"] = 100.0 * act / total if total else 0.0
    util: dict[str, float] = {}
    for eng in COMPUTE_ENGINES:
        b = sum(v for tr, v in busy_len.items() if _base_engine(tr) == eng)
        b += sum(t for tr, t in s.issue_busy.items() if _base_engine(tr) == eng)
        frac = b / (total * cores) if total else 0.0
        util[eng] = frac
        m[f"{eng}_active_time"] = b / cores * 1e-9
        m[f"{eng}_active_time_percent"] = 100.0 * frac
        m[f"{eng}_instruction_time"] = instr_time[eng] * 1e-9
        m[f"{eng}_instruction_count"] = instr_count[eng]
    dma_active = _union_length(start[dma_ix], end[dma_ix])
    util["dma"] = dma_active / total if total else 0.0
    # Trn2/Trn3 dI/dt throttling: Tensor-engine time beyond the full-rate occupancy (part of its active time;
    # Explorer's TensorE "throttled" share)
    thr = sum(s.throttled.values())
    m["tensor_throttled_time"] = thr / cores * 1e-9
    m["tensor_throttled_time_percent"] = 100.0 * thr / (total * cores) if total else 0.0
    m["matmul_instruction_count"] = op_count[("tensor", "nc_matmul")] + op_count[("tensor", "nc_matmul_mx")]
    m["activate_instruction_count"] = sum(c for (e, o), c in op_count.items() if o.startswith("activation"))
    m["activate_instruction_time"] = sum(t for (e, o), t in op_time.items() if o.startswith("activation")) * 1e-9
    # FLOPs
    peak = pe_peak_flops_per_ns(p)  # FLOP/ns
    denom = peak * total * cores if total else 0.0
    model_flops = hw_flops - tr_flops
    m["hardware_flops"] = hw_flops
    m["transpose_flops"] = tr_flops
    m["model_flops"] = model_flops
    m["adjusted_hardware_flops"] = adj_flops
    # HFU/MFU against the peak of the dtype each instruction used: adjusted FLOPs are BF16-equivalent (a dtype's
    # FLOPs x BF16 peak / its own peak: FP32 x4, FP8 x0.5 on Trn2+), so over the BF16 peak they divide each
    # dtype's work by its own peak. The *_bf16_peak_percent figures divide everything by the BF16 peak.
    m["mfu_estimated_percent"] = 100.0 * (adj_flops - adj_tr_flops) / denom if denom else 0.0
    m["hfu_estimated_percent"] = 100.0 * adj_flops / denom if denom else 0.0
    m["mfu_bf16_peak_percent"] = 100.0 * model_flops / denom if denom else 0.0
    m["hfu_bf16_peak_percent"] = 100.0 * hw_flops / denom if denom else 0.0
    m["pe_utilization_adjusted_percent"] = 100.0 * adj_flops / denom if denom else 0.0
    hbm = hbm_r + hbm_w
    m["hbm_read_bytes"] = hbm_r
    m["hbm_write_bytes"] = hbm_w
    m["mm_arithmetic_intensity"] = model_flops / hbm if hbm else 0.0
    ratio = peak / p.hbm_stack_bw_bytes_per_ns
    m["peak_flops_bandwidth_ratio"] = ratio
    m["mfu_max_achievable_estimated_percent"] = min(100.0, 100.0 * (model_flops / hbm) / ratio) if hbm else 100.0
    m["mbu_estimated_percent"] = 100.0 * hbm / (total * p.hbm_stack_bw_bytes_per_ns) if total else 0.0
    agg_bw = effective_bw(p) * int(p.dma_engines)
    m["dma_bandwidth_utilization_percent"] = 100.0 * dma_bytes / (total * agg_bw * cores) if total else 0.0
    m["dma_active_time"] = dma_active * 1e-9
    m["dma_active_time_percent"] = 100.0 * util["dma"]
    spill_ops = np.array([opcodes[o] for o in ("spill_save", "spill_reload") if o in opcodes], np.int64)
    spill_ix = dma_ix[np.isin(np.array(op_of_sig, np.int64)[sid[dma_ix]], spill_ops)] if len(spill_ops) else dma_ix[:0]
    spill_active = _union_length(start[spill_ix], end[spill_ix])
    m["spill_dma_active_time_percent"] = 100.0 * spill_active / total if total else 0.0
    m["dma_packet_time"] = sum(pl.service_ns * pl.engines for pl in s.dma.values()) * 1e-9
    n_dma = len(dma_ix)
    m["dma_transfer_count"] = n_dma
    m["dma_transfer_total_bytes"] = dma_bytes
    m["dma_transfer_average_bytes"] = dma_bytes / n_dma if n_dma else 0.0
    m["dma_descriptor_count"] = dma_desc
    m["dma_descriptor_average_bytes"] = dma_bytes / dma_desc if dma_desc else 0.0
    m["dma_achieved_bandwidth_bytes_per_s"] = dma_bytes / tsec if tsec else 0.0
    m["sbuf_read_bytes"] = sbuf_r
    m["sbuf_write_bytes"] = sbuf_w
    m["psum_read_bytes"] = psum_r
    m["psum_write_bytes"] = psum_w
    m["psum_read_sbuf_write_bytes"] = psum_to_sbuf
    rot = s.rotation
    m.update(spill_metrics(s))
    m["sbuf_peak_bytes_per_partition"] = s.trace.peak_sbuf_bytes
    m["sbuf_peak_percent"] = 100.0 * s.trace.peak_sbuf_bytes / p.sbuf_usable_bytes_per_partition
    m["psum_peak_bytes_per_partition"] = s.trace.peak_psum_bytes
    m["psum_peak_percent"] = 100.0 * s.trace.peak_psum_bytes / p.psum_bytes_per_partition
    if rot:
        m["sbuf_modelled_bytes_per_partition"] = rot.demand_bytes.get("sbuf", 0)
        m["psum_modelled_bytes_per_partition"] = rot.demand_bytes.get("psum", 0)
    m["vector_perf_mode_counts"] = dict(perf_modes)
    # roofline: FLOPs at peak vs compulsory HBM bytes at the core's HBM bandwidth and at the achievable DMA
    # bandwidth (a DMA engine moves an HBM->HBM byte once, reading and writing it in HBM)
    sizes = {a.id: a.bytes_per_partition for a in s.trace.allocations.values() if a.buffer == "hbm"}
    if s.spill:  # the spill areas are not the kernel's data
        for a in [a for a in s.trace.allocations.values() if a.site == SPILL_SITE]:
            hbm_touch_r.pop(a.id, None)
            hbm_touch_w.pop(a.id, None)
    comp_r = sum(min(b, sizes.get(a, b)) for a, b in hbm_touch_r.items())
    comp_w = sum(min(b, sizes.get(a, b)) for a, b in hbm_touch_w.items())
    t_flops = adj_flops / (peak * cores) if peak else 0.0
    moved = comp_r + comp_w - min(hbm_to_hbm, comp_r, comp_w)  # the least the DMA engines must move
    t_bytes = max((comp_r + comp_w) / (p.hbm_core_bw_bytes_per_ns * cores), moved / (agg_bw * cores))
    roof = max(t_flops, t_bytes)
    m["compulsory_hbm_bytes"] = comp_r + comp_w
    # Explorer memory panel: bytes read again after a tensor's first full read (reloads), useful read share,
    # and TensorInfo.load_to_sbuf_repeat_factor (the largest per-tensor read/size ratio)
    touched_r = sum(hbm_touch_r.values())
    m["hbm_reload_bytes"] = touched_r - comp_r
    m["useful_read_percent"] = 100.0 * comp_r / touched_r if touched_r else 100.0
    m["load_repeat_factor_max"] = max((b / sizes[a] for a, b in hbm_touch_r.items() if sizes.get(a)), default=0.0)
    m["roofline_compute_ns"] = t_flops
    m["roofline_memory_ns"] = t_bytes
    m["roofline_lower_bound_ns"] = roof
    m["percent_of_roofline"] = 100.0 * roof / total if total else 0.0
    # tables
    m["opcode_summary"] = [
        {"engine": e, "opcode": o, "instruction_count": c, "instruction_time_ns": op_time[(e, o)],
         "active_time_ns": op_active[(e, o)] if e != "dma" else op_time[(e, o)]}
        for (e, o), c in sorted(op_count.items(), key=lambda kv: -op_time[kv[0]])
    ]
    m["utilization"] = util
    return m


def stall_breakdown(s: Schedule) -> dict[str, dict[str, float]]:
    """Per track: busy ns, and idle ns before each instruction grouped by what it waited on."""
    track, reason, wait = s.track, s.reason, s.wait
    n = len(track)
    tracks = list(dict.fromkeys(track))
    t_ix = {t: k for k, t in enumerate(tracks)}
    occ = _f64(s.occ)
    waiting = _f64(wait) > 0
    labels: dict[str | None, str] = {}
    out: dict[str, dict[str, float]] = {}
    recs, pred = s.trace.records, s.pred
    spilled = s.spill is not None and s.policy.spill_traffic != "off"
    for k, ix in _groups(np.fromiter(map(t_ix.__getitem__, track), np.int64, n)):
        d = out[tracks[k]] = {"busy": 0.0 + _seq_sum(occ[ix])}
        for i in ix[waiting[ix]].tolist():
            r = reason[i]
            if spilled and r is not None and r.startswith("dep:") and pred[i] >= 0 \
                    and recs[pred[i]].opcode in SPILL_OPCODES:
                lbl = "waiting_on_spill"
            else:
                lbl = labels.get(r)
                if lbl is None:
                    lbl = labels[r] = _reason_label(r)
            d[lbl] = d.get(lbl, 0.0) + wait[i]
    return out


def _reason_label(r: str | None) -> str:
    if r is None:
        return "in_order"
    if r == "dep:dma":
        return "waiting_on_dma"
    if r.startswith("dep:"):
        return "waiting_on_" + r[4:]
    return {"war": "buffer_reuse_war", "capacity": "buffer_rotation_capacity", "port": "shared_port",
            "dma_engines": "dma_engines_busy", "program_order": "program_order"}.get(r, r.replace(":", "_"))


def critical_path(s: Schedule) -> dict[str, Any]:
    """Walk back from the last-finishing record along the constraints that set each start."""
    n = len(s)
    if not n:
        return {"length": 0, "share": {}, "records": []}
    start, end, pred, track = s.start, s.end, s.pred, s.track
    i = int(np.argmax(_f64(end)))  # the first of the latest-ending records
    total = end[i]
    share: Counter = Counter()
    path: list[int] = []
    seen = set()
    base: dict[str, str] = {}
    while i >= 0 and i not in seen:
        seen.add(i)
        path.append(i)
        tr = track[i]
        eng = base.get(tr)
        if eng is None:
            eng = base[tr] = _base_engine(tr)
        st = start[i]
        share[eng] += end[i] - st
        j = pred[i]
        if j >= 0:
            gap = st - end[j]
            if gap > 0:
                share["latency"] += gap
        else:
            if st > 0:
                share["latency"] += st
        i = j
    path.reverse()
    return {"length": len(path), "share": {k: v / total for k, v in share.items()} if total else {},
            "records": path}


def classify(util: dict[str, float], stalls: dict[str, dict[str, float]] | None = None,
             total_ns: float = 0.0, spill_dma_share: float = 0.0) -> Bottleneck:
    """The busiest resource decides; below 50 % everywhere the kernel is overhead/latency-bound.

    Spill and memory waits are named: the kernel is spill-bound (memory) when the DMAs are the busiest resource and
    spill transfers take at least half of their active time (``spill_dma_share``, a fraction of total_time), or when
    the busiest compute engine sits idle waiting on spill transfers for at least :data:`WAIT_BOUND_SHARE` of the
    total time, whatever its own activity; it is DMA-bound when that engine waits on the kernel's own DMAs
    longer than it computes (and that long)."""
    res = max(util, key=lambda k: util[k])
    top = util[res]
    if res == "dma" and top > 0 and spill_dma_share >= 0.5 * top:
        return Bottleneck("spill", "memory", dict(util),
                          f"dma active {top:.0%} of total_time, spill transfers {spill_dma_share:.0%}")
    waits = _engine_waits(stalls, res) if stalls and res != "dma" and total_ns > 0 else {}
    spill_wait = waits.get("waiting_on_spill", 0.0)
    dma_wait = waits.get("waiting_on_dma", 0.0)
    if spill_wait >= WAIT_BOUND_SHARE * total_ns > 0:
        return Bottleneck("spill", "memory", dict(util),
                          f"{res} (busiest, active {top:.0%}) waits {spill_wait / 1e3:.4g} us "
                          f"({spill_wait / total_ns:.0%} of total_time) on SBUF spill transfers")
    if dma_wait > waits.get("busy", 0.0) and dma_wait >= WAIT_BOUND_SHARE * total_ns > 0:
        return Bottleneck("dma", "memory", dict(util),
                          f"{res} (busiest, active {top:.0%}) waits {dma_wait / 1e3:.4g} us "
                          f"({dma_wait / total_ns:.0%} of total_time) on DMA transfers, longer than it computes")
    if top < ENGINE_BOUND_ACTIVE:
        return Bottleneck("overhead", "overhead", dict(util),
                          f"no engine or DMA is active more than {ENGINE_BOUND_ACTIVE:.0%} of the time "
                          f"(busiest: {res} {top:.0%}): latency, dependencies or fixed costs dominate")
    bound = "memory" if res == "dma" else "compute"
    return Bottleneck(res, bound, dict(util), f"{res} active {top:.0%} of total_time")


def _engine_waits(stalls: dict[str, dict[str, float]], engine: str) -> dict[str, float]:
    """An engine's busy time and waits by reason, summed over its tracks (one per LNC program), in ns."""
    out: dict[str, float] = {}
    for tr, d in stalls.items():
        if _base_engine(tr) == engine:
            for k, v in d.items():
                out[k] = out.get(k, 0.0) + v
    return out
