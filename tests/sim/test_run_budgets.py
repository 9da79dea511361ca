"""A run's time and memory budgets (``SimOptions.time_limit_s``, ``SimOptions.max_bytes``), warnings kept on the
trace only (``SimOptions.emit_warnings``), and the judge's executor that relies on them
(:mod:`nkieval.review.executor`).

The judge replays a candidate's recorded program in its own process, where no child can be killed: a run that
goes on too long or holds too much must stop with a specific rule, at once, and the case gets the status a killed
child got (``timeout``, ``memory-limit``); a replay within its budgets gives the outputs, the unwritten-element
masks and, for the evidence case only, the trace as the judge's own object.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

import nkieval.frontends

nkieval.frontends.install(force=True)

import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

from nkieval.review.executor import PROGRAMS, replay_case  # noqa: E402
from nkieval.review.runs import CaseJob, SandboxLimits  # noqa: E402
from nkieval.sim.errors import NkiValidationError  # noqa: E402
from nkieval.sim.options import SimOptions  # noqa: E402
from nkieval.sim.program import ArgSpec, record_program  # noqa: E402
from nkieval.sim.runner import run_kernel  # noqa: E402


def copies(a, n_iter):
    """``n_iter`` round trips of a [128, 512] fp32 tile: one 256 KiB tile live at a time."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for _ in nl.affine_range(n_iter):
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        nisa.dma_copy(dst=out, src=t)
    return out


def hoards(a, n_tiles):
    """``n_tiles`` tiles kept alive at once (a list holds them)."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    kept = []
    for _ in range(n_tiles):
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        kept.append(t)
    nisa.dma_copy(dst=out, src=kept[-1])
    return out


A = np.arange(128 * 512, dtype=np.float32).reshape(128, 512)
TILE = A.nbytes  # 256 KiB


def test_a_run_past_its_time_limit_stops_with_time_budget():
    opts = SimOptions(time_limit_s=0.05, capacity_check="off")
    t0 = time.perf_counter()
    with pytest.raises(NkiValidationError) as ei:
        run_kernel(copies, [A], {"n_iter": 100_000}, target="trn2", options=opts)
    assert ei.value.rule == "time-budget"
    assert time.perf_counter() - t0 < 5  # (100,000 iterations would take minutes)


def test_a_run_within_its_time_limit_is_untouched():
    got = run_kernel(copies, [A], {"n_iter": 3}, target="trn2", options=SimOptions(time_limit_s=60.0))
    assert np.array_equal(np.asarray(got.outputs), A)


def test_freed_tiles_do_not_count_against_the_memory_budget():
    # input copy + output + one live tile at a time: about 3 tiles, however many iterations
    opts = SimOptions(max_bytes=5 * TILE)
    got = run_kernel(copies, [A], {"n_iter": 20}, target="trn2", options=opts)
    assert np.array_equal(np.asarray(got.outputs), A)


def test_live_tiles_past_the_memory_budget_stop_with_memory_budget():
    opts = SimOptions(max_bytes=5 * TILE, capacity_check="off")
    with pytest.raises(NkiValidationError) as ei:
        run_kernel(hoards, [A], {"n_tiles": 8}, target="trn2", options=opts)
    assert ei.value.rule == "memory-budget" and "budget" in str(ei.value)
    run_kernel(hoards, [A], {"n_tiles": 3}, target="trn2", options=opts)  # (within it: runs)


def test_budget_options_are_checked():
    for bad in ({"time_limit_s": 0}, {"time_limit_s": True}, {"max_bytes": 0}, {"max_bytes": 1.5}):
        with pytest.raises(ValueError):
            SimOptions(**bad)


def reads_unwritten(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_warnings_can_stay_on_the_trace_only():
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        quiet = run_kernel(reads_unwritten, [A], {}, target="trn2", options=SimOptions(emit_warnings=False))
        assert not [w for w in seen if "before anything wrote it" in str(w.message)]
        loud = run_kernel(reads_unwritten, [A], {}, target="trn2")
        assert [w for w in seen if "before anything wrote it" in str(w.message)]
    assert [w["rule"] for w in quiet.trace.warnings] == [w["rule"] for w in loud.trace.warnings] == ["uninitialized"]


def _program(fn, params):
    rec = record_program(fn, [ArgSpec(A.shape, "float32")], params, target="trn2",
                         options=SimOptions(capacity_check="off"))
    return PROGRAMS.get(rec.program.to_json())


def test_a_replay_past_the_case_s_time_limit_is_a_timeout():
    params = {"n_iter": 20_000}
    run = replay_case(_program(copies, params), CaseJob("c", {"a": A}, params, 1), "trn2",
                      SandboxLimits(timeout_s=0.05))
    assert run.status == "timeout" and run.error["rule"] == "time-budget" and not run.outputs


def test_a_replay_past_the_case_s_memory_limit_is_a_memory_limit():
    params = {"n_tiles": 8}  # 8 live 256 KiB tiles, past 1 MiB
    run = replay_case(_program(hoards, params), CaseJob("c", {"a": A}, params, 1), "trn2",
                      SandboxLimits(memory_mb=1))
    assert run.status == "memory-limit" and run.error["rule"] == "memory-budget" and not run.outputs


def test_a_replay_within_its_budgets_gives_outputs_masks_and_the_evidence_trace_only_when_asked():
    params = {"n_iter": 2}
    prog = _program(copies, params)
    plain = replay_case(prog, CaseJob("c", {"a": A}, params, 1, want_trace=False), "trn2", SandboxLimits())
    assert plain.status == "ok" and np.array_equal(plain.outputs[0], A) and plain.unwritten == [None]
    assert not plain.traced
    traced = replay_case(prog, CaseJob("c", {"a": A}, params, 1, want_trace=True), "trn2", SandboxLimits())
    assert traced.traced and traced.parsed_trace(10) is traced.trace
    assert [r.opcode for r in traced.trace.records].count("dma_copy") == 4


LONG = """
import nki.isa as nisa
import nki.language as nl


