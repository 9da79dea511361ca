"""The straightforward per-record metrics of nkieval.perf.metrics before its per-signature, vectorised
version: the oracle the tests hold compute_metrics, stall_breakdown and critical_path to, bit for bit."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from nkieval.perf.costs import matmul_flops, pe_peak_flops_per_ns
from nkieval.perf.dma import effective_bw
from nkieval.perf.metrics import spill_metrics
from nkieval.perf.schedule import COMPUTE_ENGINES, Schedule
from nkieval.perf.spill import SPILL_SITE


def merged_length(intervals: list[tuple[float, float]]) -> float:
    """Total length of the union of intervals."""
    if not intervals:
        return 0.0
    intervals = sorted(intervals)
    total = 0.0
    cs, ce = intervals[0]
    for s, e in intervals[1:]:
        if s > ce:
            total += ce - cs
            cs, ce = s, e
        elif e > ce:
            ce = e
    return total + (ce - cs)


def _base_engine(track: str) -> str:
    t = track.split("/", 1)[-1]
    return "dma" if t.startswith("dma:") else t


def compute_metrics(s: Schedule) -> dict[str, Any]:
    """Every metric of the estimate, as a flat dict (Explorer names) plus tables."""
    p = s.params
    recs = s.trace.records
    n = len(recs)
    total = s.total_time
    tsec = total * 1e-9
    cores = s.cores
    busy: dict[str, list[tuple[float, float]]] = defaultdict(list)
    instr_time: Counter = Counter()
    instr_count: Counter = Counter()
    op_count: Counter = Counter()
    op_time: Counter = Counter()
    op_busy: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    hw_flops = adj_flops = tr_flops = adj_tr_flops = 0.0
    hbm_r = hbm_w = sbuf_r = sbuf_w = psum_r = psum_w = psum_to_sbuf = 0
    dma_bytes = dma_desc = hbm_to_hbm = 0
    dma_intervals: list[tuple[float, float]] = []
    spill_intervals: list[tuple[float, float]] = []
    perf_modes: Counter = Counter()
    hbm_touch_r: Counter = Counter()
    hbm_touch_w: Counter = Counter()
    start, end, occ, track = s.start, s.end, s.occ, s.track
    for i in range(n):
        rec = recs[i]
        eng = _base_engine(track[i])
        st, en = start[i], end[i]
        op_count[(eng, rec.opcode)] += 1
        instr_count[eng] += 1
        if eng == "dma":
            pl = s.dma[i]
            dma_intervals.append((st, en))
            if rec.opcode in ("spill_save", "spill_reload"):
                spill_intervals.append((st, en))
            dma_bytes += pl.bytes
            hbm_to_hbm += min(pl.hbm_read, pl.hbm_write)
            dma_desc += pl.descriptors
            hbm_r += pl.hbm_read
            hbm_w += pl.hbm_write
            sbuf_r += pl.sbuf_read
            sbuf_w += pl.sbuf_write
            op_time[(eng, rec.opcode)] += en - st
            for o in rec.operands:
                if o.buffer == "hbm":
                    (hbm_touch_w if "w" in o.mode else hbm_touch_r)[o.alloc] += o.nbytes
            continue
        d = occ[i]
        busy[track[i]].append((st, st + d))
        instr_time[eng] += d
        op_time[(eng, rec.opcode)] += d
        op_busy[(eng, rec.opcode)].append((st, st + d))
        if i in s.perf_mode:
            perf_modes[s.perf_mode[i]] += 1
        if eng == "tensor":
            raw, adj, is_t = matmul_flops(rec, p)
            hw_flops += raw
            adj_flops += adj
            if is_t:
                tr_flops += raw
                adj_tr_flops += adj
        reads_psum = False
        writes_sbuf = False
        for o in rec.operands:
            if o.buffer == "psum":
                if "r" in o.mode:
                    psum_r += o.nbytes
                    reads_psum = True
                if "w" in o.mode:
                    psum_w += o.nbytes
            elif o.buffer == "sbuf":
                if "r" in o.mode:
                    sbuf_r += o.nbytes
                if "w" in o.mode:
                    sbuf_w += o.nbytes
                    writes_sbuf = True
        if reads_psum and writes_sbuf:
            psum_to_sbuf += sum(o.nbytes for o in rec.operands if o.buffer == "sbuf" and "w" in o.mode)
    for tr, t in s.issue_busy.items():
        instr_time[_base_engine(tr)] += t
    m: dict[str, Any] = {}
    m["total_time"] = tsec
    m["total_time_ns"] = total
    m["neuroncore_cycle_count"] = round(total * p.base_clock_ghz)
    all_busy = [iv for ivs in busy.values() for iv in ivs] + dma_intervals
    act = merged_length(all_busy)
    m["total_active_time"] = act * 1e-9
    m["total_active_time_percent"] = 100.0 * act / total if total else 0.0
    util: dict[str, float] = {}
    for eng in COMPUTE_ENGINES:
        b = sum(merged_length(ivs) for tr, ivs in busy.items() if _base_engine(tr) == eng)
        b += sum(t for tr, t in s.issue_busy.items() if _base_engine(tr) == eng)
        frac = b / (total * cores) if total else 0.0
        util[eng] = frac
        m[f"{eng}_active_time"] = b / cores * 1e-9
        m[f"{eng}_active_time_percent"] = 100.0 * frac
        m[f"{eng}_instruction_time"] = instr_time[eng] * 1e-9
        m[f"{eng}_instruction_count"] = instr_count[eng]
    dma_active = merged_length(dma_intervals)
    util["dma"] = dma_active / total if total else 0.0
    thr = sum(s.throttled.get(i, 0.0) for i in range(len(s)))  # per record, as the profiler's per-instruction rows
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
    m["spill_dma_active_time_percent"] = 100.0 * merged_length(spill_intervals) / total if total else 0.0
    m["dma_packet_time"] = sum(pl.service_ns * pl.engines for pl in s.dma.values()) * 1e-9
    n_dma = len(dma_intervals)
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
    m.update(spill_metrics(s))  # figures of the spill estimate, not a per-record shortcut
    m["sbuf_peak_bytes_per_partition"] = s.trace.peak_sbuf_bytes
    m["sbuf_peak_percent"] = 100.0 * s.trace.peak_sbuf_bytes / p.sbuf_usable_bytes_per_partition
    m["psum_peak_bytes_per_partition"] = s.trace.peak_psum_bytes
    m["psum_peak_percent"] = 100.0 * s.trace.peak_psum_bytes / p.psum_bytes_per_partition
    if rot:
        m["sbuf_modelled_bytes_per_partition"] = rot.demand_bytes.get("sbuf", 0)
        m["psum_modelled_bytes_per_partition"] = rot.demand_bytes.get("psum", 0)
    m["vector_perf_mode_counts"] = dict(perf_modes)
    # roofline: FLOPs at peak vs compulsory HBM bytes at the HBM and at the DMA bandwidth (HBM->HBM moved once)
    sizes = {a.id: a.bytes_per_partition for a in s.trace.allocations.values() if a.buffer == "hbm"}
    if s.spill:  # the spill areas are not the kernel's data
        for a in [a for a in s.trace.allocations.values() if a.site == SPILL_SITE]:
            hbm_touch_r.pop(a.id, None)
            hbm_touch_w.pop(a.id, None)
    comp_r = sum(min(b, sizes.get(a, b)) for a, b in hbm_touch_r.items())
    comp_w = sum(min(b, sizes.get(a, b)) for a, b in hbm_touch_w.items())
    t_flops = adj_flops / (peak * cores) if peak else 0.0
    moved = comp_r + comp_w - min(hbm_to_hbm, comp_r, comp_w)
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
         "active_time_ns": merged_length(op_busy[(e, o)]) if e != "dma" else op_time[(e, o)]}
        for (e, o), c in sorted(op_count.items(), key=lambda kv: -op_time[kv[0]])
    ]
    m["utilization"] = util
    return m


def stall_breakdown(s: Schedule) -> dict[str, dict[str, float]]:
    """Per track: busy ns, and idle ns before each instruction grouped by what it waited on."""
    out: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for i in range(len(s)):
        tr = s.track[i]
        d = out[tr]
        d["busy"] += s.occ[i]
        w = s.wait[i]
        if w > 0:
            p = s.pred[i]
            on_spill = s.reason[i] == "dep:dma" and p >= 0 and s.trace.records[p].opcode.startswith("spill_")
            d["waiting_on_spill" if on_spill else _reason_label(s.reason[i])] += w
    return {k: dict(v) for k, v in out.items()}


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
    i = max(range(n), key=lambda k: s.end[k])
    total = s.end[i]
    share: Counter = Counter()
    path: list[int] = []
    seen = set()
    while i >= 0 and i not in seen:
        seen.add(i)
        path.append(i)
        share[_base_engine(s.track[i])] += s.end[i] - s.start[i]
        j = s.pred[i]
        if j >= 0:
            gap = s.start[i] - s.end[j]
            if gap > 0:
                share["latency"] += gap
        else:
            if s.start[i] > 0:
                share["latency"] += s.start[i]
        i = j
    path.reverse()
    return {"length": len(path), "share": {k: v / total for k, v in share.items()} if total else {},
            "records": path}
