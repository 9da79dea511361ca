"""Unit tests of each cost formula (research note perf-model.md §2.3–2.6)."""

from __future__ import annotations

import pytest
from perf_helpers import TraceBuilder

from nkieval.hardware import get_target
from nkieval.perf.costs import COST_RULES, cost_of, matmul_flops
from nkieval.perf.dma import plan_dma
from nkieval.perf.params import PerfParamError, load_params

P1 = load_params(get_target("trn1"))
P2 = load_params(get_target("trn2"))


def cyc(rec, p, engine_clock):
    cost, ok = cost_of(rec, p)
    assert ok
    return cost.occ * engine_clock


def _unary(opcode: str, engine: str, n: int, dtype: str = "float32", target: str = "trn1", **attrs):
    b = TraceBuilder(target)
    src = b.alloc("sbuf", (128, n), dtype)
    dst = b.alloc("sbuf", (128, n), dtype)
    return b.rec(opcode, engine, [b.op(dst, "dst", "w"), b.op(src, "data", "r")], **attrs)


@pytest.mark.parametrize("n,expect", [(1, 64), (64, 64), (512, 512), (4096, 4096)])
def test_one_input_is_max_min_ii_n(n: int, expect: int) -> None:
    assert cyc(_unary("tensor_scalar", "vector", n), P1, P1.dve_clock_ghz) == pytest.approx(expect)
    assert cyc(_unary("activation", "scalar", n), P1, P1.act_clock_ghz) == pytest.approx(expect)


def test_activation_reduce_adds_min_ii() -> None:
    assert cyc(_unary("activation_reduce", "scalar", 512), P1, P1.act_clock_ghz) == pytest.approx(512 + 64)


def test_tensor_tensor_two_inputs_cost_2n_unless_psum_or_fast_bf16() -> None:
    b = TraceBuilder()
    x, y, z = (b.alloc("sbuf", (128, 512)) for _ in range(3))
    r = b.rec("tensor_tensor", "vector", [b.op(z, "dst", "w"), b.op(x, "data1", "r"), b.op(y, "data2", "r")], op="add")
    assert cyc(r, P1, P1.dve_clock_ghz) == pytest.approx(1024)
    ps = b.alloc("psum", (128, 512))
    r = b.rec("tensor_tensor", "vector", [b.op(z, "dst", "w"), b.op(x, "data1", "r"), b.op(ps, "data2", "r")], op="add")
    assert cyc(r, P1, P1.dve_clock_ghz) == pytest.approx(512)
    xb, yb, zb = (b.alloc("sbuf", (128, 512), "bfloat16") for _ in range(3))
    r = b.rec("tensor_tensor", "vector", [b.op(zb, "dst", "w"), b.op(xb, "data1", "r"), b.op(yb, "data2", "r")],
              op="multiply")
    assert cyc(r, P1, P1.dve_clock_ghz) == pytest.approx(512)
    r = b.rec("tensor_tensor", "vector", [b.op(zb, "dst", "w"), b.op(xb, "data1", "r"), b.op(yb, "data2", "r")],
              op="maximum")
    assert cyc(r, P1, P1.dve_clock_ghz) == pytest.approx(1024)


def test_stride_penalty_doubles_cost() -> None:
    b = TraceBuilder()
    src = b.alloc("sbuf", (128, 4096))
    dst = b.alloc("sbuf", (128, 512))
    r = b.rec("tensor_copy", "vector", [b.op(dst, "dst", "w"), b.op(src, "src", "r", cols=(0, 4096), stride=8)])
    assert cyc(r, P1, P1.dve_clock_ghz) == pytest.approx(2 * 512)


def test_trn2_vector_perf_modes() -> None:
    r = _unary("tensor_copy", "vector", 2048, "bfloat16", "trn2")
    cost, _ = cost_of(r, P2)
    assert cost.mode == "4x" and cost.occ * P2.dve_clock_ghz == pytest.approx(512)
    r32 = _unary("tensor_copy", "vector", 2048, "float32", "trn2")
    cost32, _ = cost_of(r32, P2)
    assert cost32.mode is None and cost32.occ * P2.dve_clock_ghz == pytest.approx(2048)
    # trn1 has no perf modes
    assert cost_of(_unary("tensor_copy", "vector", 2048, "bfloat16"), P1)[0].mode is None


def test_tensor_reduce_bf16_add_is_half() -> None:
    b = TraceBuilder()
    src = b.alloc("sbuf", (128, 1024), "bfloat16")
    dst = b.alloc("sbuf", (128, 1), "bfloat16")
    r = b.rec("tensor_reduce", "vector", [b.op(dst, "dst", "w"), b.op(src, "data", "r")], op="add")
    assert cyc(r, P1, P1.dve_clock_ghz) == pytest.approx(512)


