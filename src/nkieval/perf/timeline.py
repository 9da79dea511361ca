"""Timeline export (Chrome / Perfetto trace-event JSON) and the compact text summary of an estimate.

The JSON uses the trace-event format's complete events (``ph: "X"``, ``ts``/``dur`` in µs):
one process per NeuronCore, one thread (track) per compute engine and per DMA queue, and
optionally one per DMA engine. Each slice carries its kernel source line
(``nki_source_location``), the idle gap before it and what it waited on, so a reviewer can
follow the profiler's "first instruction after the gap" workflow. Load it in
https://ui.perfetto.dev or chrome://tracing.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nkieval.perf.estimate import PerfEstimate

_ORDER = {"tensor": 0, "vector": 1, "scalar": 2, "gpsimd": 3, "sync": 4}


def _track_sort(track: str) -> tuple[int, int, str]:
    core, _, name = track.rpartition("/")
    c = int(core[2:]) if core.startswith("nc") else 0
    if name.startswith("dma:q"):
        return c, 10 + int(name[5:]), name
    return c, _ORDER.get(name, 9), name


def to_perfetto(est: PerfEstimate, *, dma_engines: bool = False) -> dict[str, Any]:
    """The estimate's schedule as a trace-event JSON object (``{"traceEvents": [...], ...}``)."""
    s = est.schedule
    recs = s.trace.records
    tracks = sorted(set(s.track), key=_track_sort)
    tid = {t: k + 1 for k, t in enumerate(tracks)}
    events: list[dict[str, Any]] = []
    for c in range(s.cores):
        events.append({"ph": "M", "name": "process_name", "pid": c,
                       "args": {"name": f"NeuronCore {c} ({est.target}, estimate)"}})
    # a DMA queue track is named after what runs on it: the source lines whose DMAs it carries, or a spill queue
    # (queues are assigned round-robin over the core's 16, so one track can carry several)
    carried: dict[str, dict[str, None]] = {}
    for i, rec in enumerate(recs):
        if rec.engine == "dma":
            q = rec.attrs.get("queue") or (f"{os.path.basename(rec.file)}:{rec.line}" if rec.file else "?")
            carried.setdefault(s.track[i], {})[q] = None
    for t in tracks:
        core, _, name = t.rpartition("/")
        pid = int(core[2:]) if core.startswith("nc") else 0
        if t in carried:
            lab = list(carried[t])
            name = f"{name} ({', '.join(lab[:3])}{f' +{len(lab) - 3} more' if len(lab) > 3 else ''})"
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid[t], "args": {"name": name}})
        events.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid[t],
                       "args": {"sort_index": tid[t]}})
    start, end, wait, reason, track = s.start, s.end, s.wait, s.reason, s.track
    for i, rec in enumerate(recs):
        t = track[i]
        core, _, _ = t.rpartition("/")
        pid = int(core[2:]) if core.startswith("nc") else 0
        st = start[i]
        dur = (s.occ[i] if not t.split("/")[-1].startswith("dma:") else end[i] - st)
        args: dict[str, Any] = {"seq": rec.seq, "nki_source_location": (f"{os.path.basename(rec.file)}:{rec.line}"
                                                                        if rec.file else None)}
        if wait[i] > 0:
            args["wait_ns"] = round(wait[i], 3)
            args["wait_reason"] = reason[i]
        if i in s.perf_mode:
            args["performance_mode"] = s.perf_mode[i]
        if i in s.throttled:
            args["throttled_ns"] = round(s.throttled[i], 1)
        plan = s.dma.get(i)
        if plan is not None:
            args["bytes"] = plan.bytes
            args["descriptors"] = plan.descriptors
            args["bytes_per_partition"] = plan.bytes_per_partition
        events.append({"name": rec.opcode, "cat": t.split("/")[-1].split(":")[0], "ph": "X", "ts": st / 1e3,
                       "dur": dur / 1e3, "pid": pid, "tid": tid[t], "args": args})
    if dma_engines:
        # The DMA engine pool: when each transfer's data moves (after its fixed latency and queueing).
        pool_tid = len(tracks) + 1
        pids = {0}
        for i, slot in s.dma_slot.items():
            core, _, _ = s.track[i].rpartition("/")
            pid = int(core[2:]) if core.startswith("nc") else 0
            if pid not in pids:
                pids.add(pid)
            events.append({"name": recs[i].opcode, "cat": "dma_engines", "ph": "X", "ts": slot / 1e3,
                           "dur": (end[i] - slot) / 1e3, "pid": pid, "tid": pool_tid, "args": {"seq": recs[i].seq}})
        for pid in sorted(pids):
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": pool_tid,
                           "args": {"name": "dma engines (transfers)"}})
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"kernel": est.kernel, "target": est.target, "model_version": est.model_version,
                          "estimate": True, "total_time_ns": est.total_time_ns}}


def write_perfetto(est: PerfEstimate, path: str, *, dma_engines: bool = False) -> str:
    """Write :func:`to_perfetto` to ``path`` (compact JSON); returns the path."""
    with open(path, "w") as fh:
        json.dump(to_perfetto(est, dma_engines=dma_engines), fh, separators=(",", ":"))
    return path


def _fmt_ns(ns: float) -> str:
    if ns >= 1e6:
        return f"{ns / 1e6:.3f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.2f} us"
    return f"{ns:.0f} ns"


