"""``SchedulePolicy(engine_order="backfill")``: compute instructions may run in idle gaps their engine left.

* an independent instruction issued after a stalled one runs in the gap before it (program order: after it);
* on random overlapping traces (both targets, modes, two cores, rotation depths) every dependency between
  two records touching overlapping bytes of one allocation still holds, no two instructions of one engine
  track overlap, and each track's waits add up to its idle time;
* where the program order is already the best order the schedule is the program-order one, bit for bit, the
  Tensor engine's dI/dt throttling included (the booked-interval rule is PeThrottle's rule);
* the booking structure (``TrackBook``) finds the earliest fitting gap and forgets old intervals.
"""

from __future__ import annotations

from collections import defaultdict
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from perf_helpers import TraceBuilder
from sched_regression import digest, matmul, overlaps, pipeline, reference_box

from nkieval.hardware import get_target
from nkieval.perf.params import load_params
from nkieval.perf.schedule import COMPUTE_ENGINES, ScheduleError, SchedulePolicy, TrackBook, schedule
from nkieval.sim.trace import Trace

BACKFILL = SchedulePolicy(engine_order="backfill")


def _overlap(a: tuple, b: tuple) -> bool:
    if a[0] == b[0]:
        return a[1] < b[2] and b[1] < a[2] and a[3] < b[4] and b[3] < a[4]

    def flat(x):
        return (x[1] * x[0] + x[3], (x[2] - 1) * x[0] + x[4]) if x[0] > 0 else (x[3], x[4])

    (a0, a1), (b0, b1) = flat(a), flat(b)
    return a0 < b1 and b0 < a1


def _intersection(a: tuple, b: tuple) -> tuple | None:
    if a[0] != b[0]:
        return None
    box = (a[0], max(a[1], b[1]), min(a[2], b[2]), max(a[3], b[3]), min(a[4], b[4]))
    return box if box[1] < box[2] and box[3] < box[4] else None


def _check_dependencies(trace: Trace, s) -> int:
    """Every later record that reads or writes bytes an earlier one wrote, or writes bytes it read after they
    were written (bytes never written carry no value, so reading them orders nothing), starts after the earlier
    one ended. Returns the number of such pairs checked."""
    by_alloc: dict[tuple, list[tuple[int, tuple, bool, bool]]] = defaultdict(list)
    for i, rec in enumerate(trace.records):
        for o in rec.operands:
            # on-chip memory is each core's own: programs on two cores do not share it
            key = (o.alloc,) if o.buffer == "hbm" else (o.alloc, rec.program % s.cores)
            by_alloc[key].append((i, reference_box(o), "r" in o.mode, "w" in o.mode))
    pairs = 0
    for acc in by_alloc.values():
        for x, (i, bi, _ri, wi) in enumerate(acc):
            for j, bj, _rj, wj in acc[x + 1:]:
                if j == i or not (wi or wj) or not _overlap(bi, bj):
                    continue
                if not wi:  # a write after a read: only where the read bytes held a value written before it
                    inter = _intersection(bi, bj)
                    if inter is None or not any(k < i and wk and _overlap(bk, inter) for k, bk, _, wk in acc):
                        continue
                pairs += 1
                assert s.start[j] >= s.end[i] - 1e-6, (i, j, trace.records[i].opcode, trace.records[j].opcode)
    return pairs


def _check_tracks(s) -> None:
    """Instructions of one engine track never overlap; neither do those sharing a Trn1 port (Vector and GpSimd
    the SBUF port; Vector and Scalar the PSUM port, for instructions touching PSUM); waits add up to idle time."""
    per: dict[str, list[int]] = defaultdict(list)
    for i, t in enumerate(s.track):
        core, _, eng = t.rpartition("/")
        if eng in COMPUTE_ENGINES:
            per[t].append(i)
            if s.trace.target == "trn1" and eng in ("vector", "gpsimd"):
                per[core + "/port:sbuf"].append(i)
            if (s.trace.target == "trn1" and eng in ("vector", "scalar")
                    and any(o.buffer == "psum" for o in s.trace.records[i].operands)):
                per[core + "/port:psum"].append(i)
    for t, ids in per.items():
        ids.sort(key=lambda i: (s.start[i], s.end[i]))
        for a, b in pairwise(ids):
            assert s.start[b] >= s.end[a] - 1e-6, (t, a, b)
        assert all(s.wait[i] >= 0 for i in ids)
        if t.rpartition("/")[2] in ("tensor", "vector", "scalar") and s.trace.num_programs == 1:  # no DMA issue there
            idle = max(s.end[i] for i in ids) - sum(s.end[i] - s.start[i] for i in ids)
            assert sum(s.wait[i] for i in ids) == pytest.approx(idle, rel=1e-9, abs=1e-6), t


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10**6), mode=st.sampled_from(["compiler", "physical"]),
       target=st.sampled_from(["trn1", "trn2"]), two_cores=st.booleans(), depth=st.sampled_from([None, 1]))
def test_backfill_keeps_every_dependency_and_engine_exclusive(seed: int, mode: str, target: str, two_cores: bool,
                                                            depth: int | None) -> None:
    trace = overlaps(target, seed, n=150, two_cores=two_cores)
    p = load_params(get_target(target))
    s = schedule(trace, p, SchedulePolicy(mode=mode, rotation_depth=depth, engine_order="backfill"))
    assert _check_dependencies(trace, s) > 0
    _check_tracks(s)
    # never later than program order by more than rounding: backfilling only ever takes earlier idle time ...
    # ... per instruction it may be later (a gap taken earlier by another), but the trace as a whole is not slower
    prog = schedule(trace, p, SchedulePolicy(mode=mode, rotation_depth=depth))
    assert s.total_time <= prog.total_time * 1.05


