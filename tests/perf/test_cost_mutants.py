"""Cost formulas at the points where mutation testing found them unchecked (issue #25, item 5). Every expectation
is worked by hand from the B1I "Estimated instruction cost" formulas and the targets' documented facts
(MIN_II 64; trn1 clocks: Vector 1.12 GHz, Scalar and GpSimd 1.4 GHz; dependency overheads 100 Vector cycles,
200 Scalar cycles)."""

from __future__ import annotations

import pytest
from perf_helpers import TraceBuilder

from nkieval.hardware import get_target
from nkieval.perf.costs import Cost, cost_of, dep_latency, matmul_flops
from nkieval.perf.params import load_params

P1 = load_params(get_target("trn1"))
P3 = load_params(get_target("trn3"))


def _cycles(rec, p, clock_ghz: float) -> float:
    cost, has_rule = cost_of(rec, p)
    assert has_rule
    return cost.occ * clock_ghz


def _unary(opcode: str, engine: str, n: int, dtype: str = "float32", target: str = "trn1", **attrs):
    b = TraceBuilder(target)
    src, dst = b.alloc("sbuf", (128, n), dtype), b.alloc("sbuf", (128, n), dtype)
    return b.rec(opcode, engine, [b.op(dst, "dst", "w"), b.op(src, "data", "r")], **attrs)


def _binary(opcode: str, engine: str, n: int, dtype: str = "float32", **attrs):
    b = TraceBuilder("trn1")
    x, y, z = (b.alloc("sbuf", (128, n), dtype) for _ in range(3))
    return b.rec(opcode, engine, [b.op(z, "dst", "w"), b.op(x, "data0", "r"), b.op(y, "data1", "r")], **attrs)


@pytest.mark.parametrize("n,cycles", [(100, 164), (576, 640), (1, 128)])
def test_activation_reduce_is_max_min_ii_n_plus_min_ii(n: int, cycles: int) -> None:
    """max(64, N) + 64: 100 -> 164, 576 -> 640 (sums whose bits overlap: not an OR), 1 -> 128."""
    assert _cycles(_unary("activation_reduce", "scalar", n), P1, P1.act_clock_ghz) == pytest.approx(cycles)


def test_scalar_tensor_tensor_subtract_multiply_bf16_is_n_for_even_n_only() -> None:
    """B1I: N for bf16 subtract-then-multiply with N even, else 2N."""
    stt = lambda n, dt="bfloat16": _binary("scalar_tensor_tensor", "vector", n, dt, op0="subtract",  # noqa: E731
                                           op1="multiply")
    assert _cycles(stt(512), P1, P1.dve_clock_ghz) == pytest.approx(512)
    assert _cycles(stt(511), P1, P1.dve_clock_ghz) == pytest.approx(1022)
    assert _cycles(stt(512, "float32"), P1, P1.dve_clock_ghz) == pytest.approx(1024)


def test_dynamic_copy_is_max_600_n() -> None:
    """B1I tensor_copy_dynamic_src: max(MIN_II_DYNAMIC ~ 600, N)."""
    assert _cycles(_unary("tensor_copy_dynamic_src", "vector", 1000), P1, P1.dve_clock_ghz) == pytest.approx(1000)
    assert _cycles(_unary("tensor_copy_dynamic_src", "vector", 10), P1, P1.dve_clock_ghz) == pytest.approx(600)


def test_two_inputs_on_gpsimd_take_two_streams() -> None:
    """A two-input op off the Vector engine streams both inputs: 2N (B1I general rule)."""
    assert _cycles(_binary("tensor_tensor", "gpsimd", 512, op="maximum"), P1, P1.pool_clock_ghz) == pytest.approx(1024)


def test_only_the_scalar_engine_has_the_trn3_scalar_2x_mode() -> None:
    """A4: the ScalarE 2x bf16 tensor_copy is new in NeuronCore-v4; GpSimd has no performance mode."""
    s = cost_of(_unary("tensor_copy", "scalar", 1024, "bfloat16", "trn3"), P3)[0]
    assert s.mode == "2x" and s.occ * P3.act_clock_ghz == pytest.approx(512)
    g = cost_of(_unary("tensor_copy", "gpsimd", 1024, "bfloat16", "trn3"), P3)[0]
    assert g.mode is None and g.occ * P3.pool_clock_ghz == pytest.approx(1024)


def test_a_tensor_engine_transpose_counts_its_flops_a_vector_one_none() -> None:
    """A PE transpose of [128, 128] is a matmul against the identity: 2 x 128 x 128 x 128 FLOPs."""
    raw, adjusted, is_transpose = matmul_flops(_unary("nc_transpose", "tensor", 128, "bfloat16"), P1)
    assert (raw, adjusted, is_transpose) == (2 * 128 ** 3, 2 * 128 ** 3, True)
    assert matmul_flops(_unary("nc_transpose", "vector", 128, "bfloat16"), P1) == (0.0, 0.0, False)


@pytest.mark.parametrize("engine,clock,overhead", [("vector", "dve_clock_ghz", 100), ("scalar", "act_clock_ghz", 200)])
def test_a_dependent_waits_the_dependency_overhead_after_a_one_element_instruction(engine, clock, overhead) -> None:
    """The first results leave MIN_II + overhead cycles after the start; a 64-cycle instruction has taken 64 of
    them, so the dependent waits ``overhead`` cycles more."""
    f = getattr(P1, clock)
    assert dep_latency(P1, engine, 64 / f) == pytest.approx(overhead / f)
    assert dep_latency(P1, engine, 10_000 / f) == 0.0
    assert dep_latency(P1, "tensor", 1.0) == 0.0


def test_cost_is_slotted() -> None:
    """The scheduler keeps one Cost per trace record: slotted, it carries no per-instance dict."""
    assert not hasattr(Cost(1.0), "__dict__")


@pytest.mark.parametrize("n,cycles", [(512, 512), (10, 64)])
def test_an_opcode_without_a_rule_costs_max_min_ii_n(n: int, cycles: int) -> None:
    """The generic one-input rule for unmodelled opcodes: max(MIN_II, N), N the input's elements per partition."""
    cost, has_rule = cost_of(_unary("no_such_instruction", "vector", n), P1)
    assert not has_rule and cost.occ * P1.dve_clock_ghz == pytest.approx(cycles)
