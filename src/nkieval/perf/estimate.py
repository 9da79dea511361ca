"""``estimate(trace, target) -> PerfEstimate``: the performance model's one entry point."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from nkieval.hardware import Target, get_target
from nkieval.perf.compiler import CompilerOptions, CompilerReport, compile_trace
from nkieval.perf.metrics import Bottleneck, classify, compute_metrics, critical_path, stall_breakdown
from nkieval.perf.params import PerfParams, load_params
from nkieval.perf.schedule import Schedule, SchedulePolicy, schedule
from nkieval.sim.trace import Trace

MODEL_VERSION = "nkieval-perf 0.8"  # 0.8: partition broadcasts lowered without the staging copy (broadcast-lowering)


@dataclass(frozen=True)
class Uncertainty:
    """What an estimate rests on: parameters by status, and the band on absolute times."""

    model_version: str
    target: str
    relative_band: float  # absolute times are ± this fraction; ratios are the validated quantity
    parameters: Mapping[str, Mapping[str, Any]]  # name -> value/status/source
    by_status: Mapping[str, tuple[str, ...]]
    unmodelled_instructions: Mapping[str, int]  # opcodes costed by the generic fallback rule
    assumptions: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"model_version": self.model_version, "target": self.target, "relative_band": self.relative_band,
                "parameters": {k: dict(v) for k, v in self.parameters.items()},
                "by_status": {k: list(v) for k, v in self.by_status.items()},
                "unmodelled_instructions": dict(self.unmodelled_instructions),
                "assumptions": list(self.assumptions)}


@dataclass(frozen=True)
class PerfEstimate:
    """The estimated profile of one kernel run (a model estimate, not a measurement)."""

    kernel: str | None
    target: str
    model_version: str
    mode: str
    total_time_ns: float
    interval_ns: tuple[float, float]
    instructions: int
    summary: Mapping[str, Any]  # Explorer Summary names (total_time in s, *_percent, bytes, flops)
    utilization: Mapping[str, float]  # resource -> active fraction
    bottleneck: Bottleneck
    stalls: Mapping[str, Mapping[str, float]]  # track -> reason -> ns
    critical_path_share: Mapping[str, float]
    opcode_summary: tuple[Mapping[str, Any], ...]
    rotation: tuple[Mapping[str, Any], ...]
    uncertainty: Uncertainty
    schedule: Schedule = field(repr=False, compare=False)
    engine_order: str = "program"  # SchedulePolicy.engine_order
    spill_traffic: str = "prefetch"  # SchedulePolicy.spill_traffic
    compiler: CompilerReport | None = None  # what the compiler model did to the trace (None: not run)
    traced_instructions: int = 0  # instructions in the simulator's trace, before the compiler model

    @property
    def total_time_us(self) -> float:
        return self.total_time_ns / 1e3

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (the per-instruction schedule is exported separately by ``timeline``)."""
        b = self.bottleneck
        return {
            "estimate": True, "kernel": self.kernel, "target": self.target, "model_version": self.model_version,
            "mode": self.mode, "engine_order": self.engine_order, "spill_traffic": self.spill_traffic,
            "total_time_ns": self.total_time_ns, "interval_ns": list(self.interval_ns),
            "instructions": self.instructions, "traced_instructions": self.traced_instructions,
            "compiler": self.compiler.to_dict() if self.compiler else None, "summary": dict(self.summary), "utilization": dict(self.utilization),
            "bottleneck": {"resource": b.resource, "bound": b.bound, "reason": b.reason},
            "stalls": {k: dict(v) for k, v in self.stalls.items()},
            "critical_path_share": dict(self.critical_path_share),
            "opcode_summary": [dict(r) for r in self.opcode_summary],
            "rotation": [dict(r) for r in self.rotation],
            "uncertainty": self.uncertainty.to_dict(),
        }


BACKFILL_ASSUMPTION = (
    "engine_order=backfill: a compute engine may run an instruction whose dependencies are met in an idle gap "
    "it left before later-issued instructions (list scheduling), besides buffer rotation per allocation site")
ASSUMPTIONS = (
    "engines run their instructions in program order; the compiler's reordering is modelled only by buffer "
    "rotation per allocation site",
    "each DMA source line is one DMA queue; queues are FIFO and run one DMA at a time",
    "buffer rotation gives a site up to rotation_depth sets of the instances its loop keeps alive at once, the "
    "sites refilled most often first, as far as the on-chip memory holds them",
    "the HBM cap is a static per-engine share of the core's HBM bandwidth",
    "cross-engine semaphore latency and PE pipeline latency are assumed values",
    "Trn2/Trn3 dI/dt throttling is decided at Tensor-engine instruction starts (a new ramp after a gap with the "
    "engine busy < 50 % of the last 3 us); instruction-fetch effects are not modelled",
)


_SPILL = ("the SBUF peak exceeds the usable SBUF: the spill is Belady eviction over access segments (furthest next "
          "use first: the fewest reloads ")
_SPILL_SCHEDULED = (_SPILL + "among equal segments), its saves and reloads scheduled as DMAs ahead of the "
                    "instruction they serve, on a spill queue of that instruction's engine, a reload ")
