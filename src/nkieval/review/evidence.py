"""Hardware-appropriateness evidence read from a kernel's instruction trace.

What an NKI expert looks at before any timing (perf-model.md §1.4, migration.md §2.1): are
all 128 partitions busy, is each instruction wide enough to amortise its fixed cost, are DMAs
large (>= 2 KiB per partition saturates, < 512 B is overhead-bound), is data reloaded from
HBM more often than necessary, do contractions run on the Tensor engine with PSUM
accumulation across K tiles, how close do SBUF and PSUM come to capacity, and which engine
does the work. Every number here comes from the trace alone (nkieval.sim.trace), so it is the
same whichever performance model is plugged in.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from nkieval.sim.trace import Trace

COMPUTE_ENGINES = ("tensor", "vector", "scalar", "gpsimd")


@dataclass
class HardwareEvidence:
    """Trace metrics for one run (one shape). Ratios are in [0, 1]; bytes are bytes."""

    instructions: int
    per_engine: dict[str, int]
    per_opcode: dict[str, int]
    compute_instructions: int
    #: partitions driven / 128, averaged over compute instructions weighted by their elements per partition
    #: (so one ragged-tail instruction does not hide a fully parallel bulk, and vice versa)
    partition_utilisation: float
    #: median elements per partition of compute instructions
    median_free_elements: float
    #: share of compute instructions that touch fewer than 32 elements per partition
    tiny_instruction_share: float
    dma_count: int
    hbm_read_bytes: int
    hbm_write_bytes: int
    #: median bytes per partition of HBM<->SBUF transfers (the on-chip side's bytes / partitions)
    dma_median_bytes_per_partition: float
    #: share of HBM DMAs moving < 512 bytes per partition
    small_dma_share: float
    matmul_count: int
    matmul_accumulating: int
    psum_reads: int
    peak_sbuf_bytes: int
    peak_psum_bytes: int
    sbuf_capacity: int
    psum_capacity: int
    #: HBM bytes read / bytes every correct kernel must read (1.0 = each input read once)
    reload_factor: float | None = None
    #: HBM bytes written / output bytes
    write_factor: float | None = None
    warnings: list[dict[str, Any]] = field(default_factory=list)
    hot_lines: list[tuple[str, int]] = field(default_factory=list)
    #: per output: its bytes and the most bytes the trace writes into one HBM tensor of its shape and
    #: dtype (``nkieval.review.physics.output_writes``; filled by the pipeline)
    output_writes: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["hot_lines"] = [{"location": loc, "instructions": n} for loc, n in self.hot_lines]
        return d


def _median(xs: list[float]) -> float:
    if not xs:
        return 0.0
    s = sorted(xs)
    n = len(s)
    return float(s[n // 2]) if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2.0


def trace_evidence(trace: Trace, *, target: Any, compulsory_read: int | None = None,
                   compulsory_write: int | None = None) -> HardwareEvidence:
    """Summarise ``trace`` into the metrics the rubric's Hardware criterion scores."""
    per_engine: Counter[str] = Counter()
    per_opcode: Counter[str] = Counter()
    parts: list[float] = []
    work: list[float] = []
    free: list[float] = []
    tiny = 0
    dma_bpp: list[float] = []
    small = 0
    dma_count = 0
    hbm_r = hbm_w = 0
    mm = mm_acc = psum_reads = 0
    lines: Counter[str] = Counter()
    pmax = int(target.partitions)
    for r in trace.records:
        per_engine[r.engine] += 1
        per_opcode[r.opcode] += 1
        if r.file:
            lines[f"{r.file.rsplit('/', 1)[-1]}:{r.line}"] += 1
        if r.engine == "dma":
            dma_count += 1
            hbm_ops = [o for o in r.operands if o.buffer == "hbm"]
            chip = [o for o in r.operands if o.buffer != "hbm"]
            for o in hbm_ops:
                if "r" in o.mode:
                    hbm_r += o.nbytes
                if "w" in o.mode:
                    hbm_w += o.nbytes
            if hbm_ops and chip:
                c = chip[0]
                bpp = c.nbytes / max(1, c.partitions)
                dma_bpp.append(bpp)
                small += bpp < 512
            continue
        if r.engine in COMPUTE_ENGINES:
            w = r.writes() or r.operands
            if w:
                o = w[0]
                p = max(1, o.partitions)
                elems = o.nbytes / p / max(1, _itemsize(o.dtype))
                parts.append(min(1.0, p / pmax))
                work.append(elems)
                free.append(elems)
                tiny += elems < 32
            psum_reads += any(o.buffer == "psum" and "r" in o.mode for o in r.operands if o.role != "dst")
            if r.opcode == "nc_matmul":
                mm += 1
                mm_acc += bool(r.attrs.get("accumulated"))
    compute = len(parts)
    return HardwareEvidence(
        instructions=len(trace.records), per_engine=dict(per_engine), per_opcode=dict(per_opcode),
        compute_instructions=compute,
        partition_utilisation=(sum(u * w for u, w in zip(parts, work)) / sum(work)) if compute and sum(work) else 0.0,
        median_free_elements=_median(free), tiny_instruction_share=tiny / compute if compute else 0.0,
        dma_count=dma_count, hbm_read_bytes=hbm_r, hbm_write_bytes=hbm_w,
        dma_median_bytes_per_partition=_median(dma_bpp), small_dma_share=small / len(dma_bpp) if dma_bpp else 0.0,
        matmul_count=mm, matmul_accumulating=mm_acc, psum_reads=psum_reads,
        peak_sbuf_bytes=int(trace.peak_sbuf_bytes), peak_psum_bytes=int(trace.peak_psum_bytes),
        sbuf_capacity=int(target.sbuf_bytes_per_partition), psum_capacity=int(target.psum_bytes_per_partition),
        reload_factor=hbm_r / compulsory_read if compulsory_read else None,
        write_factor=hbm_w / compulsory_write if compulsory_write else None,
        warnings=[{k: w.get(k) for k in ("rule", "message", "location")} for w in trace.warnings[:20]],
        hot_lines=lines.most_common(3),
    )


_ITEMSIZE = {"int64": 8, "float32": 4, "tfloat32": 4, "int32": 4, "uint32": 4, "bfloat16": 2, "float16": 2,
             "int16": 2, "uint16": 2}


def _itemsize(dtype: str) -> int:
    return _ITEMSIZE.get(dtype, 1)
