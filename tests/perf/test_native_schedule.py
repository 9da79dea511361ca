"""The compiled scheduler loop (``nkieval.perf._schedule_c``) gives the Python loop's schedule, bit for bit.

Every output of ``schedule()`` is compared: per record start, end, occupancy, wait, reason, predecessor and
track, the DMA plans and engine slots, the issue occupancy, the Vector perf modes and the Tensor engine's
throttling. The traces cover both targets' rules (Trn1 shared ports, Trn2 dI/dt throttling), the three
policy modes, rotation depths, two cores, hwdge/swdge issue, mixed HBM row pitches, records writing one table
twice, a small DMA-pool memory (its trimming), and kernels run through the simulator.
"""

from __future__ import annotations

from array import array

import ml_dtypes
import nki
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from perf_helpers import TraceBuilder
from sched_regression import digest, matmul, overlaps, pipeline, same_record_overlaps

from nkieval.hardware import get_target
from nkieval.perf import schedule as sched_mod
from nkieval.perf.calibration import kernels as K
from nkieval.perf.params import load_params
from nkieval.perf.schedule import Schedule, SchedulePolicy, schedule
from nkieval.sim.trace import Trace

# without the built module these compare nothing; test_schedule_regression.py's
# test_the_compiled_loop_is_built fails then
pytestmark = pytest.mark.skipif(sched_mod._schedule_c is None, reason="nkieval.perf._schedule_c is not built")


def _outputs(s: Schedule) -> tuple:
    return (digest(s), s.total_time, sorted(s.dma.items()), sorted(s.perf_mode.items()), sorted(s.throttled.items()),
            list(s.issue_busy.items()), dict(s.unmodelled), s.cores, list(s.signature))


def _both(trace: Trace, target: str, policy: SchedulePolicy, params: dict | None = None) -> tuple[Schedule, Schedule]:
    p = load_params(get_target(target), params or {})
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sched_mod, "_NATIVE", True)
        native = schedule(trace, p, policy)
        mp.setattr(sched_mod, "_NATIVE", False)
        python = schedule(trace, p, policy)
    return native, python


def _assert_same(trace: Trace, target: str, policy: SchedulePolicy, params: dict | None = None) -> Schedule:
    native, python = _both(trace, target, policy, params)
    for i in range(len(python)):  # the first record that differs, for a readable failure
        got = (native.start[i], native.end[i], native.occ[i], native.wait[i], native.reason[i], native.pred[i],
               native.track[i])
        want = (python.start[i], python.end[i], python.occ[i], python.wait[i], python.reason[i], python.pred[i],
                python.track[i])
        assert got == want, f"record {i} ({trace.records[i].opcode} on {trace.records[i].engine})"
    assert _outputs(native) == _outputs(python)
    return python


def test_the_compiled_loop_runs_by_default() -> None:
    """``schedule`` takes the compiled loop unless it is switched off."""
    calls = []
    real = sched_mod._schedule_c.run

    class Spy:
        classify = staticmethod(sched_mod._schedule_c.classify)

        @staticmethod
        def run(*args):
            calls.append(1)
            return real(*args)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sched_mod, "_schedule_c", Spy)
        mp.setattr(sched_mod, "_NATIVE", True)
        schedule(pipeline("trn2", 4), load_params(get_target("trn2")))
        assert calls == [1]
        mp.setattr(sched_mod, "_NATIVE", False)
        schedule(pipeline("trn2", 4), load_params(get_target("trn2")))
        assert calls == [1]


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**6), mode=st.sampled_from(["compiler", "physical", "serial"]),
       target=st.sampled_from(["trn1", "trn2"]), two_cores=st.booleans(), depth=st.sampled_from([None, 1, 3]),
       throttle=st.booleans())
def test_random_overlapping_traces(seed: int, mode: str, target: str, two_cores: bool, depth: int | None,
                                   throttle: bool) -> None:
    params = None if throttle else {"pe_throttle_start_fraction": 1.0}
    _assert_same(overlaps(target, seed, n=150, two_cores=two_cores), target,
                 SchedulePolicy(mode=mode, rotation_depth=depth), params)


@pytest.mark.parametrize("target", ["trn1", "trn2"])
@pytest.mark.parametrize("policy", [SchedulePolicy(), SchedulePolicy(mode="physical"), SchedulePolicy(mode="serial"),
                                    SchedulePolicy(rotation_depth=1)])
@pytest.mark.parametrize("make", [lambda t: pipeline(t, 40), lambda t: pipeline(t, 40, slots=2), matmul,
                                  same_record_overlaps, lambda t: overlaps(t, 7, n=400, two_cores=True)])
def test_pipelines_and_matmuls(make, target: str, policy: SchedulePolicy) -> None:
    _assert_same(make(target), target, policy)


def test_a_trimmed_dma_pool_gives_the_same_schedule() -> None:
    """With a pool that remembers 4 intervals, both loops forget old intervals (trim) and agree."""
    trims = []
    real = sched_mod.DmaPool.trim

    def counting(self):
        trims.append(1)
        return real(self)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sched_mod, "_POOL_KEEP", 4)
        mp.setattr(sched_mod.DmaPool, "trim", counting)
        for seed in range(3):
            _assert_same(overlaps("trn2", seed, n=300), "trn2", SchedulePolicy())
            _assert_same(overlaps("trn1", seed, n=300, two_cores=True), "trn1", SchedulePolicy(mode="physical"))
    assert trims, "the pool never trimmed"