SPILL_ASSUMPTIONS = {
    "prefetch": _SPILL_SCHEDULED + "free to run ahead of it once its save is done (prefetch)",
    "on_demand": _SPILL_SCHEDULED + "waiting for the data it displaces to be done with (on demand)",
    "off": _SPILL + "among equal segments), reported but not scheduled (spill_traffic='off')",
}


def psum_excess_assumption(peak: int, capacity: int) -> str:
    """What an estimate rests on when the trace's PSUM peak exceeds the PSUM (a capacity warning let it through)."""
    return (f"the PSUM peak ({peak} B per partition) exceeds the {capacity}-byte PSUM partition: PSUM spill is not "
            "modelled, the excess is scheduled as if it fit (the estimate is optimistic)")


#: the read-only provenance tables of the last parameter sets seen, by their id (with the parameters, so that the
#: id is not reused while kept): one set per target serves every estimate (``load_params`` without overrides)
_PROVENANCE: dict[int, tuple[PerfParams, MappingProxyType, MappingProxyType]] = {}
_PROVENANCE_KEPT = 8


def _provenance(p: PerfParams) -> tuple[MappingProxyType, MappingProxyType]:
    """``p``'s parameters (value, status, source, note) and names by status, as the estimate's read-only
    mappings; built once per parameter set."""
    kept = _PROVENANCE.get(id(p))
    if kept is not None and kept[0] is p:
        return kept[1], kept[2]
    parameters = MappingProxyType({k: MappingProxyType(v) for k, v in p.to_dict().items()})
    by_status = MappingProxyType({k: tuple(v) for k, v in p.by_status().items()})
    if len(_PROVENANCE) >= _PROVENANCE_KEPT:
        _PROVENANCE.clear()
    _PROVENANCE[id(p)] = (p, parameters, by_status)
    return parameters, by_status


def estimate(trace: Trace, target: str | int | Target | None = None, *, policy: SchedulePolicy | None = None,
             params: dict[str, Any] | PerfParams | None = None,
             compiler: CompilerOptions | None = None) -> PerfEstimate:
    """Estimate how ``trace`` would run on ``target`` (default: the trace's own target).

    ``policy`` sets the modelled compiler freedom (:class:`SchedulePolicy`); ``params``
    overrides model parameters by name (the fitting script's hook), recorded as ``override``;
    ``compiler`` says which compiler-model passes rewrite the trace before it is scheduled
    (default: every pass that is on by default; ``CompilerOptions.off()``: none).
    """
    if not isinstance(trace, Trace):
        raise TypeError(f"estimate() needs an nkieval.sim.trace.Trace, got {type(trace).__name__}")
    traced = len(trace.records)
    trace, compiled = compile_trace(trace, compiler)
    tgt = target if isinstance(target, Target) else get_target(target if target is not None else trace.target)
    p = params if isinstance(params, PerfParams) else load_params(tgt, params)
    pol = policy or SchedulePolicy()
    s = schedule(trace, p, pol)
    m = compute_metrics(s)
    util = m.pop("utilization")
    opsum = tuple(MappingProxyType(r) for r in m.pop("opcode_summary"))
    cp = critical_path(s)
    stalls = stall_breakdown(s)
    band = float(p.time_uncertainty)
    parameters, by_status = _provenance(p)
    total = s.total_time
    rot = tuple(MappingProxyType({"site": r.site, "buffer": r.buffer, "program": r.program,
                                  "bytes_per_partition": r.bytes_per_partition, "instances": r.instances,
                                  "live_needed": r.live_needed, "depth": r.depth})
                for r in (s.rotation.sites if s.rotation else []))
    unc = Uncertainty(
        model_version=MODEL_VERSION, target=tgt.name, relative_band=band,
        parameters=parameters, by_status=by_status,
        unmodelled_instructions=MappingProxyType(dict(s.unmodelled)),
        assumptions=((BACKFILL_ASSUMPTION, *ASSUMPTIONS[1:]) if pol.engine_order == "backfill" else ASSUMPTIONS)
        + ((f"compiler model: {', '.join(compiled.enabled)} rewrote the trace before scheduling",)
           if compiled.enabled else ())
        + ((SPILL_ASSUMPTIONS[pol.spill_traffic],) if s.spill else ())
        + ((psum_excess_assumption(trace.peak_psum_bytes, int(p.psum_bytes_per_partition)),)
           if trace.peak_psum_bytes > p.psum_bytes_per_partition else ())
        + ((f"{sum(s.unmodelled.values())} instruction(s) without a cost rule "
                                    f"({', '.join(sorted(s.unmodelled))}) were costed by the generic "
                                    "max(MIN_II, N) rule",) if s.unmodelled else ()))
    return PerfEstimate(
        kernel=trace.kernel, target=tgt.name, model_version=MODEL_VERSION, mode=pol.mode, total_time_ns=total,
        interval_ns=(total * (1 - band), total * (1 + band)), instructions=len(trace.records),
        summary=MappingProxyType(m), utilization=MappingProxyType(util), bottleneck=classify(util, stalls, total, m['spill_dma_active_time_percent'] / 100.0),
        stalls=MappingProxyType(stalls), critical_path_share=MappingProxyType(cp["share"]),
        opcode_summary=opsum, rotation=rot, uncertainty=unc, schedule=s, engine_order=pol.engine_order,
        spill_traffic=pol.spill_traffic, compiler=compiled, traced_instructions=traced)
