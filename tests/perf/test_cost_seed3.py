"""Cost formulas where mutation testing (seed 3) found them unchecked (issue #25, item 5). Expectations are worked
by hand from the B1I/A2/A3 formulas and the targets' documented facts (trn1: PE 128 x 128 at 2.8 GHz, Vector
1.12 GHz; trn2: Tensor engine 2.4 GHz, a 10-cycle per-instruction overhead, fp32 transposes 2x faster, a 256-cycle
PE pipeline latency)."""

from __future__ import annotations

import pytest
from perf_helpers import TraceBuilder

from nkieval.hardware import get_target
from nkieval.perf.costs import cost_of, pe_peak_flops_per_ns
from nkieval.perf.params import load_params

P1 = load_params(get_target("trn1"))
P2 = load_params(get_target("trn2"))


def test_the_pe_peak_is_two_flops_per_cell_per_cycle():
    """2 x 128 x 128 x 2.8 GHz = 91,750.4 FLOP/ns on trn1 (91.75 TFLOP/s BF16 dense)."""
    assert pe_peak_flops_per_ns(P1) == pytest.approx(91750.4)


@pytest.mark.parametrize("shape,dtype,occ_ns", [((128, 512), "float32", 74 / 2.4), ((32, 48), "bfloat16", 58 / 2.4)])
def test_a_tensor_engine_transpose_costs_max_p_min_64_f(shape, dtype, occ_ns):
    """trn2: [128, 512] fp32 is max(128, min(64, 512)) = 128 cycles, halved for fp32 (64), + 10 = 74 cycles;
    [32, 48] bf16 is max(32, 48) + 10 = 58 cycles; at 2.4 GHz. Latency 256 / 2.4 ns."""
    b = TraceBuilder("trn2")
    src, dst = b.alloc("sbuf", shape, dtype), b.alloc("psum", (shape[1], shape[0]), dtype)
    cost, has_rule = cost_of(b.rec("nc_transpose", "tensor", [b.op(dst, "dst", "w"), b.op(src, "data", "r")]), P2)
    assert has_rule
    assert cost.occ == pytest.approx(occ_ns) and cost.lat == pytest.approx(256 / 2.4)


def _matmul(**attrs):
    b = TraceBuilder("trn2")
    st, mv, out = b.alloc("sbuf", (128, 128), "bfloat16"), b.alloc("sbuf", (128, 512), "bfloat16"), \
        b.alloc("psum", (128, 512), "float32")
    return b.rec("nc_matmul", "tensor", [b.op(out, "dst", "w"), b.op(st, "stationary", "r"),
                                         b.op(mv, "moving", "r")], N=512, M=128, **attrs)


def test_only_a_double_row_matmul_is_labelled_double_row():
    assert cost_of(_matmul(), P2)[0].mode is None
    assert cost_of(_matmul(perf_mode="double_row"), P2)[0].mode == "double_row"


@pytest.mark.parametrize("n,cycles", [(514, 514), (513, 1026)])
def test_scalar_tensor_tensor_fast_mode_needs_an_even_n_not_a_multiple_of_four(n, cycles):
    """B1I: N for bf16 subtract-then-multiply with N even (514 = 2 mod 4 included), else 2N (513)."""
    b = TraceBuilder("trn1")
    x, y, z = (b.alloc("sbuf", (128, n), "bfloat16") for _ in range(3))
    rec = b.rec("scalar_tensor_tensor", "vector", [b.op(z, "dst", "w"), b.op(x, "data0", "r"), b.op(y, "data1", "r")],
                op0="subtract", op1="multiply")
    assert cost_of(rec, P1)[0].occ * P1.dve_clock_ghz == pytest.approx(cycles)