def test_a_trace_the_compiled_loop_does_not_know_falls_back_to_python() -> None:
    """An operand in a buffer the compiled loop has no table kind for: the Python loop schedules it."""
    b = TraceBuilder("trn2")
    t = b.alloc("sbuf", (128, 64))
    w = b.op(t, "dst", "w")
    w.buffer = "scratch"
    b.rec("memset", "vector", [w], value=0.0)
    b.rec("tensor_copy", "vector", [b.op(t, "dst", "w"), b.op(t, "data", "r")])
    called = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sched_mod, "_schedule_c", type("Spy", (), {"run": staticmethod(lambda *a: called.append(1)),
                                                              "classify": staticmethod(sched_mod._schedule_c.classify)}))
        mp.setattr(sched_mod, "_NATIVE", True)
        s = schedule(b.trace, load_params(get_target("trn2")))
    assert not called and len(s) == 2


def test_huge_addresses_fall_back_to_python() -> None:
    """Addresses beyond 64 bits (only a hostile trace has them) overflow the C loop's integers: the Python loop
    takes the trace."""
    b = TraceBuilder("trn1")
    h = b.alloc("hbm", (128, 64))
    t = b.alloc("sbuf", (128, 64))
    big = b.op(h, "dst", "w")
    big.addr_lo, big.addr_hi = 2**70, 2**70 + 64
    b.rec("dma_copy", "dma", [big, b.op(t, "src", "r")])
    b.rec("dma_copy", "dma", [b.op(t, "dst", "w"), b.op(h, "src", "r")])
    native, python = _both(b.trace, "trn1", SchedulePolicy())
    assert digest(native) == digest(python)


def test_malformed_arguments_raise_instead_of_crashing() -> None:
    """The C loop checks what schedule.py hands it: each corrupted argument raises, the process lives on."""
    c = sched_mod._schedule_c
    seen = []

    class Spy:
        classify = staticmethod(c.classify)

        @staticmethod
        def run(*args):
            seen.append(args)
            return c.run(*args)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sched_mod, "_schedule_c", Spy)
        mp.setattr(sched_mod, "_NATIVE", True)
        schedule(pipeline("trn2", 3), load_params(get_target("trn2")))
    records, cls_idx, classes, cfg, tracks, reasons, rot_tables, rot_allocs, written, outputs = seen[0]

    def call(**bad):
        args = dict(records=records, cls_idx=array("q", cls_idx), classes=list(classes), cfg=cfg, tracks=tracks,
                    reasons=reasons, rot_tables=rot_tables, rot_allocs=dict(rot_allocs), written=written,
                    outputs=outputs)
        args.update(bad)
        return c.run(*args.values())

    call()  # the intercepted arguments as they were: accepted
    out_of_range = array("q", cls_idx)
    out_of_range[0] = len(classes)
    op_beyond = list(classes)
    op_beyond[0] = (*classes[0][:11], ((99, 1, 0, 0, 1, 0, 0, 0),))
    for bad, err in [({"cls_idx": None}, TypeError), ({"cls_idx": out_of_range}, ValueError),
                     ({"cfg": cfg[:-1]}, ValueError), ({"classes": [(1, 2), *classes[1:]]}, TypeError),
                     ({"classes": op_beyond}, IndexError), ({"reasons": reasons[:-1]}, ValueError),
                     ({"outputs": outputs[:-1]}, ValueError), ({"rot_allocs": {1: (rot_tables + 5, 0, 0)}}, ValueError),
                     ({"tracks": (*tracks[:1], (10**6,) * len(tracks[1]), *tracks[2:])}, ValueError)]:
        with pytest.raises(err):
            call(**bad)


@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_simulated_kernels(target: str) -> None:
    """Traces of real kernels (our own calibration matmuls and an activation micro-kernel) through the simulator."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((512, 512), dtype=np.float32).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((512, 1024), dtype=np.float32).astype(ml_dtypes.bfloat16)
    x = rng.standard_normal((128, 512), dtype=np.float32)
    runs = [(K.mm_tiled, (a, b), {}), (K.mm_block_free, (a, b), {}),
            (K.mm_fully_blocked, (a, b), {"bm_tiles": 2, "bn_tiles": 2, "bk_tiles": 2}),
            (K.act_three_ops, (x,), {})]
    for kern, args, kw in runs:
        nki.simulate(kern, target=target)(*args, **kw)
        trace = nki.last_result().trace
        for policy in (SchedulePolicy(), SchedulePolicy(mode="physical")):
            _assert_same(trace, target, policy)


def test_operands_given_as_tuples_schedule_alike() -> None:
    """A trace whose records hold their operands in tuples (not lists): both loops take it, alike."""
    trace = overlaps("trn2", 3, n=120)
    for rec in trace.records:
        rec.operands = tuple(rec.operands)
    _assert_same(trace, "trn2", SchedulePolicy())


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10**6), target=st.sampled_from(["trn1", "trn2"]))
def test_access_spans_compiled_and_python_agree(seed: int, target: str) -> None:
    """Rotation's first/last access per on-chip allocation: the compiled pass gives the Python loop's dicts."""
    from nkieval.perf import rotation

    for tr in (overlaps(target, seed, n=200), pipeline(target, 12, slots=seed % 3)):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(rotation, "_NATIVE", True)
            native = rotation._access_spans(tr)
            mp.setattr(rotation, "_NATIVE", False)
            python = rotation._access_spans(tr)
        assert native == python and native[0]


def test_access_spans_of_huge_allocation_ids_fall_back_to_python() -> None:
    from dataclasses import replace

    from nkieval.perf import rotation

    tr = pipeline("trn2", 4)
    big = 2**40
    r = tr.records[0]
    tr.records[0] = replace(r, operands=[replace(o, alloc=big) if o.buffer != "hbm" else o for o in r.operands])
    first, last = rotation._access_spans(tr)
    assert first[big] == last[big] == 0
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(rotation, "_NATIVE", False)
        assert rotation._access_spans(tr) == (first, last)
