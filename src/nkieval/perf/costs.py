"""Per-instruction cost rules for the compute engines: a registry keyed by opcode.

A rule turns one trace record into a :class:`Cost`: the engine *occupancy* (how long the
engine is busy: its initiation interval) and the extra *latency* before dependents may read
the result. Formulas follow the "Estimated instruction cost" sections of the Beta-1 ISA docs
and the architecture guides (research note perf-model.md §2.3–2.5); every hardware number is a
``[perf]`` fact of the target (``hardware/data/<target>.toml``, with its source and status). The few
numbers written here are not hardware facts but the formulas' own structure: a performance mode's
speed-up is its name (``4x``, ``2x``, A3), ``2N`` is two N-element input streams, "N even" is
B1I's condition for the fast ``scalar_tensor_tensor``, and ``bn_aggr`` reads triples. Opcodes without
a rule are not silently free: the scheduler costs them with :func:`fallback_cost` and reports them as
unmodelled.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from nkieval.perf.params import PerfParams
from nkieval.sim.trace import OperandAccess, TraceRecord

ENGINE_CLOCK = {"tensor": "pe_clock_ghz", "vector": "dve_clock_ghz", "scalar": "act_clock_ghz",
                "gpsimd": "pool_clock_ghz", "sync": "base_clock_ghz"}
_DEP_OVERHEAD = {"vector": "dve_dep_overhead_cycles", "scalar": "act_dep_overhead_cycles",
                 "gpsimd": "pool_dep_overhead_cycles"}
_TWO_BYTE = frozenset({"bfloat16", "float16"})
#: bn_aggr combines (count, mean, var*count) triples: its input free size is a multiple of 3 (B1 API)
_BN_AGGR_TRIPLE = 3


@dataclass(frozen=True, slots=True)
class Cost:
    """Occupancy and result latency in ns; ``mode`` names a performance mode (``2x``/``4x``) if one applied."""

    occ: float
    lat: float = 0.0
    mode: str | None = None


CostRule = Callable[[TraceRecord, PerfParams], Cost]
COST_RULES: dict[str, CostRule] = {}


def cost_rule(*opcodes: str) -> Callable[[CostRule], CostRule]:
    """Register a cost rule for one or more opcodes (one rule per opcode)."""

    def deco(fn: CostRule) -> CostRule:
        for op in opcodes:
            if op in COST_RULES:
                raise ValueError(f"cost rule for {op!r} registered twice")
            COST_RULES[op] = fn
        return fn

    return deco


# -- operand helpers -------------------------------------------------------------------------
def elems(op: OperandAccess) -> int:
    n = 1
    for s in op.shape:
        n *= s
    return n


def itemsize(op: OperandAccess) -> int:
    n = elems(op)
    return max(1, op.nbytes // n) if n else 1


def free_elems(op: OperandAccess) -> int:
    """Elements per partition (the free size N of the cost formulas)."""
    n = 1
    for s in op.shape[1:]:
        n *= s
    return n


def inner_stride_bytes(op: OperandAccess) -> int:
    """Byte stride of the innermost free dimension that has more than one element."""
    for stride, count in reversed(op.pattern):
        if count > 1:
            return abs(stride) * itemsize(op)
    return itemsize(op)


def main_input(rec: TraceRecord) -> OperandAccess | None:
    """The operand whose free size drives the cost: the first read tensor operand, else the first write."""
    first_w = None
    for o in rec.operands:
        if "r" in o.mode and o.role not in ("bias", "scale", "operand0", "operand1", "vector_offset"):
            return o
        if first_w is None and "w" in o.mode:
            first_w = o
    return first_w


def clock(p: PerfParams, engine: str) -> float:
    return float(p.values[ENGINE_CLOCK.get(engine, "base_clock_ghz")])


def dep_latency(p: PerfParams, engine: str, occ_ns: float) -> float:
    """ns a dependent instruction waits after this one ends.

    The engines stream: a dependent instruction can start once the first results leave the
    pipeline, ``MIN_II + dep_overhead`` cycles after the producer started (264 ScalarE cycles
    measured for one-element instructions, PERF Opt5a). Long instructions hide it entirely.
    """
    key = _DEP_OVERHEAD.get(engine)
    if key is None:
        return 0.0
    first = (float(p.min_ii_cycles) + float(p.values[key])) / clock(p, engine)
    return max(0.0, first - occ_ns)


def stride_factor(rec: TraceRecord, p: PerfParams) -> float:
    """×2 when any tensor operand's innermost stride exceeds 16 B (half-bandwidth interface)."""
    lim = p.stride_penalty_bytes
    for o in rec.operands:
        if o.buffer != "hbm" and o.role != "vector_offset" and inner_stride_bytes(o) > lim:
            return float(p.stride_penalty_factor)
    return 1.0


