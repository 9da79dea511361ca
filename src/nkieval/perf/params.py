"""The performance model's parameters, read from the target's ``[perf]`` facts.

Every number the cost model uses comes from ``hardware/data/<target>.toml`` (value, source,
status); nothing is hard-coded here. ``PerfParams`` keeps the values in the units the
scheduler wants (ns, bytes, cycles) plus the provenance of each, so that an estimate can say
which of its inputs are documented, derived, fitted or assumed. Overrides (from the fitting
script or a what-if study) are recorded as status ``override``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nkieval.hardware import Target

# Facts the model reads: [perf] cost parameters plus a few [facts] limits.
PERF_FACTS: tuple[str, ...] = (
    "pe_clock_ghz", "dve_clock_ghz", "act_clock_ghz", "pool_clock_ghz", "base_clock_ghz",
    "pe_array_rows", "pe_array_cols", "mm_min_ii_cycles", "mm_fp32_factor", "mm_fp8_double_row_factor",
    "mm_fp32_onezero_speedup", "mm_stationary_floor_cycles", "mm_instruction_overhead_cycles", "pe_pipeline_latency_cycles", "ls_speedup",
    "pe_throttle_start_fraction", "pe_throttle_ramp_ns", "pe_throttle_window_ns", "pe_throttle_util_threshold",
    "pe_transpose_fp32_factor", "min_ii_cycles", "dve_dep_overhead_cycles", "act_dep_overhead_cycles",
    "pool_dep_overhead_cycles", "gpsimd_start_cycles", "dynamic_min_ii_cycles", "reciprocal_cycles_per_elem", "bn_aggr_cycles_per_triple",
    "tensor_reduce_fast_speedup", "memset_zero_fast_speedup", "stride_penalty_bytes",
    "stride_penalty_factor", "vector_perf_modes", "dve_elems_per_cycle", "dve_wide_elems_per_cycle", "dve_wide_dtypes", "scalar_perf_mode_2x", "sbuf_port_shared_vector_gpsimd",
    "psum_port_shared_vector_scalar", "cross_engine_sem_ns", "dma_engine_bw_bytes_per_ns",
    "dma_descriptor_overhead_bytes", "dma_fixed_ns", "dma_queue_pipelined", "dma_engine_fixed_ns", "dma_queues", "dma_partitions_per_engine",
    "dma_max_descriptor_bytes", "dma_hbm_split_min_bytes_per_engine", "hwdge_instruction_ns", "swdge_instruction_ns", "dma_transpose_efficiency_hbm",
    "dma_transpose_efficiency_sbuf", "hbm_core_bw_bytes_per_ns", "hbm_stack_bw_bytes_per_ns",
    "sbuf_usable_bytes_per_partition", "rotation_depth", "fp8_adjusted_flops_factor", "fp32_adjusted_flops_factor",
    "mx_adjusted_flops_factor", "quantize_mx_elems_per_cycle",
    "time_uncertainty",
    # architectural limits from [facts]
    "partitions", "dma_engines", "psum_bytes_per_partition", "psum_bank_bytes",
)


class PerfParamError(ValueError):
    """An override names a parameter the model does not have, or gives it an unusable value."""


@dataclass(frozen=True)
class ParamSource:
    """Where one parameter value came from."""

    name: str
    value: Any
    status: str  # documented | derived | assumed | fitted | override
    source: str
    note: str = ""


@dataclass(frozen=True)
class PerfParams:
    """Parameter values by name (attribute access) and their provenance."""

    target: str
    generation: int
    values: dict[str, Any] = field(repr=False)
    sources: dict[str, ParamSource] = field(repr=False)

    def __post_init__(self) -> None:
        # Expose values as plain attributes: the scheduler reads them in its inner loop.
        for k, v in self.values.items():
            if k not in ("target", "generation", "values", "sources"):
                object.__setattr__(self, k, v)

    def __getattr__(self, item: str) -> Any:
        raise AttributeError(f"performance model has no parameter {item!r}")

    def by_status(self) -> dict[str, list[str]]:
        """Parameter names grouped by status (documented / derived / fitted / assumed / override)."""
        out: dict[str, list[str]] = {}
        for s in self.sources.values():
            out.setdefault(s.status, []).append(s.name)
        return {k: sorted(v) for k, v in sorted(out.items())}

    def to_dict(self) -> dict[str, Any]:
        return {n: {"value": s.value, "status": s.status, "source": s.source, **({"note": s.note} if s.note else {})}
                for n, s in self.sources.items()}


#: the parameters of each target without overrides, read once: (the target, its parameters) by the target's id
#: (the target is kept with them, so that the id is not reused while they are)
_DEFAULTS: dict[int, tuple[Target, PerfParams]] = {}


def load_params(target: Target, overrides: dict[str, Any] | None = None) -> PerfParams:
    """Read every model parameter of ``target``; ``overrides`` replaces values (status ``override``). Without
    overrides, the same :class:`PerfParams` for the same target each time (an estimate, the physics check and the
    compiler passes of every review read them; they are frozen)."""
    if not overrides:
        kept = _DEFAULTS.get(id(target))
        if kept is not None and kept[0] is target:
            return kept[1]
        params = _read_params(target, None)
        _DEFAULTS[id(target)] = (target, params)
        return params
    return _read_params(target, overrides)


def _read_params(target: Target, overrides: dict[str, Any] | None) -> PerfParams:
    values: dict[str, Any] = {}
    sources: dict[str, ParamSource] = {}
    for name in PERF_FACTS:
        try:
            f = target.fact(name)
        except KeyError:
            raise PerfParamError(f"hardware/data/{target.name}.toml lacks the performance fact {name!r}; every model "
                                 "parameter must be defined there with its source") from None
        values[name] = f.value
        sources[name] = ParamSource(name, f.value, f.status, f.source, f.note)
    for name, v in (overrides or {}).items():
        if name not in values:
            raise PerfParamError(f"unknown performance parameter {name!r} in overrides; known: {', '.join(PERF_FACTS)}")
        if isinstance(values[name], int | float) and not isinstance(values[name], bool):
            if not isinstance(v, int | float) or isinstance(v, bool) or v < 0:
                raise PerfParamError(f"override {name}={v!r} must be a non-negative number")
        values[name] = v
        sources[name] = ParamSource(name, v, "override", "caller override", f"target value {sources[name].value!r}")
    return PerfParams(target.name, target.generation, values, sources)
