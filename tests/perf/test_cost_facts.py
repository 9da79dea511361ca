"""The numbers of the cost formulas are hardware data (issue #25, item 6): each moved constant is a ``[perf]``
fact with its source, the formula gives the documented cycle count (B1I "Estimated instruction cost", worked by
hand here), and an override of the fact moves the cost (the code reads the data, not a literal)."""

from __future__ import annotations

import pytest
from perf_helpers import TraceBuilder

from nkieval.hardware import get_target
from nkieval.perf.costs import cost_of
from nkieval.perf.dma import plan_dma
from nkieval.perf.params import load_params

TARGETS = ("trn1", "trn2", "trn3")

#: fact -> (the documented number, a word its source must contain)
MOVED = {"reciprocal_cycles_per_elem": (8, "B1I reciprocal"), "bn_aggr_cycles_per_triple": (13, "B1I bn_aggr"),
         "tensor_reduce_fast_speedup": (2, "B1I tensor_reduce"), "memset_zero_fast_speedup": (2, "B1I memset"),
         "mm_fp32_onezero_speedup": (2, "B1I nc_matmul"), "dma_hbm_split_min_bytes_per_engine": (512, "assumed")}


@pytest.mark.parametrize("target", TARGETS)
def test_the_moved_constants_are_facts_with_their_source(target: str) -> None:
    p = load_params(get_target(target))
    for name, (value, word) in MOVED.items():
        assert getattr(p, name) == value, name
        assert word in p.sources[name].source, (name, p.sources[name].source)


def _cycles(rec, p, clock_ghz: float) -> float:
    cost, has_rule = cost_of(rec, p)
    assert has_rule
    return cost.occ * clock_ghz


def _bn_aggr(n: int, target: str = "trn1"):
    b = TraceBuilder(target)
    src = b.alloc("sbuf", (128, n))
    dst = b.alloc("sbuf", (128, 2))
    return b.rec("bn_aggr", "vector", [b.op(dst, "dst", "w"), b.op(src, "data", "r")])


@pytest.mark.parametrize("n,cycles", [(300, 1300), (6, 64), (15, 65), (3, 64)])
def test_bn_aggr_is_13_cycles_per_triple_never_below_min_ii(n: int, cycles: int) -> None:
    """B1I: max(MIN_II, 13N/3) with MIN_II 64: 13*300/3 = 1300, 13*15/3 = 65, 13*6/3 = 26 -> 64."""
    p = load_params(get_target("trn1"))
    assert _cycles(_bn_aggr(n), p, p.dve_clock_ghz) == pytest.approx(cycles)


def _fp32_matmul(n: int, **attrs):
    b = TraceBuilder("trn1")
    st, mv, ps = b.alloc("sbuf", (128, 128)), b.alloc("sbuf", (128, n)), b.alloc("psum", (128, n))
    return b.rec("nc_matmul", "tensor", [b.op(ps, "dst", "w"), b.op(st, "stationary", "r"), b.op(mv, "moving", "r")],
                 K=128, M=128, N=n, perf_mode="none", **attrs)


def test_fp32_matmul_with_a_onezero_operand_is_x2_not_x4() -> None:
    """B1I nc_matmul: fp32 costs 4 x max(min(64, M), N); a one/zero operand makes it 2x faster: N=512 -> 2048 and
    1024 PE cycles (trn1 has no per-instruction overhead)."""
    p = load_params(get_target("trn1"))
    assert p.mm_instruction_overhead_cycles == 0
    assert _cycles(_fp32_matmul(512), p, p.pe_clock_ghz) == pytest.approx(2048)
    assert _cycles(_fp32_matmul(512, stationary_onezero=True), p, p.pe_clock_ghz) == pytest.approx(1024)
    assert _cycles(_fp32_matmul(512, moving_onezero=True), p, p.pe_clock_ghz) == pytest.approx(1024)


def _hbm_to_hbm(nbytes: int):
    b = TraceBuilder("trn1")
    src = b.alloc("hbm", (1, nbytes), "bfloat16")
    dst = b.alloc("hbm", (1, nbytes), "bfloat16")
    return b.rec("dma_copy", "dma", [b.op(dst, "dst", "w", cols=(0, nbytes // 2)),
                                     b.op(src, "src", "r", cols=(0, nbytes // 2))])


def test_hbm_to_hbm_splits_over_all_engines_from_512_bytes_each() -> None:
    """16 engines x 512 B = 8192 B: a transfer of 8192 B is split over the 16 engines, 8188 B stays on one."""
    p = load_params(get_target("trn1"))
    assert p.dma_engines == 16
    assert plan_dma(_hbm_to_hbm(8192), p).engines == 16
    assert plan_dma(_hbm_to_hbm(8188), p).engines == 1


def _reduce_bf16(n: int):
    b = TraceBuilder("trn1")
    src, dst = b.alloc("sbuf", (128, n), "bfloat16"), b.alloc("sbuf", (128, 1), "bfloat16")
    return b.rec("tensor_reduce", "vector", [b.op(dst, "dst", "w"), b.op(src, "data", "r")], op="maximum")


def _reciprocal(n: int):
    b = TraceBuilder("trn1")
    src, dst = b.alloc("sbuf", (128, n)), b.alloc("sbuf", (128, n))
    return b.rec("reciprocal", "vector", [b.op(dst, "dst", "w"), b.op(src, "data", "r")])


def _memset_zero(n: int):
    b = TraceBuilder("trn1")
    t = b.alloc("sbuf", (128, n), "bfloat16")
    return b.rec("memset", "vector", [b.op(t, "dst", "w")], value=0)


@pytest.mark.parametrize("fact,value,record,cycles", [
    ("reciprocal_cycles_per_elem", 4, _reciprocal(100), 400),
    ("bn_aggr_cycles_per_triple", 6, _bn_aggr(300), 600),
    ("tensor_reduce_fast_speedup", 4, _reduce_bf16(1024), 256),
    ("memset_zero_fast_speedup", 4, _memset_zero(1024), 256),
    ("mm_fp32_onezero_speedup", 4, _fp32_matmul(512, stationary_onezero=True), 512),
])
def test_an_override_of_the_fact_moves_the_cost(fact: str, value: int, record, cycles: int) -> None:
    p = load_params(get_target("trn1"), {fact: value})
    clock = p.pe_clock_ghz if record.engine == "tensor" else p.dve_clock_ghz
    assert _cycles(record, p, clock) == pytest.approx(cycles)


def test_an_override_of_the_split_threshold_moves_the_split() -> None:
    p = load_params(get_target("trn1"), {"dma_hbm_split_min_bytes_per_engine": 256})
    assert plan_dma(_hbm_to_hbm(4096), p).engines == 16
    assert plan_dma(_hbm_to_hbm(4092), p).engines == 1