def _cycles_cost(rec: TraceRecord, p: PerfParams, cycles: float, mode: str | None = None,
                 apply_stride: bool = True) -> Cost:
    eng = rec.engine
    if apply_stride:
        cycles *= stride_factor(rec, p)
    occ = cycles / clock(p, eng)
    return Cost(occ, dep_latency(p, eng, occ), mode)


def fallback_cost(rec: TraceRecord, p: PerfParams) -> Cost:
    """Generic one-input cost ``max(MIN_II, N)`` for opcodes with no rule (reported as unmodelled)."""
    src = main_input(rec)
    n = free_elems(src) if src is not None else 1
    return _cycles_cost(rec, p, max(p.min_ii_cycles, n))


# -- Vector / Scalar / GpSimd ----------------------------------------------------------------------
def _all_two_byte(rec: TraceRecord) -> bool:
    return all(o.dtype in _TWO_BYTE for o in rec.operands if o.role not in ("operand0", "operand1", "bias", "scale"))


def _unit_stride(rec: TraceRecord) -> bool:
    return all(inner_stride_bytes(o) <= itemsize(o) for o in rec.operands if o.buffer != "hbm")


def _any_psum(rec: TraceRecord) -> bool:
    return any(o.buffer == "psum" for o in rec.operands)


def _vector_mode(rec: TraceRecord, p: PerfParams) -> tuple[float, str | None]:
    """Trn2+ VectorE performance mode for tensor_copy / tensor_scalar (A3): 4x, 2x or none."""
    if rec.engine != "vector" or not p.vector_perf_modes or not _all_two_byte(rec):
        return 1.0, None
    if not _any_psum(rec) and _unit_stride(rec):
        return 4.0, "4x"
    return 2.0, "2x"


@cost_rule("tensor_copy", "tensor_scalar")
def _one_input(rec: TraceRecord, p: PerfParams) -> Cost:
    src = main_input(rec)
    n = free_elems(src) if src is not None else 1
    speed, mode = _vector_mode(rec, p)
    if rec.engine == "scalar" and p.scalar_perf_mode_2x and _all_two_byte(rec):
        speed, mode = 2.0, "2x"
    if mode is not None:
        # Perf modes already account for strided access (2x instead of 4x).
        return _cycles_cost(rec, p, max(p.min_ii_cycles, n / speed), mode, apply_stride=False)
    return _cycles_cost(rec, p, max(p.min_ii_cycles, n))


@cost_rule("activation", "dropout", "range_select", "nc_stream_shuffle", "bn_stats", "select_reduce",
           "tensor_scalar_cumulative")
def _activation(rec: TraceRecord, p: PerfParams) -> Cost:
    src = main_input(rec)
    n = free_elems(src) if src is not None else 1
    extra = p.min_ii_cycles if rec.attrs.get("reduce") else 0
    return _cycles_cost(rec, p, max(p.min_ii_cycles, n) + extra)


@cost_rule("activation_reduce", "tensor_scalar_reduce")
def _activation_reduce(rec: TraceRecord, p: PerfParams) -> Cost:
    """Activate + ActReadAccumulator: ``max(MIN_II, N) + MIN_II`` (B1I)."""
    src = main_input(rec)
    n = free_elems(src) if src is not None else 1
    return _cycles_cost(rec, p, max(p.min_ii_cycles, n) + p.min_ii_cycles)


_FAST_TT_OPS = frozenset({"add", "subtract", "multiply"})


