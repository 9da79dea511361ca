"""A replay holds a large on-chip tensor by live region: the same results, a fraction of the memory.

A kernel that declares a block tensor far larger than the chip and uses each block briefly (what compiler dumps
do) replays with each region of it written with sentinels just before its first use and handed back just after
its last: the outputs, the trace and an uninitialised read are what an eager run gives, and the replay's memory
is the live blocks', not the declaration's. A tensor used where its uses cannot be known before the run (inside a
device loop) is held whole, as before.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import nkieval.frontends

nkieval.frontends.install(force=True)

import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

from nkieval.sim import pages  # noqa: E402
from nkieval.sim.options import SimOptions  # noqa: E402
from nkieval.sim.program import (  # noqa: E402
    ArgSpec,
    Program,
    compile_program,
    record_program,
    regions,
    replay_program,
)
from nkieval.sim.runner import run_kernel  # noqa: E402

BLOCK = 1024  # fp32 elements per partition of one block: one page
BLOCKS = 64  # 128 partitions x 64 blocks x 4 KiB = 32 MiB of SBUF declared, over MIN_BYTES
OPTS = {"capacity_check": "warn"}


def k_blocks(x, skip=-1):
    """Each block of a large SBUF tensor written from ``x`` (times its number), then added into an accumulator;
    block ``skip`` is never written, so its read is an uninitialised one (NaN sentinels into the sum)."""
    out = nl.ndarray((128, BLOCK), dtype=nl.float32, buffer=nl.shared_hbm)
    big = nl.ndarray((128, BLOCKS * BLOCK), dtype=nl.float32, buffer=nl.sbuf)
    acc = nl.ndarray((128, BLOCK), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    t = nl.ndarray((128, BLOCK), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    for b in range(BLOCKS):
        blk = big[:, b * BLOCK:(b + 1) * BLOCK]
        if b != skip:
            nisa.tensor_scalar(dst=blk, data=t, op0=nl.multiply, operand0=float(b))
        nisa.tensor_tensor(dst=acc, data1=acc, data2=blk, op=nl.add)
    nisa.dma_copy(dst=out, src=acc)
    return out


def k_blocks_in_device_loop(x, n):
    """The large tensor written and read inside a device loop: its uses are not known before the run."""
    out = nl.ndarray((128, BLOCK), dtype=nl.float32, buffer=nl.shared_hbm)
    big = nl.ndarray((128, BLOCKS * BLOCK), dtype=nl.float32, buffer=nl.sbuf)
    cnt = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=cnt, src=n)
    reg = nisa.register_alloc(cnt)
    nisa.dma_copy(dst=big[:, 0:BLOCK], src=x)
    for _ in nl.dynamic_range(reg):
        nisa.tensor_scalar(dst=big[:, 0:BLOCK], data=big[:, 0:BLOCK], op0=nl.add, operand0=1.0)
    nisa.dma_copy(dst=out, src=big[:, 0:BLOCK])
    return out


def k_temporaries(x):
    """2,000 tiles of 256 KiB, each loaded, added into an accumulator and dropped."""
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    for i in range(2000):
        t = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[:, (i % 2) * 512:(i % 2 + 1) * 512])
        nisa.tensor_tensor(dst=acc, data1=acc, data2=t, op=nl.add)
    nisa.dma_copy(dst=out, src=acc)
    return out


PBLOCK = 512  # fp32 elements per partition of one PSUM block: one matmul's output
PBLOCKS = 128  # 128 partitions x 128 blocks x 2 KiB = 32 MiB of PSUM declared


def k_zeroed(x, w, skip=-1):
    """A large PSUM tensor zeroed block by block up front (what ``nl.zeros(..., buffer=nl.psum)`` does), each block
    then accumulated into by a matmul and added into an accumulator far later; block ``skip`` is never zeroed (its
    accumulation is onto an uninitialised accumulator)."""
    out = nl.ndarray((128, PBLOCK), dtype=nl.float32, buffer=nl.shared_hbm)
    big = nl.ndarray((128, PBLOCKS * PBLOCK), dtype=nl.float32, buffer=nl.psum)
    for b in range(PBLOCKS):
        if b != skip:
            nisa.memset(dst=big[:, b * PBLOCK:(b + 1) * PBLOCK], value=0.0)
    acc = nl.ndarray((128, PBLOCK), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    xt = nl.ndarray((128, PBLOCK), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=xt, src=x)
    wt = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=wt, src=w)
    for b in range(PBLOCKS):
        blk = big[:, b * PBLOCK:(b + 1) * PBLOCK]
        nisa.nc_matmul(dst=blk, stationary=wt, moving=xt, accumulate=True)
        nisa.tensor_tensor(dst=acc, data1=acc, data2=blk, op=nl.add)
    nisa.dma_copy(dst=out, src=acc)
    return out


def _record(fn, args, **kwargs):
    rec = record_program(fn, [ArgSpec(a.shape, a.dtype.name) for a in args], kwargs, target="trn2",
                         options=SimOptions.from_env(**OPTS))
    return Program.from_json(rec.program.to_json())


def _x():
    return np.random.default_rng(5).standard_normal((128, BLOCK), dtype=np.float32)


class _Live:
    """Counts the regions of planned allocations that are filled and not yet handed back, at its highest."""

    def __init__(self, monkeypatch):
        self.live = self.peak = self.filled = self.given = 0
        fill, give = regions.RegionPlan.fill, regions.RegionPlan.give_back

        def counted_fill(plan, step):
            n = sum(r1 - r0 for r0, r1 in plan.fills[step])
            self.filled += n
            self.live += n
            self.peak = max(self.peak, self.live)
            fill(plan, step)

        def counted_give(plan, step):
            n = sum(r1 - r0 for r0, r1 in plan.gives[step])
            self.given += n
            self.live -= n
            give(plan, step)

        monkeypatch.setattr(regions.RegionPlan, "fill", counted_fill)
        monkeypatch.setattr(regions.RegionPlan, "give_back", counted_give)


def test_large_block_tensor_replays_as_eagerly_holding_only_live_regions(monkeypatch):
    x = _x()
    eager = run_kernel(k_blocks, [x.copy()], {}, target="trn2", options=SimOptions.from_env(**OPTS))
    prog = _record(k_blocks, [x])
    assert sum(len(u) for u in compile_program(prog).uses) == 1  # (the 32 MiB tensor; the small tiles are not)
    live = _Live(monkeypatch)
    replay = replay_program(prog, [x.copy()], target="trn2", options=SimOptions.from_env(**OPTS))
    np.testing.assert_array_equal(replay.outputs.view(np.uint32), eager.outputs.view(np.uint32))
    np.testing.assert_allclose(replay.outputs, x * sum(range(BLOCKS)), rtol=1e-5)
    assert [(r.opcode, r.line) for r in replay.trace.records] == [(r.opcode, r.line) for r in eager.trace.records]
    assert live.filled == live.given == BLOCKS  # every block filled once, handed back once
    assert live.peak == 1  # one block live at a time


def test_an_uninitialised_block_reads_the_sentinels_an_eager_run_reads(monkeypatch):
    x = _x()
    with warnings.catch_warnings(record=True) as seen_eager:
        warnings.simplefilter("always")
        eager = run_kernel(k_blocks, [x.copy()], {"skip": 5}, target="trn2", options=SimOptions.from_env(**OPTS))
    prog = _record(k_blocks, [x], skip=5)
    with warnings.catch_warnings(record=True) as seen_replay:
        warnings.simplefilter("always")
        replay = replay_program(prog, [x.copy()], {"skip": 5}, target="trn2", options=SimOptions.from_env(**OPTS))
    assert np.isnan(eager.outputs).all()
    np.testing.assert_array_equal(replay.outputs.view(np.uint32), eager.outputs.view(np.uint32))

    def rules(seen):
        return sorted(str(w.message).rsplit("[rule ", 1)[-1] for w in seen if "[rule " in str(w.message))

    assert rules(seen_replay) == rules(seen_eager)


class _Parked:
    """Counts the regions parked and resumed, and the regions holding pages (filled, not parked or handed back) at
    their highest."""

    def __init__(self, monkeypatch):
        self.parked = self.resumed = self.live = self.peak = 0
        fill, give, park, resume = (regions.RegionPlan.fill, regions.RegionPlan.give_back, regions.RegionPlan.park,
                                    regions.RegionPlan.resume)

        def counted(fn, sign, counter=None):
            def wrapped(plan, step):
                before = int(plan.parked.sum())
                fn(plan, step)
                moved = {"fill": sum(r1 - r0 for r0, r1 in plan.fills.get(step, ())),
                         "give": sum(r1 - r0 for r0, r1 in plan.gives.get(step, ())),
                         "park": int(plan.parked.sum()) - before, "resume": before - int(plan.parked.sum())}
                n = moved[counter]
                if counter == "park":
                    self.parked += n
                elif counter == "resume":
                    self.resumed += n
                self.live += sign * n
                self.peak = max(self.peak, self.live)
            return wrapped

        monkeypatch.setattr(regions.RegionPlan, "fill", counted(fill, 1, "fill"))
        monkeypatch.setattr(regions.RegionPlan, "give_back", counted(give, -1, "give"))
        monkeypatch.setattr(regions.RegionPlan, "park", counted(park, -1, "park"))
        monkeypatch.setattr(regions.RegionPlan, "resume", counted(resume, 1, "resume"))


def _xw():
    rng = np.random.default_rng(9)
    return (rng.standard_normal((128, PBLOCK), dtype=np.float32),
            rng.standard_normal((128, 128), dtype=np.float32))


def _rules(seen):
    return sorted(str(w.message) for w in seen if "[rule " in str(w.message))


@pytest.mark.parametrize("skip", [-1, 13])
def test_zeroed_regions_are_parked_until_used_and_read_as_eagerly(monkeypatch, skip):
    """Each region of the zeroed PSUM tensor gives its pages back from its zeroing to its first matmul; the matmul
    finds the flags a memset leaves (its accumulation onto memset PSUM warned about as eagerly), the outputs and
    trace are the eager run's; the region with a never-zeroed block is not parked (its sentinels are kept)."""
    x, w = _xw()
    with warnings.catch_warnings(record=True) as seen_eager:
        warnings.simplefilter("always")
        eager = run_kernel(k_zeroed, [x.copy(), w.copy()], {"skip": skip}, target="trn2",
                           options=SimOptions.from_env(**OPTS))
    prog = _record(k_zeroed, [x, w], skip=skip)
    counts = _Parked(monkeypatch)
    with warnings.catch_warnings(record=True) as seen_replay:
        warnings.simplefilter("always")
        replay = replay_program(prog, [x.copy(), w.copy()], {"skip": skip}, target="trn2",
                                options=SimOptions.from_env(**OPTS))
    np.testing.assert_array_equal(replay.outputs.view(np.uint32), eager.outputs.view(np.uint32))
    assert [(r.opcode, r.line) for r in replay.trace.records] == [(r.opcode, r.line) for r in eager.trace.records]
    assert _rules(seen_replay) == _rules(seen_eager)
    assert any("non-matmul" in m for m in _rules(seen_eager))  # (the memset flags are what the matmul reads)
    regions_total = PBLOCKS * PBLOCK * 4 // (4 * pages.PAGE)
    if skip < 0:
        np.testing.assert_allclose(replay.outputs, PBLOCKS * (w.T @ x), rtol=1e-4, atol=1e-3)
        assert counts.parked == counts.resumed == regions_total
    else:
        assert np.isnan(eager.outputs).all()
        assert counts.parked == counts.resumed == regions_total - 1
    assert counts.peak <= 2  # (the region being zeroed, or the one in use: never the declaration)


