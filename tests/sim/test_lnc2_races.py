"""The two programs of an LNC-2 pair take turns at every shared-memory access, as cores running at the same time
would order them, and an access that races the other program's is reported: a store over its stores or reads, a
read of its stores (nkieval.sim.turns, nkieval.sim.races; issue 31).

Found on public code: a test kernel whose two programs both clear the whole shared output and then store their
own rows, with no barrier between. Run one program to its end before the other, program 1's clearing wiped
program 0's rows; on hardware both clearings land first (the cores run side by side), and only timing says so."""

from pathlib import Path

import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from nkieval.sim.program import ArgSpec, record_program, replay_program
from nkieval.sim.runner import run_kernel

pytestmark = pytest.mark.filterwarnings("ignore:.*[(]a race;")


def _clear_then_store(barrier: bool, same_values: bool = False):
    def kernel(x):
        rows, cols = x.shape
        pid = nl.program_id(0)
        out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
        zeros = nl.ndarray((128, cols), dtype=x.dtype, buffer=nl.sbuf)
        nisa.memset(zeros, 0)
        for i in range(rows // 128):  # each program clears the whole output
            nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=zeros)
        if barrier:
            nisa.core_barrier(out, (0, 1))
        half = rows // 2
        for r in range(pid * half, (pid + 1) * half, 128):
            t = nl.ndarray((128, cols), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x[r:r + 128, :])
            if same_values:  # stores zeros over the other program's zeros: the same values, no race
                nisa.memset(t, 0)
            nisa.dma_copy(dst=out[r:r + 128, :], src=t)
        return out

    return kernel


def _line_of(text: str) -> int:
    return next(i for i, line in enumerate(Path(__file__).read_text().splitlines(), 1) if text in line)


def _races(result):
    return [w for w in result.trace.warnings if w["rule"] == "race"]


X = np.random.default_rng(3).standard_normal((512, 64)).astype(np.float32)


def test_both_programs_clearing_before_storing_keeps_both_halves_and_reports_the_race():
    r = run_kernel(_clear_then_store(barrier=False), (X,), lnc=2, target="trn2")
    np.testing.assert_array_equal(r.outputs, X)  # (run one program after the other: program 0's half was zeros)
    races = _races(r)
    assert len(races) == 1, r.trace.warnings
    assert races[0]["message"].startswith("dma_copy: program 0 stores to 8192 element(s)")
    assert "program 1 stored other values" in races[0]["message"]
    assert "core_barrier" in races[0]["message"]
    # the first row store (128 x 64), not the clearing (the same values: zeros on zeros)
    assert races[0]["location"].endswith(f":{_line_of('nisa.dma_copy(dst=out[r:r + 128, :], src=t)')}")


def test_a_barrier_between_the_clearing_and_the_stores_is_no_race():
    r = run_kernel(_clear_then_store(barrier=True), (X,), lnc=2, target="trn2")
    np.testing.assert_array_equal(r.outputs, X)
    assert _races(r) == []


def test_the_same_values_stored_by_both_programs_are_no_race():
    r = run_kernel(_clear_then_store(barrier=False, same_values=True), (X,), lnc=2, target="trn2")
    np.testing.assert_array_equal(r.outputs, np.zeros_like(X))
    assert _races(r) == []


def test_a_replayed_program_takes_the_same_turns_and_reports_the_same_race():
    kernel = _clear_then_store(barrier=False)
    rec = record_program(kernel, [ArgSpec(X.shape, "float32")], {}, target="trn2", lnc=2)
    replay = replay_program(rec.program, [X.copy()], {}, target="trn2")
    np.testing.assert_array_equal(replay.outputs, X)
    assert [w["message"] for w in _races(replay)] == \
        [w["message"] for w in _races(run_kernel(kernel, (X,), lnc=2, target="trn2"))]