def _read_width(o: OperandAccess, p: PerfParams) -> float:
    """Elements per cycle the Vector engine's data path moves for ``o``'s dtype (A2/A3/A4 engine tables)."""
    return float(p.dve_wide_elems_per_cycle if o.dtype in p.dve_wide_dtypes else p.dve_elems_per_cycle)


def two_stream_cycles(rec: TraceRecord, p: PerfParams, n: int) -> float:
    """Cycles to stream two N-element inputs: the documented NeuronCore-v2 ``2N`` (B1I).

    That ``2N`` is two N-element streams through a read interface of 128 elements per cycle (one per
    lane, A2). On the Vector engine of later generations the interface is wider (A3/A4: 256 elements
    per cycle, 512 for BF16/FP16), so both streams need ``2N x lanes / width`` cycles, but never fewer
    than N: the lanes still produce one element each per cycle unless a performance mode applies.
    """
    if rec.engine != "vector":
        return 2.0 * n
    streams = [o for o in rec.operands if "r" in o.mode and o.buffer in ("sbuf", "psum") and free_elems(o) == n]
    width = min((_read_width(o, p) for o in streams), default=float(p.partitions))
    return max(float(n), 2.0 * n * p.partitions / width)


@cost_rule("tensor_tensor")
def _tensor_tensor(rec: TraceRecord, p: PerfParams) -> Cost:
    """NeuronCore-v2 (B1I): ``max(MIN_II, N)`` with one input in PSUM or all-bf16 add/sub/mul unit stride, else
    two streams (:func:`two_stream_cycles`: ``2N`` there). Trn2+ Vector with all-2-byte SBUF operands: the 2x
    performance mode, half the NeuronCore-v2 cycles (A3)."""
    src = main_input(rec)
    n = free_elems(src) if src is not None else 1
    ins = [o for o in rec.operands if "r" in o.mode]
    mixed = len({o.buffer for o in ins}) > 1 and any(o.buffer == "psum" for o in ins)
    fast = mixed or (_all_two_byte(rec) and rec.attrs.get("op") in _FAST_TT_OPS and _unit_stride(rec))
    if rec.engine == "vector" and p.vector_perf_modes and _all_two_byte(rec) and not _any_psum(rec):
        return _cycles_cost(rec, p, max(p.min_ii_cycles, (n if fast else 2 * n) / 2), "2x")
    return _cycles_cost(rec, p, max(p.min_ii_cycles, n if fast else two_stream_cycles(rec, p, n)))


@cost_rule("scalar_tensor_tensor")
def _scalar_tensor_tensor(rec: TraceRecord, p: PerfParams) -> Cost:
    """``N`` for bf16 subtract-then-multiply with N even, else two streams (``2N`` on NeuronCore-v2, B1I)."""
    src = main_input(rec)
    n = free_elems(src) if src is not None else 1
    fast = (_all_two_byte(rec) and rec.attrs.get("op0") == "subtract" and rec.attrs.get("op1") == "multiply"
            and n % 2 == 0)
    return _cycles_cost(rec, p, max(p.min_ii_cycles, n if fast else two_stream_cycles(rec, p, n)))


@cost_rule("tensor_tensor_scan")
def _scan(rec: TraceRecord, p: PerfParams) -> Cost:
    """Two streams, ``data0`` and ``data1`` (``max(MIN_II, 2N)`` on NeuronCore-v2, B1I)."""
    src = main_input(rec)
    n = free_elems(src) if src is not None else 1
    return _cycles_cost(rec, p, max(p.min_ii_cycles, two_stream_cycles(rec, p, n)))


_FAST_REDUCE_OPS = frozenset({"add", "maximum"})


@cost_rule("tensor_reduce")
def _tensor_reduce(rec: TraceRecord, p: PerfParams) -> Cost:
    """``N/2`` for bf16 in/out with add or max, else ``N`` (B1I); never below MIN_II."""
    src = main_input(rec)
    n = free_elems(src) if src is not None else 1
    fast = _all_two_byte(rec) and rec.attrs.get("op") in _FAST_REDUCE_OPS
    return _cycles_cost(rec, p, max(p.min_ii_cycles, n / p.tensor_reduce_fast_speedup if fast else n))


