"""Cost formulas where mutation testing (seed 2) found their arithmetic unchecked (issue #25, item 5): fractional
cycle counts are kept (13N/3 and N/2 are not rounded down), an activation with a reduction adds MIN_II, and the
trn2 Vector engine reads two fp32 streams through its 256-element interface. Each figure is worked by hand from
the B1I cost formulas and the A3 engine table (MIN_II 64; trn2 Vector: 256 elements per cycle, 512 for 2-byte
types)."""

from __future__ import annotations

import pytest
from perf_helpers import TraceBuilder

from nkieval.hardware import get_target
from nkieval.perf.costs import cost_of
from nkieval.perf.params import load_params


def _cycles(rec, target: str, clock: str) -> float:
    p = load_params(get_target(target))
    cost, has_rule = cost_of(rec, p)
    assert has_rule
    return cost.occ * getattr(p, clock)


def _rec(opcode: str, engine: str, n: int, dtype: str, inputs: int = 1, target: str = "trn1", **attrs):
    b = TraceBuilder(target)
    dst = b.alloc("sbuf", (128, n), dtype)
    ins = [b.op(b.alloc("sbuf", (128, n), dtype), f"data{i}", "r") for i in range(inputs)]
    return b.rec(opcode, engine, [b.op(dst, "dst", "w"), *ins], **attrs)


def test_bn_aggr_keeps_a_fractional_cycle_count():
    """13 x 100 / 3 = 433.33 cycles (not 433)."""
    assert _cycles(_rec("bn_aggr", "vector", 100, "float32"), "trn1", "dve_clock_ghz") == pytest.approx(1300 / 3)


def test_a_fast_bf16_reduce_of_an_odd_length_is_half_a_cycle_per_element():
    """bf16 add-reduce: N/2 = 1001/2 = 500.5 cycles."""
    rec = _rec("tensor_reduce", "vector", 1001, "bfloat16", op="add")
    assert _cycles(rec, "trn1", "dve_clock_ghz") == pytest.approx(500.5)


def test_an_activation_with_a_reduction_adds_min_ii():
    """max(64, 100) + 64 = 164 (the sum, whose bits overlap: not 100 XOR 64 = 36)."""
    assert _cycles(_rec("activation", "scalar", 100, "float32", reduce=True), "trn1", "act_clock_ghz") \
        == pytest.approx(164)
    assert _cycles(_rec("activation", "scalar", 100, "float32"), "trn1", "act_clock_ghz") == pytest.approx(100)


def test_two_fp32_streams_on_the_trn2_vector_engine_take_n_cycles():
    """Two N-element fp32 inputs through the 256-element read interface: max(N, 2N x 128 / 256) = N = 512."""
    rec = _rec("tensor_tensor", "vector", 512, "float32", inputs=2, target="trn2", op="maximum")
    assert _cycles(rec, "trn2", "dve_clock_ghz") == pytest.approx(512)