def test_an_independent_instruction_runs_in_the_gap_before_a_stalled_one() -> None:
    b = TraceBuilder("trn2")
    src = b.alloc("hbm", (128, 8192))
    big = b.alloc("sbuf", (128, 8192))
    x = b.alloc("sbuf", (128, 512))
    y = b.alloc("sbuf", (128, 512))
    b.rec("dma_copy", "dma", [b.op(big, "dst", "w"), b.op(src, "src", "r")], line=1)
    b.rec("tensor_copy", "vector", [b.op(x, "dst", "w"), b.op(big, "data", "r", cols=(0, 512))], line=2)  # waits
    b.rec("memset", "vector", [b.op(y, "dst", "w")], line=3, value=0.0)  # independent
    p = load_params(get_target("trn2"))
    prog = schedule(b.trace, p)
    fill = schedule(b.trace, p, BACKFILL)
    assert prog.start[2] >= prog.end[1]  # program order: behind the stalled copy
    assert fill.start[2] == 0.0 and fill.end[2] <= fill.start[1]  # backfill: in the gap before it
    assert fill.start[1] == prog.start[1] and fill.reason[1] == "dep:dma"
    # the copy's wait is the idle time left between the memset and it
    assert fill.wait[1] == pytest.approx(fill.start[1] - fill.end[2])
    assert fill.total_time <= prog.total_time


@pytest.mark.parametrize("target", ["trn1", "trn2"])
@pytest.mark.parametrize("make", [lambda t: pipeline(t, 40), lambda t: pipeline(t, 40, slots=2)])
def test_program_order_traces_schedule_as_in_program_order(make, target: str) -> None:
    trace = make(target)
    p = load_params(get_target(target))
    assert digest(schedule(trace, p, BACKFILL)) == digest(schedule(trace, p))


def test_throttle_on_booked_intervals_equals_the_in_order_throttle() -> None:
    trace = matmul("trn2")
    p = load_params(get_target("trn2"))
    prog, fill = schedule(trace, p), schedule(trace, p, BACKFILL)
    assert prog.throttled  # the trace exercises throttling
    assert fill.throttled == prog.throttled
    assert digest(fill) == digest(prog)


def test_track_book_takes_the_earliest_fitting_gap_and_forgets_old_intervals() -> None:
    b = TrackBook(keep=4)
    b.book(0, 10.0, 20.0, 1)
    b.book(1, 30.0, 40.0, 2)
    assert b.gap(0.0, 5.0) == (0.0, 0)
    assert b.gap(0.0, 15.0) == (40.0, 2)  # neither [0, 10) nor [20, 30) holds 15 ns
    assert b.gap(12.0, 10.0) == (20.0, 1)
    assert b.gap(25.0, 10.0) == (40.0, 2)
    assert b.before(1) == (20.0, 1) and b.before(0) == (0.0, -1)
    for k in range(3):
        st, j = b.gap(50.0, 1.0)
        b.book(j, st, st + 1.0, 3 + k)
    assert b.floor == 40.0 and len(b.starts) == 3  # the oldest half forgotten
    assert b.gap(0.0, 1.0)[0] >= 40.0


def test_bad_engine_order_is_refused() -> None:
    with pytest.raises(ScheduleError, match="engine_order"):
        SchedulePolicy(engine_order="anywhere")


def test_cli_profile_takes_the_engine_order(tmp_path) -> None:
    import json

    from click.testing import CliRunner

    from nkieval.cli import main
    from nkieval.examples import kernels as ex

    js = tmp_path / "e.json"
    res = CliRunner().invoke(main, ["profile", f"{ex.__file__}::tiled_add", "--target", "trn2", "--input", "256x256",
                                    "--input", "256x256", "--engine-order", "backfill", "--json", str(js)])
    assert res.exit_code == 0, res.output
    assert "engine order backfill" in res.output
    est = json.loads(js.read_text())
    assert est["engine_order"] == "backfill"
    assert est["uncertainty"]["assumptions"][0].startswith("engine_order=backfill")


def test_back_to_back_matmuls_continue_one_ramp_as_in_program_order() -> None:
    """Tensor instructions after idle time run under one dI/dt ramp: every one of them is stretched, less and
    less, exactly as the in-order throttle (PeThrottle) stretches them."""
    b = TraceBuilder("trn2")
    src = b.alloc("hbm", (128, 512), "bfloat16")
    a = b.alloc("sbuf", (128, 512), "bfloat16")
    b.rec("dma_copy", "dma", [b.op(a, "dst", "w"), b.op(src, "src", "r")], line=1)
    for k in range(12):
        acc = b.alloc("psum", (128, 512))
        b.rec("nc_matmul", "tensor", [b.op(acc, "dst", "w"), b.op(a, "stationary", "r", cols=(0, 128)),
                                      b.op(a, "moving", "r")], line=2 + k)
    p = load_params(get_target("trn2"))
    prog, fill = schedule(b.trace, p), schedule(b.trace, p, BACKFILL)
    stretched = [prog.throttled.get(i, 0.0) for i in range(1, 13)]
    assert all(x > 0 for x in stretched) and stretched == sorted(stretched, reverse=True)
    assert fill.throttled == prog.throttled and digest(fill) == digest(prog)
