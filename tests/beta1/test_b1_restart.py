"""An eager Beta-1 launch that declares a very large on-chip tensor restarts as a recorded program, replayed.

The replay holds the tensor by live region (``nkieval.sim.program.regions``); what the caller sees is what the
eager run gives: the outputs, the trace's instructions, the warnings (once each), the kernel's own errors. A
kernel the recording refuses, or one whose returned tile a recording would bake in, runs eagerly after all.
"""

from __future__ import annotations

import warnings

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np
import pytest

from nkieval.frontends.beta1 import restart
from nkieval.sim.errors import NkiValidationError
from nkieval.sim.program import replay as replay_module

BLOCKS = 64  # a [64 blocks, 128 partitions, 512] fp32 SBUF tensor: 16 MiB declared


def k_blocks(x):
    """Each block of a large SBUF block tensor loaded from ``x`` and scaled by its number, then stored."""
    out = nl.ndarray((BLOCKS, 128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
    big = nl.ndarray((BLOCKS, nl.par_dim(128), 512), dtype=x.dtype, buffer=nl.sbuf)
    for b in nl.affine_range(BLOCKS):
        big[b] = nl.multiply(nl.load(x), float(b))
        nl.store(out[b], big[b])
    return out


def k_reads_a_value(x):
    """Branches on a loaded value in Python: a recording cannot run it (an eager run can)."""
    out = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
    big = nl.ndarray((BLOCKS, nl.par_dim(128), 512), dtype=x.dtype, buffer=nl.sbuf)
    big[0] = nl.load(x)
    if np.asarray(big[0])[0, 0] > 0:
        nl.store(out, big[0])
    else:
        nl.store(out, nl.negative(big[0]))
    return out


def k_false_hint(x):
    """A matmul whose moving operand is promised to hold only zeros and ones: only the values can refute it, so
    the replay raises where the eager run does (rule onezero-hint)."""
    out = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
    big = nl.ndarray((BLOCKS, nl.par_dim(128), 512), dtype=x.dtype, buffer=nl.sbuf)
    a = nl.load(x[:, 0:128])
    b = nl.load(x)
    big[0] = nl.copy(nisa.nc_matmul(a, b, is_moving_onezero=True))
    nl.store(out, big[0])
    return out


@pytest.fixture
def low_threshold(monkeypatch):
    """Restart from 8 MiB, and count the replays."""
    monkeypatch.setenv(restart.ENV, str(8 << 20))
    calls = []
    real = replay_module.replay_program

    def counted(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(replay_module, "replay_program", counted)
    import nkieval.sim.program as program_pkg

    monkeypatch.setattr(program_pkg, "replay_program", counted)
    return calls


def _x():
    return np.random.default_rng(2).standard_normal((128, 512), dtype=np.float32)


def _run(kernel, x):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = nki.simulate_kernel(nki.jit(kernel), x)
    trace = [(r.opcode, r.line) for r in nki.last_result().trace.records]
    return out, trace, sorted({str(w.message) for w in seen})


def test_a_large_declaration_replays_with_the_eager_runs_results(low_threshold, monkeypatch):
    x = _x()
    out, trace, said = _run(k_blocks, x)
    assert len(low_threshold) == 1  # restarted as a replay
    monkeypatch.setenv(restart.ENV, "0")  # never restart: the eager run
    eager, eager_trace, eager_said = _run(k_blocks, x)
    assert len(low_threshold) == 1
    np.testing.assert_array_equal(out, eager)
    np.testing.assert_allclose(out, x[None] * np.arange(BLOCKS, dtype=np.float32)[:, None, None], rtol=1e-6)
    assert trace == eager_trace
    assert said == eager_said


def test_below_the_threshold_the_launch_stays_eager(low_threshold, monkeypatch):
    monkeypatch.setenv(restart.ENV, str(64 << 20))
    _run(k_blocks, _x())
    assert low_threshold == []


def test_a_kernel_the_recording_refuses_runs_eagerly_after_all(low_threshold):
    x = np.abs(_x()) + 1
    out, _, _ = _run(k_reads_a_value, x)
    np.testing.assert_array_equal(out, x)
    assert low_threshold == []  # (the recording refused it: no replay)


def test_the_kernels_own_error_comes_from_the_replay_as_eagerly(low_threshold, monkeypatch):
    with pytest.raises(NkiValidationError) as replayed:
        nki.simulate_kernel(nki.jit(k_false_hint), _x())
    assert len(low_threshold) == 1
    monkeypatch.setenv(restart.ENV, "0")
    with pytest.raises(NkiValidationError) as eager:
        nki.simulate_kernel(nki.jit(k_false_hint), _x())
    assert replayed.value.rule == eager.value.rule == "onezero-hint"


def k_zeroes_first(x):
    """Zeroes a smaller tile (under the threshold) before the large declaration that restarts it."""
    out = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
    first = nl.zeros((8, nl.par_dim(128), 512), dtype=x.dtype, buffer=nl.sbuf, name="abandoned_first")
    big = nl.ndarray((BLOCKS, nl.par_dim(128), 512), dtype=x.dtype, buffer=nl.sbuf)
    big[0] = nl.add(nl.load(x), first[0])
    nl.store(out, big[0])
    return out


def test_the_abandoned_eager_runs_tensors_are_gone_before_the_recording(low_threshold, monkeypatch):
    """The eager start's tiles are held in reference cycles: they are collected before the recording starts, not
    held through it (the large kernels' eager starts hold a GB or more)."""
    import gc

    import nkieval.sim.program as program_pkg
    from nkieval.sim.memory import Allocation

    alive_at_record: list[int] = []
    real = program_pkg.record_program

    def watched(*a, **k):
        alive_at_record.append(sum(1 for o in gc.get_objects()
                                   if type(o) is Allocation and o.name == "abandoned_first"))
        return real(*a, **k)

    monkeypatch.setattr(program_pkg, "record_program", watched)
    x = _x()
    out, _, _ = _run(k_zeroes_first, x)
    assert len(low_threshold) == 1  # restarted as a replay
    np.testing.assert_array_equal(out, x)
    assert alive_at_record == [0]


def k_psum_accumulators(x):
    """A PSUM block tensor zeroed up front (``nl.zeros``, what compiler dumps declare), each block accumulated into
    by two matmuls far later and copied out: its regions are parked from the zeroing to their first matmul."""
    out = nl.ndarray((BLOCKS, 128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
    acc = nl.zeros((BLOCKS, nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum, lazy_initialization=True)
    a = nl.load(x[:, 0:128])
    b = nl.load(x)
    for i in nl.affine_range(BLOCKS):
        acc[i] += nisa.nc_matmul(a, b)
        acc[i] += nisa.nc_matmul(a, nl.multiply(b, float(i)))
        nl.store(out[i], nl.copy(acc[i]))
    return out


def test_zeroed_psum_accumulators_replay_as_eagerly_with_their_regions_parked(low_threshold, monkeypatch):
    from nkieval.sim.program import regions

    parked: list[int] = []
    real = regions.RegionPlan.park

    def counted(plan, step):
        before = int(plan.parked.sum())
        real(plan, step)
        parked.append(int(plan.parked.sum()) - before)

    monkeypatch.setattr(regions.RegionPlan, "park", counted)
    x = _x()
    out, trace, said = _run(k_psum_accumulators, x)
    assert len(low_threshold) == 1  # restarted as a replay
    assert sum(parked) > 0  # (zeroed regions gave their pages back until their first matmul)
    monkeypatch.setenv(restart.ENV, "0")
    eager, eager_trace, eager_said = _run(k_psum_accumulators, x)
    np.testing.assert_array_equal(out, eager)
    mm = x[:, 0:128].T @ x
    np.testing.assert_allclose(out, mm[None] * (1 + np.arange(BLOCKS, dtype=np.float32))[:, None, None],
                               rtol=1e-4, atol=1e-3)
    assert trace == eager_trace
    assert said == eager_said
