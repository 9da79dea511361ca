"""Trn2/Trn3 dI/dt throttling of the Tensor engine (Neuron Explorer glossary): after idle the engine restarts
at 50 % and ramps to full over ~3 us; it re-engages when its utilization over ~3 us falls below 50 %."""

from __future__ import annotations

import pytest
from perf_helpers import TraceBuilder

from nkieval.hardware import get_target
from nkieval.perf import estimate
from nkieval.perf.params import load_params
from nkieval.perf.schedule import PeThrottle, ramp_time, schedule


def _integral(u0: float, t: float, f0: float, ramp: float, steps: int = 200_000) -> float:
    """Work done in ``t`` ns from ``u0`` ns into the ramp (midpoint rule)."""
    h = t / steps
    return sum(min(1.0, f0 + (1 - f0) * (u0 + (k + 0.5) * h) / ramp) for k in range(steps)) * h


@pytest.mark.parametrize("u0, work", [(0.0, 100.0), (0.0, 2250.0), (1000.0, 300.0), (2900.0, 800.0), (0.0, 5000.0)])
def test_ramp_time_does_the_work_at_the_ramping_rate(u0, work):
    t = ramp_time(u0, work, 0.5, 3000.0)
    assert _integral(u0, t, 0.5, 3000.0) == pytest.approx(work, rel=1e-6)


def test_ramp_time_edges():
    assert ramp_time(0.0, 2250.0, 0.5, 3000.0) == pytest.approx(3000.0)  # the whole ramp: 3 us for 2.25 us of work
    assert ramp_time(0.0, 10.0, 0.5, 3000.0) == pytest.approx(20.0, rel=5e-3)  # at the start: half rate
    assert ramp_time(3000.0, 500.0, 0.5, 3000.0) == 500.0  # ramp done
    assert ramp_time(0.0, 500.0, 1.0, 3000.0) == 500.0  # no throttling


def test_the_throttle_re_engages_only_after_a_gap_with_a_quiet_window():
    th = PeThrottle(0.5, 3000.0, 3000.0, 0.5)
    d = th.run(0.0, 100.0)
    assert d == pytest.approx(ramp_time(0.0, 100.0, 0.5, 3000.0))
    t = d
    for _ in range(40):  # back to back: one ramp, finished after 3 us
        t += th.run(t, 100.0)
    assert th.since == 0.0
    assert th.run(t, 100.0) == 100.0
    t += 100.0
    # a short gap while the window was busy: no new ramp
    assert th.run(t + 200.0, 100.0) == 100.0
    t += 300.0
    # 5 us idle: the window is empty, a new ramp begins
    assert th.run(t + 5000.0, 100.0) == pytest.approx(ramp_time(0.0, 100.0, 0.5, 3000.0))
    assert th.since == t + 5000.0


def _matmuls(target: str, groups: list[int], gap_ns: float = 0.0) -> TraceBuilder:
    """``groups[g]`` back-to-back matmuls on preloaded tiles, the groups separated by a ScalarE instruction chain
    that the next group waits for (an idle gap on the Tensor engine)."""
    b = TraceBuilder(target)
    st = b.alloc("sbuf", (128, 128), "bfloat16")
    mv = b.alloc("sbuf", (128, 512), "bfloat16")
    ps = b.alloc("psum", (128, 512))
    gate = b.alloc("sbuf", (128, 16384), "bfloat16")
    for g, n in enumerate(groups):
        if g:  # a long ScalarE instruction writing the stationary tile: the next group waits on it
            b.rec("activation", "scalar", [b.op(st, "dst", "w"), b.op(gate, "data", "r")], op="copy")
        for _ in range(n):
            b.rec("nc_matmul", "tensor", [b.op(ps, "dst", "w"), b.op(st, "stationary", "r"), b.op(mv, "moving", "r")],
                  K=128, M=128, N=512, perf_mode="none")
    return b


def test_a_burst_after_idle_pays_one_ramp_on_trn2_and_none_on_trn1():
    p2 = load_params(get_target("trn2"))
    s = schedule(_matmuls("trn2", [64]).trace, p2)
    mm = [i for i, r in enumerate(s.trace.records) if r.opcode == "nc_matmul"]
    occ_full = schedule(_matmuls("trn2", [64]).trace, load_params(get_target("trn2"),
                                                                    {"pe_throttle_start_fraction": 1.0})).occ[mm[0]]
    assert s.occ[mm[0]] == pytest.approx(ramp_time(0.0, occ_full, 0.5, 3000.0))
    assert s.occ[mm[0]] > 1.85 * occ_full  # (the rate rises 7 % during a 217 ns matmul)
    assert s.occ[mm[-1]] == pytest.approx(occ_full)  # past the 3 us ramp
    # the whole ramp costs 3 us - 2.25 us of full-rate work = 750 ns
    assert sum(s.throttled.values()) == pytest.approx(750.0, rel=1e-6)
    assert load_params(get_target("trn1")).pe_throttle_start_fraction == 1.0
    assert not schedule(_matmuls("trn1", [64]).trace, load_params(get_target("trn1"))).throttled


def test_each_idle_gap_restarts_the_ramp_and_the_metric_reports_it():
    one = estimate(_matmuls("trn2", [64]).trace, "trn2")
    three = estimate(_matmuls("trn2", [64, 64, 64]).trace, "trn2")
    assert one.summary["tensor_throttled_time"] == pytest.approx(750e-9, rel=1e-6)
    # each ScalarE gate leaves the Tensor engine idle for longer than the 3 us window: three ramps
    assert three.summary["tensor_throttled_time"] == pytest.approx(3 * 750e-9, rel=1e-6)
    assert 0 < three.summary["tensor_throttled_time_percent"] < three.summary["tensor_active_time_percent"]
    off = estimate(_matmuls("trn2", [64, 64, 64]).trace, "trn2", params={"pe_throttle_start_fraction": 1.0})
    assert off.summary["tensor_throttled_time"] == 0.0
    assert three.total_time_ns == pytest.approx(off.total_time_ns + 3 * 750.0, rel=1e-6)


def test_the_text_summary_and_the_timeline_show_the_throttled_time():
    from nkieval.perf.timeline import text_summary, to_perfetto

    est = estimate(_matmuls("trn2", [64, 64]).trace, "trn2")
    assert "tensor throttled (dI/dt) 1.50 us" in text_summary(est)
    slices = [e for e in to_perfetto(est)["traceEvents"] if e.get("ph") == "X" and e["name"] == "nc_matmul"]
    assert slices[0]["args"]["throttled_ns"] > 0 and "throttled_ns" not in slices[-1]["args"]
    assert "throttled" not in text_summary(estimate(_matmuls("trn1", [64, 64]).trace, "trn1"))