def text_summary(est: PerfEstimate) -> str:
    """A compact human-readable report of the estimate."""
    m = est.summary
    lo, hi = est.interval_ns
    b = est.bottleneck
    lines = [
        f"{est.kernel or 'kernel'} on {est.target} [{est.model_version}, mode={est.mode}{', engine order backfill' if est.engine_order == 'backfill' else ''}] (ESTIMATE, not a measurement)",
        f"  total_time      {_fmt_ns(est.total_time_ns)}  (range {_fmt_ns(lo)} .. {_fmt_ns(hi)}; ratios are the "
        "validated quantity)",
        f"  bottleneck      {b.resource} ({b.bound}-bound): {b.reason}",
        f"  roofline bound  {_fmt_ns(m['roofline_lower_bound_ns'])} ({m['percent_of_roofline']:.1f}% of roofline)",
        f"  MFU {m['mfu_estimated_percent']:.1f}%  HFU {m['hfu_estimated_percent']:.1f}%  MBU "
        f"{m['mbu_estimated_percent']:.1f}%  AI {m['mm_arithmetic_intensity']:.1f} FLOP/B "
        f"(ridge {m['peak_flops_bandwidth_ratio']:.1f})",
        "  engine    active%   instr   busy",
    ]
    cores = est.schedule.cores
    if cores > 1:
        lines.append(f"  ({cores} cores: instr summed over the cores; active% and busy per core, their mean)")
    for eng in ("tensor", "vector", "scalar", "gpsimd", "sync"):
        cnt = m[f"{eng}_instruction_count"]
        if cnt or m[f"{eng}_active_time"]:
            lines.append(f"  {eng:<8} {m[f'{eng}_active_time_percent']:7.1f} {cnt:7d}   "
                         f"{_fmt_ns(m[f'{eng}_active_time'] * 1e9)}")
    if m.get("tensor_throttled_time"):
        lines.append(f"  tensor throttled (dI/dt) {_fmt_ns(m['tensor_throttled_time'] * 1e9)} of its active time "
                     f"({m['tensor_throttled_time_percent']:.1f}% of total)")
    lines.append(f"  dma      {m['dma_active_time_percent']:7.1f} {m['dma_transfer_count']:7d}   "
                 f"{m['dma_transfer_total_bytes'] / 1e6:.2f} MB, avg {m['dma_transfer_average_bytes'] / 1024:.1f} KiB, "
                 f"{m['dma_achieved_bandwidth_bytes_per_s'] / 1e9:.1f} GB/s")
    lines.append(f"  HBM read {m['hbm_read_bytes'] / 1e6:.2f} MB, write {m['hbm_write_bytes'] / 1e6:.2f} MB; SBUF peak "
                 f"{m['sbuf_peak_bytes_per_partition']} B/partition, PSUM peak {m['psum_peak_bytes_per_partition']} B")
    usable = m.get("sbuf_usable_bytes_per_partition")
    if m.get("spill_evictions"):
        how = est.schedule.policy.spill_traffic
        lines.append(f"  SBUF spill      {m['spill_save_bytes'] / 1e6:.2f} MB saved, "
                     f"{m['spill_reload_bytes'] / 1e6:.2f} MB reloaded, "
                     + (f"{m['spill_refill_bytes'] / 1e6:.2f} MB refilled by memset, " if m.get("spill_refill_bytes")
                        else "")
                     + f"{m['spill_evictions']} evictions "
                     f"(Belady over usable {usable} B/partition; "
                     + (f"scheduled as DMAs, {how})" if how != "off" else "not in the schedule)"))
    if m.get("spill_overfull_instructions"):
        lines.append(f"  SBUF overfull   {m['spill_overfull_instructions']} instruction(s) whose own SBUF operands "
                     f"exceed the usable {usable} B/partition (no eviction fits them)")
    if m["psum_peak_percent"] > 100.0:
        lines.append(f"  PSUM over       peak {m['psum_peak_bytes_per_partition']} B/partition is "
                     f"{m['psum_peak_percent']:.0f}% of the PSUM: not modelled, scheduled as if it fit (optimistic)")
    if m.get("hbm_reload_bytes"):
        lines.append(f"  HBM reloads     {m['hbm_reload_bytes'] / 1e6:.2f} MB re-read (useful reads "
                     f"{m['useful_read_percent']:.0f}%, a tensor read up to {m['load_repeat_factor_max']:.1f}x)")
    cp = ", ".join(f"{k} {v:.0%}" for k, v in sorted(est.critical_path_share.items(), key=lambda kv: -kv[1])[:5])
    lines.append(f"  critical path   {cp or '(none: the kernel ran no instructions)'}")
    for tr, d in sorted(est.stalls.items()):
        waits = {k: v for k, v in d.items() if k != "busy" and v > 0}
        if waits:
            top = ", ".join(f"{k} {_fmt_ns(v)}" for k, v in sorted(waits.items(), key=lambda kv: -kv[1])[:3])
            lines.append(f"  stalls {tr:<10} {top}")
    un = est.uncertainty.unmodelled_instructions
    if un:
        lines.append("  UNMODELLED (generic cost): " + ", ".join(f"{k} ×{v}" for k, v in un.items()))
    st = est.uncertainty.by_status
    lines.append("  parameters: " + ", ".join(f"{k} {len(v)}" for k, v in st.items()))
    lines.extend(compiler_lines(est))
    return "\n".join(lines)


def compiler_lines(est: PerfEstimate) -> list[str]:
    """The profile's "what the compiler did": per pass, instructions and DMA bytes before -> after."""
    rep = est.compiler
    if rep is None:
        return []
    if not rep.enabled:
        return ["  compiler model  off (the trace as simulated)"]
    lines = [f"  what the compiler did ({est.traced_instructions} traced -> {est.instructions} instructions):"]
    for p in rep.passes:
        if not p.enabled:
            lines.append(f"    {p.name:<17} off")
            continue
        lines.append(f"    {p.name:<17} instr {p.instructions_before} -> {p.instructions_after}, DMA bytes "
                     f"{p.dma_bytes_before} -> {p.dma_bytes_after}" + (f": {'; '.join(p.notes)}" if p.notes else ""))
    return lines
