"""A run's time and memory budgets (``SimOptions.time_limit_s``, ``SimOptions.max_bytes``), and warnings kept on
the trace only (``SimOptions.emit_warnings``).

The judge replays a candidate's recorded program in its own process (tests/review/test_executor.py), where no
child can be killed: a run that goes on too long or holds too much must stop with a specific rule, at once.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

import nkieval.frontends

nkieval.frontends.install(force=True)

import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

from nkieval.sim.errors import NkiValidationError  # noqa: E402
from nkieval.sim.options import SimOptions  # noqa: E402
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
