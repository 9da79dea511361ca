"""An LNC-2 launch (two programs as threads) and a concurrent Beta-1 grid give the same outputs, warnings and trace
on every run of a race-free kernel, whatever the thread timing (issue 31; nkieval.sim.turns).

The runs force frequent thread switches (``sys.setswitchinterval``): before the programs took turns, the
whole-trace digests of the first kernel differed between runs of one process (the shared-HBM tensors were
recorded under whichever program reached them first, and the two programs' records, allocation ids and warnings
interleaved by thread timing)."""

import hashlib
import json
import sys
import time

import neuronxcc.nki as b1nki
import neuronxcc.nki.language as b1nl
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from nkieval.sim.errors import NkiValidationError
from nkieval.sim.runner import run_kernel

RUNS = 8
# (the first kernel reads an unwritten tile on purpose: its warnings are part of what must be the same every run)
pytestmark = pytest.mark.filterwarnings("ignore:.*before anything wrote it")


def _shared_scratch(x, w):
    """Each program: its half of ``x`` through a two-step PSUM accumulation and an activation, tile by tile, into a
    shared-HBM scratch; a barrier; then its half of the scratch plus the other program's half into ``out``. An SBUF
    tile read before anything wrote it (a warning per program), and a sendrecv swap of one tile."""
    R, C = x.shape
    pid = nl.program_id(0)
    half = R // 2
    scratch = nl.ndarray((R, C), dtype=nl.float32, buffer=nl.shared_hbm)
    out = nl.ndarray((R, C), dtype=nl.float32, buffer=nl.shared_hbm)
    swapped = nl.ndarray((2, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    K = w.shape[0]
    wt = nl.ndarray(w.shape, dtype=w.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=wt, src=w)
    garbage = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
    junk = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=junk, src=garbage)  # (uninitialized read: warns, and is never stored)
    for r in range(pid * half, (pid + 1) * half, 128):
        for c in range(0, C, 128):
            xt = nl.ndarray((K, 128), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=xt, src=x[r:r + 128, c:c + 128])
            ps = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=ps, stationary=wt[0:K // 2, :], moving=xt[0:K // 2, :])
            nisa.nc_matmul(dst=ps, stationary=wt[K // 2:K, :], moving=xt[K // 2:K, :])
            st = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=st, op=nl.exp, data=ps, scale=0.01)
            nisa.dma_copy(dst=scratch[r:r + 128, c:c + 128], src=st)
    mine = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=mine, src=x[pid * half:pid * half + 128, 0:64])
    theirs = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.sendrecv(src=mine, dst=theirs, send_to_rank=1 - pid, recv_from_rank=1 - pid, pipe_id=0)
    nisa.dma_copy(dst=swapped[pid], src=theirs)
    nisa.core_barrier(scratch, (0, 1))
    other = 1 - pid
    for i, r in enumerate(range(pid * half, (pid + 1) * half, 128)):
        ro = other * half + i * 128
        a = nl.ndarray((128, C), dtype=nl.float32, buffer=nl.sbuf)
        b = nl.ndarray((128, C), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=scratch[r:r + 128, :])
        nisa.dma_copy(dst=b, src=scratch[ro:ro + 128, :])
        s = nl.ndarray((128, C), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=s, data1=a, data2=b, op=nl.add)
        nisa.dma_copy(dst=out[r:r + 128, :], src=s)
    return out, swapped


def _digests(result):
    out = result.outputs
    h = hashlib.sha256()
    for o in out if isinstance(out, tuple | list) else (out,):
        h.update(np.ascontiguousarray(o).tobytes())
    return (h.hexdigest(), json.dumps(result.trace.warnings, sort_keys=True),
            hashlib.sha256(result.trace.to_json().encode()).hexdigest())


@pytest.fixture
def frequent_switches():
    """Threads switch every microsecond (CPython's default is 5 ms), so thread timing varies from run to run."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(old)


def test_a_race_free_lnc2_kernel_gives_the_same_outputs_warnings_and_trace_every_run(frequent_switches):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((512, 256)).astype(np.float32)
    w = (rng.standard_normal((128, 128)) / 16).astype(np.float32)
    runs = [run_kernel(_shared_scratch, (x, w), lnc=2, target="trn2") for _ in range(RUNS)]
    first = runs[0]
    # the kernel's result (an independent check: NumPy, not the simulator's own output)
    scratch = np.empty_like(x)
    for r in range(0, 512, 128):
        for c in range(0, 256, 128):  # nc_matmul: dst = stationary.T @ moving, contracting the partitions
            scratch[r:r + 128, c:c + 128] = np.exp(0.01 * (w.T @ x[r:r + 128, c:c + 128]))
    want = scratch + np.concatenate([scratch[256:], scratch[:256]])
    np.testing.assert_allclose(first.outputs[0], want, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(first.outputs[1], np.stack([x[256:384, :64], x[0:128, :64]]))
    assert sorted(w["program"] for w in first.trace.warnings if w["rule"] == "uninitialized") == [0, 1]
    assert len({_digests(r) for r in runs}) == 1
    # the schedule: program 0 runs first, so it makes the shared-HBM tensors
    made = [a for a in first.trace.allocations.values() if a.buffer == "hbm" and not a.kernel_arg]
    assert [a.program for a in made] == [0, 0, 0]


def _turn_order(log):
    def kernel(x):
        pid = nl.program_id(0)
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        log.append((pid, "start"))
        t = nl.ndarray((1, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[pid:pid + 1, :])
        nisa.dma_copy(dst=out[pid:pid + 1, :], src=t)
        nisa.core_barrier(out, (0, 1))
        log.append((pid, "after barrier"))
        return out

    return kernel


def test_programs_take_turns_at_each_shared_memory_access_and_wait(frequent_switches):
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    for _ in range(RUNS):
        log = []
        np.testing.assert_array_equal(run_kernel(_turn_order(log), (x,), lnc=2, target="trn2").outputs, x)
        # program 0 hands over at its first DMA (program 1 starts), they alternate DMA by DMA; program 0 reaches
        # the barrier first and waits; program 1 arrives, passes it and ends; then program 0 goes on
        assert log == [(0, "start"), (1, "start"), (1, "after barrier"), (0, "after barrier")]


def _deadlock(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((1, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[0:1, :])
    if nl.program_id(0) == 0:
        nisa.core_barrier(out, (0, 1))
    else:
        nisa.sendrecv(src=t, dst=t, send_to_rank=0, recv_from_rank=0, pipe_id=0)
    return out


def test_a_deadlock_is_reported_by_the_same_core_without_a_timer():
    x = np.zeros((2, 4), np.float32)
    for _ in range(3):
        start = time.monotonic()
        with pytest.raises(NkiValidationError, match=r"core 0 waited at core_barrier .* a deadlock"):
            run_kernel(_deadlock, (x,), lnc=2, target="trn2")
        # known after one round of turns (the threads' old polling waited a 5 s grace period first)
        assert time.monotonic() - start < 4.0


@b1nki.jit(mode="simulation")
def _b1_grid_all_reduce(x):
    """A [4] grid run concurrently (all_reduce is a rendezvous): each program's row, scaled, summed over the grid,
    stored into its own row of a shared-HBM output."""
    out = b1nl.ndarray(x.shape, dtype=x.dtype, buffer=b1nl.shared_hbm)
    i = b1nl.program_id(0)
    t = b1nl.multiply(b1nl.load(x[i]), 2.0)
    for _ in range(3):
        t = b1nl.all_reduce(t, op=np.add, program_axes=0)
    b1nl.store(out[i], t)
    return out


def test_a_concurrent_beta1_grid_gives_the_same_outputs_and_trace_every_run(frequent_switches):
    from nkieval.frontends.beta1.launch import last_result

    x = np.random.default_rng(2).standard_normal((4, 16, 32)).astype(np.float32)
    digests = set()
    for _ in range(RUNS):
        out = _b1_grid_all_reduce[4](x)
        np.testing.assert_allclose(out, np.broadcast_to(2.0 * 4 * 4 * x.sum(0), x.shape), rtol=1e-5)
        digests.add(_digests(last_result()))
    assert len(digests) == 1