def _exchange(x, barrier=True):
    """Each program stores a row of the shared scratch, waits for the other at a barrier and reads the other's row:
    stores to different elements and a read after the barrier, race-free (without the barrier the read races the
    other program's store)."""
    pid = nl.program_id(0)
    scratch = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((1, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[pid:pid + 1, :])
    nisa.dma_copy(dst=scratch[pid:pid + 1, :], src=t)
    if barrier:
        nisa.core_barrier(scratch, (0, 1))
    u = nl.ndarray((1, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=u, src=scratch[1 - pid:2 - pid, :])
    nisa.dma_copy(dst=out[pid:pid + 1, :], src=u)
    return out


@pytest.mark.parametrize("target", ["trn2", "trn3"])
def test_race_free_exchange_through_shared_memory(target):
    x = np.arange(16, dtype=np.float32).reshape(2, 8)
    r = run_kernel(_exchange, (x,), lnc=2, target=target)
    np.testing.assert_array_equal(r.outputs, x[::-1])
    assert _races(r) == []


def test_reading_what_the_other_program_stored_without_a_barrier_is_a_race():
    x = np.arange(16, dtype=np.float32).reshape(2, 8)
    r = run_kernel(_exchange, (x,), {"barrier": False}, lnc=2, target="trn2")
    np.testing.assert_array_equal(r.outputs, x[::-1])  # (this order: both stores before either read)
    races = _races(r)
    assert len(races) == 1, r.trace.warnings
    assert races[0]["message"].startswith("dma_copy: program 0 reads 8 element(s) of the shared tensor made at ")
    assert "program 1 stored to" in races[0]["message"] and "may come before the store" in races[0]["message"]
    assert races[0]["location"].endswith(f":{_line_of('src=scratch[1 - pid:2 - pid, :])')}")


def _iterated_exchange(x, second_barrier=False):
    """Each program stores its row (scaled by the step) to the shared scratch, waits at a barrier, and reads the
    other's row, twice. Without a second barrier the next step's store may land before the other program has read
    the previous step's row (a store after a read, not ordered)."""
    pid = nl.program_id(0)
    scratch = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    out = nl.ndarray((2, 2, x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
    for step in range(2):
        t = nl.ndarray((1, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[pid:pid + 1, :])
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=float(step + 1))
        nisa.dma_copy(dst=scratch[pid:pid + 1, :], src=t)  # this step's row
        nisa.core_barrier(scratch, (0, 1))
        u = nl.ndarray((1, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=u, src=scratch[1 - pid:2 - pid, :])
        nisa.dma_copy(dst=out[step, pid:pid + 1, :], src=u)
        if second_barrier:
            nisa.core_barrier(scratch, (0, 1))
    return out


def test_a_store_over_what_the_other_program_read_without_a_barrier_is_a_race():
    x = np.arange(16, dtype=np.float32).reshape(2, 8)
    r = run_kernel(_iterated_exchange, (x,), lnc=2, target="trn2")
    np.testing.assert_array_equal(r.outputs, np.stack([x[::-1], 2 * x[::-1]]))  # (this order: each read first)
    races = _races(r)
    assert len(races) == 1, r.trace.warnings
    # (program 1's second store comes after program 0's read of its first: the programs alternate at each DMA)
    assert races[0]["message"].startswith("dma_copy: program 1 stores to 8 element(s) of the shared tensor made at ")
    assert "that program 0 read" in races[0]["message"] and "may land before that read" in races[0]["message"]
    assert races[0]["location"].endswith(f":{_line_of('src=t)  # this step')}")


def test_a_second_barrier_orders_the_read_before_the_next_store():
    x = np.arange(16, dtype=np.float32).reshape(2, 8)
    r = run_kernel(_iterated_exchange, (x,), {"second_barrier": True}, lnc=2, target="trn2")
    np.testing.assert_array_equal(r.outputs, np.stack([x[::-1], 2 * x[::-1]]))
    assert _races(r) == []