@cost_rule("memset", "spill_refill")
def _memset(rec: TraceRecord, p: PerfParams) -> Cost:
    """``max(MIN_II, N/2)`` for zero into bf16/fp16, else ``max(MIN_II, N)`` (B1I)."""
    dst = rec.operands[0]
    n = free_elems(dst)
    fast = rec.attrs.get("value", 1) == 0 and dst.dtype in _TWO_BYTE
    return _cycles_cost(rec, p, max(p.min_ii_cycles, n / p.memset_zero_fast_speedup if fast else n))


@cost_rule("reciprocal")
def _reciprocal(rec: TraceRecord, p: PerfParams) -> Cost:
    """Vector engine: ``max(MIN_II, 8N)`` (B1I)."""
    src = main_input(rec)
    n = free_elems(src) if src is not None else 1
    return _cycles_cost(rec, p, max(p.min_ii_cycles, p.reciprocal_cycles_per_elem * n))


@cost_rule("bn_aggr")
def _bn_aggr(rec: TraceRecord, p: PerfParams) -> Cost:
    """``max(MIN_II, 13N/3)``: 13 cycles per input triple (B1I)."""
    src = main_input(rec)
    n = free_elems(src) if src is not None else 1
    return _cycles_cost(rec, p, max(p.min_ii_cycles, p.bn_aggr_cycles_per_triple * n / _BN_AGGR_TRIPLE))


@cost_rule("tensor_copy_predicated")
def _copy_predicated(rec: TraceRecord, p: PerfParams) -> Cost:
    src = main_input(rec)
    n = free_elems(src) if src is not None else 1
    return _cycles_cost(rec, p, max(p.min_ii_cycles, n if _any_psum(rec) else two_stream_cycles(rec, p, n)))


@cost_rule("tensor_copy_dynamic_src", "tensor_copy_dynamic_dst")
def _copy_dynamic(rec: TraceRecord, p: PerfParams) -> Cost:
    src = main_input(rec)
    n = free_elems(src) if src is not None else 1
    return _cycles_cost(rec, p, max(p.dynamic_min_ii_cycles, n))


@cost_rule("max8", "nc_find_index8", "nc_match_replace8")
def _max8(rec: TraceRecord, p: PerfParams) -> Cost:
    src = main_input(rec)
    n = free_elems(src) if src is not None else 1
    return _cycles_cost(rec, p, max(p.min_ii_cycles, n))


@cost_rule("iota", "affine_select")
def _gpsimd_start(rec: TraceRecord, p: PerfParams) -> Cost:
    """``GPSIMD_START + N`` (B1I iota / affine_select)."""
    dst = rec.operands[0]
    return _cycles_cost(rec, p, p.gpsimd_start_cycles + free_elems(dst))


@cost_rule("quantize_mx")
def _quantize_mx(rec: TraceRecord, p: PerfParams) -> Cost:
    """Vector engine QuantizeMX (Trn3): ``max(MIN_II, N / 4)`` cycles for N source elements per partition (A4)."""
    src = next((o for o in rec.operands if o.role == "src"), None)
    n = free_elems(src) if src is not None else 1
    return _cycles_cost(rec, p, max(p.min_ii_cycles, n / p.quantize_mx_elems_per_cycle))


# -- Tensor engine ---------------------------------------------------------------------------------
def _pe_tile_share(rec: TraceRecord, p: PerfParams) -> float:
    """Fraction of the PE array a tiled matmul occupies (row/column tiling runs tiles in parallel)."""
    ts = rec.attrs.get("tile_size") or ()
    if len(ts) != 2:
        return 1.0
    return (ts[0] * ts[1]) / float(p.pe_array_rows * p.pe_array_cols)