def test_memset_reciprocal_iota() -> None:
    b = TraceBuilder()
    t = b.alloc("sbuf", (128, 1024), "bfloat16")
    assert cyc(b.rec("memset", "vector", [b.op(t, "dst", "w")], value=0.0), P1, P1.dve_clock_ghz) == 512
    assert cyc(b.rec("memset", "vector", [b.op(t, "dst", "w")], value=1.0), P1, P1.dve_clock_ghz) == 1024
    assert cyc(_unary("reciprocal", "vector", 100), P1, P1.dve_clock_ghz) == pytest.approx(800)
    g = b.alloc("sbuf", (128, 256), "int32")
    assert cyc(b.rec("iota", "gpsimd", [b.op(g, "dst", "w")]), P1, P1.pool_clock_ghz) == pytest.approx(150 + 256)


def _matmul(k: int, m: int, n: int, dtype: str = "bfloat16", target: str = "trn1", **attrs):
    b = TraceBuilder(target)
    st = b.alloc("sbuf", (k, m), dtype)
    mv = b.alloc("sbuf", (k, n), dtype)
    ps = b.alloc("psum", (m, n))
    return b.rec("nc_matmul", "tensor", [b.op(ps, "dst", "w"), b.op(st, "stationary", "r"), b.op(mv, "moving", "r")],
                 K=k, M=m, N=n, perf_mode=attrs.pop("perf_mode", "none"), **attrs)


def test_matmul_moving_free_size_and_fp32_factor() -> None:
    f = P1.pe_clock_ghz
    assert cyc(_matmul(128, 128, 512), P1, f) == pytest.approx(512)
    assert cyc(_matmul(128, 128, 512, "float32"), P1, f) == pytest.approx(4 * 512)
    # short moving: bounded below by min(64, M_stationary) / MM_INIT
    assert cyc(_matmul(128, 128, 1), P1, f) == pytest.approx(64)
    assert cyc(_matmul(128, 1, 128), P1, f) == pytest.approx(128)


def test_matmul_flops_and_fp8_double_row_accounting() -> None:
    raw, adj, tr = matmul_flops(_matmul(128, 128, 512), P1)
    assert raw == 2 * 128 * 128 * 512 and adj == raw and not tr
    raw32, adj32, _ = matmul_flops(_matmul(128, 128, 512, "float32"), P1)
    assert adj32 == 4 * raw32
    r = _matmul(256, 128, 512, "float8_e4m3", "trn2", perf_mode="double_row")
    raw8, adj8, _ = matmul_flops(r, P2)
    assert raw8 == 2 * 256 * 128 * 512 and adj8 == raw8 * 0.5
    # double_row contracts K=256 in the time of a K=128 BF16 matmul
    assert cost_of(r, P2)[0].occ == pytest.approx(cost_of(_matmul(128, 128, 512, target="trn2"), P2)[0].occ)


def test_dma_descriptor_efficiency_and_split() -> None:
    b = TraceBuilder()
    big = b.alloc("hbm", (128, 8192), "bfloat16")
    t1 = b.alloc("sbuf", (128, 128), "bfloat16")
    t2 = b.alloc("sbuf", (128, 2048), "bfloat16")
    t3 = b.alloc("sbuf", (128, 8192), "bfloat16")
    r1 = b.rec("dma_copy", "dma", [b.op(t1, "dst", "w"), b.op(big, "src", "r", cols=(0, 128))])
    r2 = b.rec("dma_copy", "dma", [b.op(t2, "dst", "w"), b.op(big, "src", "r", cols=(0, 2048))])
    r3 = b.rec("dma_copy", "dma", [b.op(t3, "dst", "w"), b.op(big, "src", "r")])
    p1, p2, p3 = plan_dma(r1, P1), plan_dma(r2, P1), plan_dma(r3, P1)
    assert p1.engines == p2.engines == 16
    assert p1.descriptor_bytes == 256 and p2.descriptor_bytes == 4096
    eff = lambda p: p.bytes / 16 / P1.dma_engine_bw_bytes_per_ns / p.service_ns  # noqa: E731
    assert eff(p1) < 0.35 < 0.65 < eff(p2) < eff(p3) and eff(p3) > 0.8
    assert p1.hbm_read == 128 * 128 * 2 and p1.sbuf_write == p1.hbm_read


def test_dma_transpose_runs_slower_on_trn2() -> None:
    b = TraceBuilder("trn2")
    src = b.alloc("hbm", (128, 128), "bfloat16")
    dst = b.alloc("sbuf", (128, 128), "bfloat16")
    plain = b.rec("dma_copy", "dma", [b.op(dst, "dst", "w"), b.op(src, "src", "r")])
    tr = b.rec("dma_transpose", "dma", [b.op(dst, "dst", "w"), b.op(src, "src", "r")])
    assert plan_dma(tr, P2).service_ns > plan_dma(plain, P2).service_ns