def test_a_tensor_used_in_a_device_loop_is_held_whole():
    x = _x()
    n = np.array([[3]], dtype=np.int32)
    prog = _record(k_blocks_in_device_loop, [x, n])
    assert compile_program(prog).uses == [{}]
    eager = run_kernel(k_blocks_in_device_loop, [x.copy(), n], {}, target="trn2", options=SimOptions.from_env(**OPTS))
    replay = replay_program(prog, [x.copy(), n], target="trn2", options=SimOptions.from_env(**OPTS))
    np.testing.assert_array_equal(replay.outputs, eager.outputs)
    np.testing.assert_allclose(replay.outputs, x + 3, rtol=1e-6)


def test_given_back_pages_read_as_zeros_and_other_arrays_are_left_alone():
    a = pages.zero_pages((4, 2 * pages.PAGE // 4), np.float32)
    a[...] = 7.0
    assert pages.give_back(a, 0, pages.PAGE)
    assert (a[:, : pages.PAGE // 4] == 0).all() and (a[:, pages.PAGE // 4:] == 7).all()
    assert not pages.give_back(a, 4, pages.PAGE)  # not whole pages
    b = np.full((4, 2 * pages.PAGE // 4), 7.0, dtype=np.float32)
    assert not pages.give_back(b, 0, pages.PAGE) and (b == 7).all()  # not a mapping of its own


_RSS_PROBE = textwrap.dedent("""
    import json, resource, sys
    import numpy as np
    import nkieval.frontends
    nkieval.frontends.install(force=True)
    sys.path.insert(0, {here!r})
    import test_program_regions as t
    from nkieval.sim.options import SimOptions
    from nkieval.sim.program import replay_program
    t.BLOCKS = 4096  # 2 GiB declared
    x = np.ones((128, {width}), dtype=np.float32)
    prog = t._record(t.{kernel}, [x])
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out = replay_program(prog, [x], target="trn2", options=SimOptions.from_env(record_trace=False, **t.OPTS))
    grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    print(json.dumps({{"grew_mib": grew / 1024, "total": float(out.outputs.sum())}}))
""")


def _replay_growth(kernel: str, width: int) -> dict:
    code = _RSS_PROBE.format(here=os.path.dirname(__file__), kernel=kernel, width=width)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(sys.platform != "linux", reason="resident memory as Linux counts it")
def test_replay_memory_is_the_live_blocks_not_the_declaration():
    """2 GiB of SBUF declared, one 512 KiB block live at a time: the replay's peak grows by far less than that."""
    got = _replay_growth("k_blocks", BLOCK)
    assert got["total"] == 128 * BLOCK * sum(range(4096))
    assert got["grew_mib"] < 256, got


_ZEROED_PROBE = textwrap.dedent("""
    import json, os, resource, sys
    import numpy as np
    import nkieval.frontends
    nkieval.frontends.install(force=True)
    sys.path.insert(0, {here!r})
    import test_program_regions as t
    from nkieval.sim.options import SimOptions
    from nkieval.sim.program import Program, replay_program
    t.PBLOCKS = 2048  # 512 MiB of PSUM declared, and 256 MiB of its flags
    args = [np.ones((128, t.PBLOCK), dtype=np.float32), np.ones((128, 128), dtype=np.float32)]
    # (recorded in a child: the recording's own writes of the flags must not set this process's peak)
    r, w = os.pipe()
    if os.fork() == 0:
        os.close(r)
        with os.fdopen(w, "w") as f:
            f.write(t._record(t.k_zeroed, args).to_json())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        prog = Program.from_json(f.read())
    os.wait()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out = replay_program(prog, args, target="trn2", options=SimOptions.from_env(record_trace=False, **t.OPTS))
    grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    print(json.dumps({{"grew_mib": grew / 1024, "total": float(out.outputs.sum())}}))
""")


@pytest.mark.skipif(sys.platform != "linux", reason="resident memory as Linux counts it")
def test_replay_memory_of_a_zeroed_tensor_is_its_regions_in_use():
    """512 MiB of PSUM (and 256 MiB of its flags) zeroed up front, each block used far later: the replay's peak
    grows by far less than the declaration (by all of it with nothing parked)."""
    code = _ZEROED_PROBE.format(here=os.path.dirname(__file__))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    assert p.returncode == 0, p.stderr[-2000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got["total"] == 128 * PBLOCK * 2048 * 128
    assert got["grew_mib"] < 128, got


@pytest.mark.skipif(sys.platform != "linux", reason="resident memory as Linux counts it")
def test_replay_lets_go_of_the_tiles_the_kernel_dropped():
    """A dropped tile's storage goes with its free event (the replay's cache of views made no longer keeps it):
    2,000 tiles of 256 KiB, one live at a time."""
    got = _replay_growth("k_temporaries", 1024)
    assert got["total"] == 128 * 512 * 2000
    assert got["grew_mib"] < 128, got
