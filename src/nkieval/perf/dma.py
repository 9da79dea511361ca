"""DMA transfer cost: how one DMA instruction splits over the 16 DMA engines, and how long each takes.

Model (research note perf-model.md §5.6, fitted in benchmarks/perf_fit.py):

* A transfer with P on-chip partitions is spread over ``min(16, P)`` engines, about
  ``P / engines`` partitions each (DMA overview: 8 partitions per engine for 128).
  HBM→HBM transfers split their bytes evenly over the 16 engines.
* Each partition's bytes go as descriptors, one per contiguous run (the smaller of the two
  sides' innermost runs, capped at ``dma_max_descriptor_bytes``).
* An engine's service time is ``t_eng + Σ_desc (bytes + B0) / bw_eng``: a fixed per-transfer cost and: ``B0`` (descriptor
  overhead expressed in bytes) gives the documented efficiency curve (poor below 256 B per
  partition, near peak from 2–4 KiB).
* DMA transposes run at a fraction of the DMA throughput (Trn2: 90 % from HBM, 50 % SBUF→SBUF), with the
  plain copy's descriptors: the transpose engine (NeuronCore-v3 on) reorders whole descriptors. NeuronCore-v2
  has no transpose engine: its transposing DMA (Beta-1 ``load_transpose2d``) moves one element per descriptor.
* The per-engine rate is capped by the core's HBM bandwidth shared by all engines (an HBM→HBM
  transfer counts its bytes twice against it: read and written).

The fixed per-DMA latency (``dma_fixed_ns``) and queueing are applied by the scheduler.
"""

from __future__ import annotations

from dataclasses import dataclass

from nkieval.perf.costs import elems
from nkieval.perf.params import PerfParams
from nkieval.sim.trace import OperandAccess, TraceRecord


@dataclass(frozen=True, slots=True)
class DmaPlan:
    """How a DMA instruction runs: engines used, each engine's service time, and its traffic."""

    engines: int
    service_ns: float  # per engine (all used engines carry an equal share)
    descriptors: int  # total
    descriptor_bytes: int  # typical descriptor size
    bytes: int  # payload
    hbm_read: int
    hbm_write: int
    sbuf_read: int
    sbuf_write: int
    bytes_per_partition: int
    transpose: bool
    issue_engine: str | None  # engine sequencer occupied to issue it (hwdge / swdge), if any
    issue_ns: float


def _roles(rec: TraceRecord) -> tuple[OperandAccess | None, OperandAccess | None]:
    src = dst = None
    for o in rec.operands:
        if o.role == "src":
            src = o
        elif o.role == "dst":
            dst = o
    if src is None or dst is None:
        reads = [o for o in rec.operands if "r" in o.mode and o.role != "vector_offset"]
        writes = [o for o in rec.operands if "w" in o.mode]
        src = src or (reads[0] if reads else None)
        dst = dst or (writes[0] if writes else None)
    return src, dst


def effective_bw(p: PerfParams, hbm_sides: int = 1) -> float:
    """Per-engine B/ns: the engine rate, capped by the core's HBM bandwidth shared by all its engines.

    The cap is a static share under full load (all engines busy); the engines' aggregate (272/368/528 GB/s)
    is at or about the per-core HBM share (410/362/587 GB/s), so for a transfer with one side in HBM it binds
    little (on trn2 only). An HBM->HBM transfer (``hbm_sides=2``) reads and writes each byte in HBM, so its
    share carries half the bytes: it is HBM-bound on every target.
    """
    return min(float(p.dma_engine_bw_bytes_per_ns),
               p.hbm_core_bw_bytes_per_ns / int(p.dma_engines) / max(1, hbm_sides))


def plan_dma(rec: TraceRecord, p: PerfParams) -> DmaPlan:
    """The :class:`DmaPlan` of a ``dma_copy`` / ``dma_transpose`` (or any ``dma`` engine) record."""
    src, dst = _roles(rec)
    if src is None or dst is None:
        return DmaPlan(1, 0.0, 0, 0, 0, 0, 0, 0, 0, 0, False, None, 0.0)
    nbytes = max(src.nbytes, dst.nbytes)
    onchip = dst if dst.buffer != "hbm" else (src if src.buffer != "hbm" else None)
    n_eng_max = int(p.dma_engines)
    transpose = rec.opcode == "dma_transpose" or bool(rec.attrs.get("transpose"))
    if onchip is not None and onchip.partitions > 0:
        parts = onchip.partitions
        engines = min(n_eng_max, parts)
        per_part = max(1, nbytes // parts)
    else:
        parts = 0
        engines = n_eng_max if nbytes >= n_eng_max * p.dma_hbm_split_min_bytes_per_engine else 1
        per_part = nbytes
    run = min(src.contiguous_bytes or nbytes, dst.contiguous_bytes or nbytes, per_part, int(p.dma_max_descriptor_bytes))
    if rec.attrs.get("indirect"):
        run = min(run, max(1, (src.contiguous_bytes or run)))
    tr_eff = 0.0
    if transpose:
        tr_eff = p.dma_transpose_efficiency_hbm if src.buffer == "hbm" else p.dma_transpose_efficiency_sbuf
        if tr_eff <= 0:  # no DMA transpose engine (NeuronCore-v2): element-wise descriptors on the transposed side
            run = min(run, max(1, nbytes // max(1, elems(src))))
    run = max(1, run)
    if parts:
        desc_per_part = -(-per_part // run)
        parts_per_engine = -(-parts // engines)
        desc_per_engine = desc_per_part * parts_per_engine
        bytes_per_engine = per_part * parts_per_engine
        descriptors = desc_per_part * parts
    else:
        bytes_per_engine = -(-nbytes // engines)
        desc_per_engine = -(-bytes_per_engine // run)
        descriptors = desc_per_engine * engines
    bw = effective_bw(p, (src.buffer == "hbm") + (dst.buffer == "hbm"))
    if tr_eff > 0:  # the transpose engine moves whole descriptors at this fraction of the DMA throughput
        bw *= tr_eff
    service = p.dma_engine_fixed_ns + (bytes_per_engine + desc_per_engine * p.dma_descriptor_overhead_bytes) / bw
    dge = int(rec.attrs.get("dge_mode", 0) or 0)
    issue_engine, issue_ns = None, 0.0
    if dge == 2 and p.hwdge_instruction_ns > 0:  # hwdge: the issuing sequencer (SP by default) is busy
        issue_engine, issue_ns = "sync", float(p.hwdge_instruction_ns)
    elif dge == 1 or rec.attrs.get("indirect"):  # software DGE: GpSimd writes the descriptors
        issue_engine, issue_ns = "gpsimd", float(p.swdge_instruction_ns)
    return DmaPlan(
        engines=engines, service_ns=service, descriptors=descriptors, descriptor_bytes=run, bytes=nbytes,
        hbm_read=src.nbytes if src.buffer == "hbm" else 0, hbm_write=dst.nbytes if dst.buffer == "hbm" else 0,
        sbuf_read=src.nbytes if src.buffer == "sbuf" else 0, sbuf_write=dst.nbytes if dst.buffer == "sbuf" else 0,
        bytes_per_partition=per_part, transpose=transpose, issue_engine=issue_engine, issue_ns=issue_ns)