def test_dma_transpose_costs_the_documented_fraction_of_the_copy_throughput() -> None:
    """A3: DMA transpose HBM->SBUF reaches up to 90 % of the DMA throughput, SBUF->SBUF 50 %: a large transpose
    takes about 1/0.9 (1/0.5) of the plain copy's bandwidth time, not one descriptor per element (which made a
    [128, 4096] bf16 transpose hundreds of times slower than the copy)."""
    b = TraceBuilder("trn2")
    src = b.alloc("hbm", (128, 4096), "bfloat16")
    on_chip = b.alloc("sbuf", (128, 4096), "bfloat16")
    dst = b.alloc("sbuf", (128, 4096), "bfloat16")
    for s, eff in ((src, 0.9), (on_chip, 0.5)):
        plain = plan_dma(b.rec("dma_copy", "dma", [b.op(dst, "dst", "w"), b.op(s, "src", "r")]), P2)
        tr = plan_dma(b.rec("dma_transpose", "dma", [b.op(dst, "dst", "w"), b.op(s, "src", "r")]), P2)
        fixed = P2.dma_engine_fixed_ns
        ratio = (tr.service_ns - fixed) / (plain.service_ns - fixed)
        assert ratio == pytest.approx(1 / eff, rel=1e-6), (s, ratio)


def test_unknown_opcode_uses_fallback_and_is_flagged() -> None:
    assert "no_such_instruction" not in COST_RULES
    r = _unary("no_such_instruction", "vector", 512)
    cost, ok = cost_of(r, P1)
    assert not ok and cost.occ > 0


def test_param_overrides_are_checked_and_recorded() -> None:
    p = load_params(get_target("trn1"), {"dma_fixed_ns": 1.0})
    assert p.dma_fixed_ns == 1.0 and p.sources["dma_fixed_ns"].status == "override"
    with pytest.raises(PerfParamError, match="unknown performance parameter 'nope'"):
        load_params(get_target("trn1"), {"nope": 1})
    with pytest.raises(PerfParamError, match="non-negative"):
        load_params(get_target("trn1"), {"dma_fixed_ns": -5})


def test_every_target_has_every_parameter_with_a_source() -> None:
    for t in ("trn1", "trn2", "trn3"):
        p = load_params(get_target(t))
        for s in p.sources.values():
            assert s.source and s.status in ("documented", "derived", "assumed", "fitted")


def test_mx_matmul_and_quantize_mx_have_cost_rules_and_count_their_flops(monkeypatch) -> None:
    """Trn3: nc_matmul_mx contracts 4 x partitions in the time of a BF16 matmul of the same free sizes and counts
    2·K·M·N FLOPs (adjusted x0.25); quantize_mx takes N/4 Vector cycles. Run through the simulator."""
    import ml_dtypes
    import nki
    import nki.isa as nisa
    import nki.language as nl

    @nki.jit
    def mx(x, y):  # x [128, 4*M], y [128, 4*N] bf16
        k, m4 = x.shape
        n4 = y.shape[1]
        a = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        b = nl.ndarray(y.shape, dtype=y.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=x)
        nisa.dma_copy(dst=b, src=y)
        qa = nl.ndarray((k, m4 // 4), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        qb = nl.ndarray((k, n4 // 4), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        sa = nl.ndarray((k, m4 // 4), dtype=nl.float8_e8m0fnu, buffer=nl.sbuf)
        sb = nl.ndarray((k, n4 // 4), dtype=nl.float8_e8m0fnu, buffer=nl.sbuf)
        nisa.quantize_mx(dst=qa, src=a, dst_scale=sa)
        nisa.quantize_mx(dst=qb, src=b, dst_scale=sb)
        d = nl.ndarray((m4 // 4, n4 // 4), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul_mx(dst=d, stationary=qa, moving=qb, stationary_scale=sa, moving_scale=sb)
        out = nl.ndarray((m4 // 4, n4 // 4), dtype=nl.float32, buffer=nl.shared_hbm)
        r = nl.ndarray((m4 // 4, n4 // 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=r, src=d)
        nisa.dma_copy(dst=out, src=r)
        return out

    import numpy as np

    rng = np.random.default_rng(0)
    x = rng.standard_normal((128, 512)).astype(ml_dtypes.bfloat16)
    y = rng.standard_normal((128, 2048)).astype(ml_dtypes.bfloat16)
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn3")  # MX is Trn3-only
    mx(x, y)
    tr = nki.last_result().trace
    p3 = load_params(get_target("trn3"))
    recs = {r.opcode: r for r in tr.records}
    mm, q = recs["nc_matmul_mx"], [r for r in tr.records if r.opcode == "quantize_mx"]
    assert cost_of(mm, p3)[1] and all(cost_of(r, p3)[1] for r in q)
    # one packed column per cycle: N = 512 moving columns, as a BF16 matmul with moving free size 512
    assert cost_of(mm, p3)[0].occ * p3.pe_clock_ghz == pytest.approx(512 + p3.mm_instruction_overhead_cycles)
    raw, adj, is_t = matmul_flops(mm, p3)
    assert (raw, adj, is_t) == (2.0 * 512 * 128 * 512, 2.0 * 512 * 128 * 512 * 0.25, False)
    assert [round(cost_of(r, p3)[0].occ * p3.dve_clock_ghz) for r in q] == [128, 512]  # 512 / 4, 2048 / 4