@cost_rule("nc_matmul", "nc_matmul_mx")
def _matmul(rec: TraceRecord, p: PerfParams) -> Cost:
    """``max(min(64, M_stationary), N_moving, MM_INIT)`` PE cycles (B1I, A2), ×4 for fp32 (×2 with a one/zero operand),
    plus a fixed per-instruction overhead; FP8 double_row contracts K=256 in the same time (A3). ``nc_matmul_mx``
    (Trn3) takes one x4-packed MXFP8/MXFP4 column per cycle (8×128 FP8 values in against 2×128 BF16, A4), so it
    contracts K = 4 × partitions in the time of a BF16 matmul of the same free sizes."""
    a = rec.attrs
    n = int(a.get("N", 1))
    m = int(a.get("M", 1))
    cycles = max(min(p.mm_stationary_floor_cycles, m), n, p.mm_min_ii_cycles)
    dtypes = {o.dtype for o in rec.operands if o.role in ("stationary", "moving")}
    if "float32" in dtypes:
        onezero = a.get("stationary_onezero") or a.get("moving_onezero")
        cycles *= p.mm_fp32_factor / p.mm_fp32_onezero_speedup if onezero else p.mm_fp32_factor
    cycles = cycles * _pe_tile_share(rec, p) + p.mm_instruction_overhead_cycles
    f = clock(p, "tensor")
    return Cost(cycles / f, p.pe_pipeline_latency_cycles / f,
                "double_row" if a.get("perf_mode") == "double_row" else None)


@cost_rule("nc_transpose")
def _transpose(rec: TraceRecord, p: PerfParams) -> Cost:
    """Tensor engine: ``max(P, min(64, F))`` (B1I; Trn2 fp32 2x faster, A3). Vector engine: ``max(MIN_II, N)``."""
    data = main_input(rec)
    if data is None:
        return fallback_cost(rec, p)
    if rec.engine != "tensor":
        return _cycles_cost(rec, p, max(p.min_ii_cycles, free_elems(data)))
    cycles = max(data.shape[0] if data.shape else 1, min(p.mm_stationary_floor_cycles, free_elems(data)))
    if data.dtype == "float32":
        cycles *= p.pe_transpose_fp32_factor
    cycles += p.mm_instruction_overhead_cycles
    f = clock(p, "tensor")
    return Cost(cycles / f, p.pe_pipeline_latency_cycles / f)


# -- FLOP accounting (Explorer definitions) -----------------------------------------------------------
def matmul_flops(rec: TraceRecord, p: PerfParams) -> tuple[float, float, bool]:
    """(hardware FLOPs, BF16-equivalent adjusted FLOPs, is_transpose) of a Tensor-engine instruction."""
    if rec.opcode in ("nc_matmul", "nc_matmul_mx"):
        a = rec.attrs
        raw = 2.0 * a.get("K", 0) * a.get("M", 0) * a.get("N", 0)  # K: the contraction (x4 packed for MX)
        if rec.opcode == "nc_matmul_mx":
            return raw, raw * p.mx_adjusted_flops_factor, False
        transpose = bool(a.get("is_transpose"))
        dtypes = {o.dtype for o in rec.operands if o.role in ("stationary", "moving")}
    elif rec.opcode == "nc_transpose" and rec.engine == "tensor":
        data = main_input(rec)
        if data is None:
            return 0.0, 0.0, True
        pp = data.shape[0] if data.shape else 1
        raw = 2.0 * pp * free_elems(data) * pp
        transpose = True
        dtypes = {data.dtype}
    else:
        return 0.0, 0.0, False
    if "float32" in dtypes:
        mult = p.fp32_adjusted_flops_factor
    elif any(d.startswith("float8") for d in dtypes):
        mult = p.fp8_adjusted_flops_factor
    else:
        mult = 1.0
    return raw, raw * mult, transpose


def pe_peak_flops_per_ns(p: PerfParams) -> float:
    """BF16 dense peak of the PE array: 2 × rows × cols × clock (FLOP/ns)."""
    return 2.0 * p.pe_array_rows * p.pe_array_cols * p.pe_clock_ghz


def cost_of(rec: TraceRecord, p: PerfParams) -> tuple[Cost, bool]:
    """(cost, has_rule) for a compute-engine record."""
    rule = COST_RULES.get(rec.opcode)
    if rule is None:
        return fallback_cost(rec, p), False
    return rule(rec, p), True


__all__ = ["COST_RULES", "Cost", "CostRule", "cost_of", "cost_rule", "fallback_cost",
           "matmul_flops", "pe_peak_flops_per_ns", "two_stream_cycles"]