def long_copy(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    for _ in nl.affine_range(20000):
        nisa.dma_copy(dst=t, src=a)
    nisa.dma_copy(dst=out, src=t)
    return out
"""


def test_a_case_whose_replay_outlasts_its_time_limit_is_a_timeout_and_the_shapes_after_it_are_skipped():
    from nkieval.review.sandbox import run_candidate

    # the tracer has the start-up allowance to record; the replay has the case's 0.1 s (20,000 copies take seconds)
    # (shapes run smallest first: 256, then 512)
    cases = [CaseJob(f"c{n}", {"a": np.ones((128, n), np.float32)}, {}, 1) for n in (512, 256)]
    runs = run_candidate(LONG, "long_copy", cases, target="trn2",
                         limits=SandboxLimits(timeout_s=0.1, startup_s=60))
    assert [r.status for r in runs] == ["not-run", "timeout"]
    assert runs[1].error["rule"] == "time-budget" and "c256" in runs[0].error["message"]


def test_replays_run_with_a_child_s_collector_thresholds_and_restore_the_judge_s():
    import gc

    from nkieval.review.child import GC_THRESHOLDS
    from nkieval.review.executor import _collector_as_in_a_child

    before = gc.get_threshold()
    with _collector_as_in_a_child():
        with _collector_as_in_a_child():  # (a concurrent replay)
            assert gc.get_threshold()[:2] == GC_THRESHOLDS[:2] and gc.get_threshold()[2] >= GC_THRESHOLDS[2]
        assert gc.get_threshold()[:2] == GC_THRESHOLDS[:2]
    assert gc.get_threshold() == before


def test_replays_and_kernel_runs_that_end_in_any_order_restore_the_judge_s_thresholds():
    """A replay and a kernel run elsewhere (another thread's) overlap and end in the other order: the judge's own
    thresholds come back (two independent save-and-restore blocks would leave the replay's behind)."""
    import gc

    from nkieval.review.child import GC_THRESHOLDS
    from nkieval.review.executor import _collector_as_in_a_child
    from nkieval.sim.gc_pacing import FULL_EVERY, fewer_full_collections

    before = gc.get_threshold()
    replay, run = _collector_as_in_a_child(), fewer_full_collections()
    replay.__enter__()
    run.__enter__()
    assert gc.get_threshold() == (max(before[0], GC_THRESHOLDS[0]), max(before[1], GC_THRESHOLDS[1]),
                                  max(before[2], GC_THRESHOLDS[2], FULL_EVERY))
    replay.__exit__(None, None, None)
    assert gc.get_threshold() == (before[0], before[1], max(before[2], FULL_EVERY))
    run.__exit__(None, None, None)
    assert gc.get_threshold() == before
