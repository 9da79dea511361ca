"""Dependency handling and scheduling policy of the event-driven model."""

from __future__ import annotations

import itertools

import pytest
from perf_helpers import TraceBuilder

from nkieval.hardware import get_target
from nkieval.perf import SchedulePolicy, estimate, text_summary
from nkieval.perf.params import load_params
from nkieval.perf.schedule import DmaPool, ScheduleError, schedule

P1 = load_params(get_target("trn1"))
P2 = load_params(get_target("trn2"))


def _chain(b: TraceBuilder, line: int, engine: str, opcode: str) -> tuple[int, int]:
    """load an HBM tile (its own DMA queue) then one compute instruction on it; returns record indices."""
    src = b.alloc("hbm", (128, 512))
    t = b.alloc("sbuf", (128, 512))
    u = b.alloc("sbuf", (128, 512))
    b.rec("dma_copy", "dma", [b.op(t, "dst", "w"), b.op(src, "src", "r")], line=line)
    b.rec(opcode, engine, [b.op(u, "dst", "w"), b.op(t, "data", "r")], line=line + 1, op="exp")
    n = len(b.trace.records)
    return n - 2, n - 1


def test_independent_dma_compute_chains_overlap() -> None:
    b = TraceBuilder()
    a0, a1 = _chain(b, 10, "scalar", "activation")
    b0, b1 = _chain(b, 20, "vector", "tensor_scalar")
    s = schedule(b.trace, P1)
    # RAW: each compute starts after its own load
    assert s.start[a1] >= s.end[a0] and s.start[b1] >= s.end[b0]
    # the two chains run concurrently: both loads start at 0, total < sum of the chains
    assert s.start[a0] == 0 and s.start[b0] == 0
    chain_a = s.end[a1] - s.start[a0]
    chain_b = s.end[b1] - s.start[b0]
    assert s.total_time < 0.8 * (chain_a + chain_b)
    serial = schedule(b.trace, P1, SchedulePolicy(mode="serial"))
    assert serial.total_time > s.total_time * 1.1
    assert serial.start[b0] >= serial.end[a1]


def test_war_hazard_serialises_a_write_after_a_read() -> None:
    b = TraceBuilder()
    src = b.alloc("hbm", (128, 4096))
    x = b.alloc("sbuf", (128, 4096))
    y = b.alloc("sbuf", (128, 4096))
    b.rec("memset", "vector", [b.op(x, "dst", "w")], value=1.0)
    rd = b.rec("activation", "scalar", [b.op(y, "dst", "w"), b.op(x, "data", "r")], op="exp").seq
    wr = b.rec("dma_copy", "dma", [b.op(x, "dst", "w"), b.op(src, "src", "r")], line=99).seq
    s = schedule(b.trace, P1)
    assert s.start[wr] >= s.end[rd]
    assert s.reason[wr] == "war" and s.pred[wr] == rd
    # the same DMA into a different tile does not wait
    b2 = TraceBuilder()
    src2 = b2.alloc("hbm", (128, 4096))
    x2, y2, z2 = (b2.alloc("sbuf", (128, 4096)) for _ in range(3))
    b2.rec("memset", "vector", [b2.op(x2, "dst", "w")], value=1.0)
    b2.rec("activation", "scalar", [b2.op(y2, "dst", "w"), b2.op(x2, "data", "r")], op="exp")
    wr2 = b2.rec("dma_copy", "dma", [b2.op(z2, "dst", "w"), b2.op(src2, "src", "r")], line=99).seq
    assert schedule(b2.trace, P1).start[wr2] == 0


def test_partition_and_column_ranges_are_independent() -> None:
    b = TraceBuilder()
    x = b.alloc("sbuf", (128, 1024))
    y = b.alloc("sbuf", (128, 1024))
    w = b.rec("memset", "vector", [b.op(x, "dst", "w", rows=(0, 64))], value=0.0).seq
    # reads the other 64 partitions: no RAW edge on the memset
    r = b.rec("activation", "scalar", [b.op(y, "dst", "w", rows=(64, 128)), b.op(x, "data", "r", rows=(64, 128))],
              op="exp").seq
    # reads the written half: RAW edge
    r2 = b.rec("activation", "scalar", [b.op(y, "dst", "w", rows=(0, 64)), b.op(x, "data", "r", rows=(0, 64))],
               op="exp").seq
    s = schedule(b.trace, P1)
    assert s.start[r] == 0
    assert s.start[r2] >= s.end[w] and s.reason[r2] == "dep:vector"


def test_hbm_tiles_of_one_tensor_do_not_alias() -> None:
    b = TraceBuilder()
    out = b.alloc("hbm", (256, 1024))
    t = b.alloc("sbuf", (128, 512))
    b.rec("memset", "vector", [b.op(t, "dst", "w")], value=0.0)
    s1 = b.rec("dma_copy", "dma", [b.op(out, "dst", "w", rows=(0, 128), cols=(0, 512)), b.op(t, "src", "r")],
               line=50).seq
    s2 = b.rec("dma_copy", "dma", [b.op(out, "dst", "w", rows=(0, 128), cols=(512, 1024)), b.op(t, "src", "r")],
               line=51).seq
    s3 = b.rec("dma_copy", "dma", [b.op(t, "dst", "w"), b.op(out, "src", "r", rows=(0, 128), cols=(512, 1024))],
               line=52).seq
    s = schedule(b.trace, P1)
    assert s.reason[s2] != "dep:dma"  # disjoint columns of the same rows: no WAW edge
    assert s.start[s3] >= s.end[s2] and s.pred[s3] == s2  # reads what s2 wrote
    assert s.end[s1] > 0


def _rotating(depth_kernel: bool) -> tuple:
    """Four iterations: load a tile from one allocation site, use it; the simulator reuses one address."""
    b = TraceBuilder()
    src = b.alloc("hbm", (128, 8192))
    acc = b.alloc("sbuf", (128, 2048))
    loads = []
    for i in range(4):
        t = b.alloc("sbuf", (128, 2048), site="k.py:7", address=4096 * 16)
        t.free_seq = None
        loads.append(b.rec("dma_copy", "dma", [b.op(t, "dst", "w"), b.op(src, "src", "r", cols=(i * 2048, (i + 1) * 2048))],
                           line=7).seq)
        b.rec("activation", "scalar", [b.op(acc, "dst", "w"), b.op(t, "data", "r")], line=8, op="exp")
        t.free_seq = len(b.trace.records)
    return b, loads


def test_rotation_lets_loads_run_ahead_and_physical_reuse_serialises() -> None:
    b, loads = _rotating(True)
    comp = schedule(b.trace, P1)
    phys = schedule(b.trace, P1, SchedulePolicy(mode="physical"))
    one = schedule(b.trace, P1, SchedulePolicy(rotation_depth=1))
    # compiler mode: two buffers, so load 1 does not wait for iteration 0's use
    assert comp.reason[loads[1]] != "capacity"
    # physical addresses (one buffer) and depth-1 rotation: load i+1 waits until tile i is dead
    assert phys.reason[loads[1]] == "war"
    assert one.reason[loads[2]] == "capacity"
    assert comp.total_time < phys.total_time
    assert one.total_time == pytest.approx(phys.total_time, rel=0.05)
    assert {r.site: r.depth for r in comp.rotation.sites}["k.py:7"] == 2


def test_rotation_bounded_by_sbuf_capacity() -> None:
    b = TraceBuilder()
    src = b.alloc("hbm", (128, 120000), "bfloat16")
    for i in range(3):
        t = b.alloc("sbuf", (128, 60000), "bfloat16", site="big.py:1")
        b.rec("dma_copy", "dma", [b.op(t, "dst", "w"), b.op(src, "src", "r", cols=(0, 60000))], line=1)
        t.free_seq = len(b.trace.records)
        _ = i
    s = schedule(b.trace, P1)
    assert {r.site: r.depth for r in s.rotation.sites}["big.py:1"] == 1  # 2 x 120 KB does not fit 176 KiB


def test_rotation_counts_instances_live_by_access_not_by_python_lifetime() -> None:
    """Tiles kept in a list (all used after all are loaded) need one buffer each; a loop tile the kernel rebinds
    after the instruction that makes its successor (Python frees it late) needs one, not two."""
    b = TraceBuilder()
    src = b.alloc("hbm", (128, 8192))
    acc = b.alloc("sbuf", (128, 512))
    kept = []
    for i in range(4):  # loaded one by one, all read afterwards: 4 live at once
        t = b.alloc("sbuf", (128, 512), site="list.py:1")
        b.rec("dma_copy", "dma", [b.op(t, "dst", "w"), b.op(src, "src", "r", cols=(i * 512, (i + 1) * 512))], line=1)
        kept.append(t)
    for t in kept:
        b.rec("tensor_tensor", "vector", [b.op(acc, "dst", "w"), b.op(acc, "data1", "r"), b.op(t, "data2", "r")],
              line=2, op="add")
    for t in kept:
        t.free_seq = len(b.trace.records)
    prev = None
    for i in range(4):  # x = load(...): the previous x dies one record after its successor is made
        t = b.alloc("sbuf", (128, 512), site="loop.py:1")
        b.rec("dma_copy", "dma", [b.op(t, "dst", "w"), b.op(src, "src", "r", cols=(i * 512, (i + 1) * 512))], line=3)
        if prev is not None:
            prev.free_seq = len(b.trace.records)
        b.rec("tensor_tensor", "vector", [b.op(acc, "dst", "w"), b.op(acc, "data1", "r"), b.op(t, "data2", "r")],
              line=4, op="add")
        prev = t
    need = {r.site: r.live_needed for r in schedule(b.trace, P1).rotation.sites}
    assert need == {"list.py:1": 4, "loop.py:1": 1}


def test_policy_validation_names_the_field() -> None:
    with pytest.raises(ScheduleError, match="mode"):
        SchedulePolicy(mode="fast")  # type: ignore[arg-type]
    with pytest.raises(ScheduleError, match="rotation_depth"):
        SchedulePolicy(rotation_depth=0)


def test_dma_pool_backfills_gaps() -> None:
    pool = DmaPool()
    assert pool.reserve(0.0, 10.0) == (0.0, 10.0)
    assert pool.reserve(100.0, 10.0) == (100.0, 110.0)
    assert pool.reserve(5.0, 10.0) == (10.0, 20.0)  # fits in the gap 10..100
    assert (pool.starts, pool.ends) == ([0.0, 100.0], [20.0, 110.0])
    # longer than any gap: it fills 20..100 and goes on after 110 (interleaved with the transfer booked there,
    # not waiting for one gap long enough for all of it)
    assert pool.reserve(0.0, 200.0) == (20.0, 230.0)
    assert (pool.starts, pool.ends) == ([0.0], [230.0])
    assert pool.reserve(300.0, 0.0) == (300.0, 300.0)


def test_a_transfer_does_not_wait_for_one_gap_long_enough_for_all_of_it() -> None:
    """Two DMA queues: a large load ready at once is not pushed behind a store booked first in the middle of the
    time it needs; the engines' time is work-conserving, so the order of the two in the program does not matter."""
    totals = []
    for store_first in (True, False):
        b = TraceBuilder("trn2")
        src = b.alloc("hbm", (128, 32768))
        out = b.alloc("hbm", (128, 2048))
        big = b.alloc("sbuf", (128, 32768))
        small = b.alloc("sbuf", (128, 2048))
        recs = [("memset", "vector", [b.op(small, "dst", "w")], 1, {"value": 0.0})]
        load = ("dma_copy", "dma", [b.op(big, "dst", "w"), b.op(src, "src", "r")], 2, {})
        store = ("dma_copy", "dma", [b.op(out, "dst", "w"), b.op(small, "src", "r")], 3, {})
        recs += [store, load] if store_first else [load, store]
        for op, eng, ops, line, attrs in recs:
            b.rec(op, eng, ops, line=line, **attrs)
        totals.append(schedule(b.trace, P2).total_time)
    assert totals[0] == pytest.approx(totals[1], rel=0.02)


def test_unmodelled_instructions_are_counted_not_free() -> None:
    b = TraceBuilder()
    x = b.alloc("sbuf", (128, 512))
    y = b.alloc("sbuf", (128, 512))
    b.rec("mystery_op", "vector", [b.op(y, "dst", "w"), b.op(x, "data", "r")])
    est = estimate(b.trace, "trn1")
    assert est.uncertainty.unmodelled_instructions == {"mystery_op": 1}
    assert est.total_time_ns > 0
    assert any("mystery_op" in a for a in est.uncertainty.assumptions)
    assert "UNMODELLED (generic cost): mystery_op ×1" in text_summary(est)


def _queued_loads(n: int = 4) -> tuple[TraceBuilder, list[int]]:
    """``n`` independent loads from one source line (one DMA queue) into distinct tiles."""
    b = TraceBuilder()
    src = b.alloc("hbm", (128, 512 * n))
    seqs = []
    for i in range(n):
        t = b.alloc("sbuf", (128, 512))
        seqs.append(b.rec("dma_copy", "dma", [b.op(t, "dst", "w"), b.op(src, "src", "r", cols=(i * 512, (i + 1) * 512))],
                          line=5).seq)
    return b, seqs


def test_queued_dmas_overlap_their_fixed_latency() -> None:
    b, seqs = _queued_loads()
    fixed = 1000.0
    piped = schedule(b.trace, load_params(get_target("trn1"), {"dma_fixed_ns": fixed, "dma_queue_pipelined": True}))
    serial = schedule(b.trace, load_params(get_target("trn1"), {"dma_fixed_ns": fixed, "dma_queue_pipelined": False}))
    assert len({piped.track[i] for i in seqs}) == 1  # one queue, FIFO
    for x, y in itertools.pairwise(seqs):
        # pipelined: the next transfer starts on the engines as soon as its predecessor is done
        assert piped.dma_slot[y] == pytest.approx(piped.end[x])
        # unpipelined: each transfer pays the fixed latency after its predecessor
        assert serial.dma_slot[y] >= serial.end[x] + fixed - 1e-6
    assert piped.dma_slot[seqs[0]] == pytest.approx(fixed)  # the first transfer still pays it
    assert piped.total_time < serial.total_time - 2 * fixed


def test_depth_one_rotation_waits_per_slice_not_for_the_whole_tile() -> None:
    """A reused buffer's slice k may be reloaded once slice k's last reader is done (byte-range WAR),
    before the rest of the previous instance is dead."""
    b = TraceBuilder()
    src = b.alloc("hbm", (128, 4096))
    out = b.alloc("sbuf", (128, 2048))
    first_load = []
    last_read = []
    for _ in range(2):
        t = b.alloc("sbuf", (128, 4096), site="s.py:1", address=0)
        t.free_seq = None
        first_load.append(b.rec("dma_copy", "dma", [b.op(t, "dst", "w", cols=(0, 2048)),
                                                    b.op(src, "src", "r", cols=(0, 2048))], line=1).seq)
        b.rec("dma_copy", "dma", [b.op(t, "dst", "w", cols=(2048, 4096)), b.op(src, "src", "r", cols=(2048, 4096))],
              line=2)
        b.rec("activation", "scalar", [b.op(out, "dst", "w"), b.op(t, "data", "r", cols=(0, 2048))], line=3, op="exp")
        last_read.append(b.rec("activation", "scalar", [b.op(out, "dst", "w"), b.op(t, "data", "r", cols=(2048, 4096))],
                               line=4, op="exp").seq)
        t.free_seq = len(b.trace.records)
    s = schedule(b.trace, P1, SchedulePolicy(rotation_depth=1))
    assert {r.site: r.depth for r in s.rotation.sites}["s.py:1"] == 1
    reload0 = first_load[1]
    assert s.reason[reload0] == "capacity"  # it waits for the previous instance's reader of the same slice
    assert s.start[reload0] < s.end[last_read[0]]  # ... not for the whole previous tile


def test_rotation_prefers_the_site_with_more_instances_among_equal_sizes() -> None:
    b = TraceBuilder()
    src = b.alloc("hbm", (128, 100000), "bfloat16")
    for i in range(2):  # outer tile, 2 instances
        a = b.alloc("sbuf", (128, 24576), "bfloat16", site="o.py:1")
        b.rec("dma_copy", "dma", [b.op(a, "dst", "w"), b.op(src, "src", "r", cols=(0, 24576))], line=1)
        for _ in range(4):  # inner tile of the same size, 8 instances
            t = b.alloc("sbuf", (128, 24576), "bfloat16", site="o.py:2")
            b.rec("dma_copy", "dma", [b.op(t, "dst", "w"), b.op(src, "src", "r", cols=(0, 24576))], line=2)
            t.free_seq = len(b.trace.records)
        a.free_seq = len(b.trace.records)
        _ = i
    s = schedule(b.trace, P1)  # 3 x 48 KiB fit 176 KiB, 4 do not
    depth = {r.site: r.depth for r in s.rotation.sites}
    assert depth == {"o.py:1": 1, "o.py:2": 2}


def _list_loop(iterations: int, tiles: int, cols: int, dtype: str = "float32", reads: int = 4) -> tuple:
    """Each iteration loads ``tiles`` tiles into a list (one allocation site), then reads them all: the
    list-of-tiles idiom of the tutorial kernels. Returns the builder and, per iteration, its load records."""
    b = TraceBuilder()
    src = b.alloc("hbm", (128, tiles * cols), dtype)
    acc = b.alloc("sbuf", (128, 512))
    loads = []
    for _ in range(iterations):
        kept, recs = [], []
        for i in range(tiles):
            t = b.alloc("sbuf", (128, cols), dtype, site="list.py:1")
            recs.append(b.rec("dma_copy", "dma", [b.op(t, "dst", "w"), b.op(src, "src", "r",
                                                                          cols=(i * cols, (i + 1) * cols))],
                              line=1).seq)
            kept.append(t)
        for t in reversed(kept):  # read last-loaded first: a buffer frees only when its whole list is read
            for _ in range(reads):
                b.rec("tensor_tensor", "vector", [b.op(acc, "dst", "w"), b.op(acc, "data1", "r"),
                                                  b.op(t, "data2", "r", cols=(0, 512))], line=2, op="add")
        for t in kept:
            t.free_seq = len(b.trace.records)
        loads.append(recs)
    return b, loads


def test_rotation_double_buffers_a_list_of_tiles_as_a_whole() -> None:
    """A site whose loop keeps 4 tiles alive at once gets 4 more buffers (one more set), not 2 buffers in all:
    the next iteration's whole list loads while this one's is read."""
    b, loads = _list_loop(3, 4, 512)
    s = schedule(b.trace, P1)
    site = {r.site: r for r in s.rotation.sites}["list.py:1"]
    assert (site.live_needed, site.depth) == (4, 8)
    assert all(s.reason[i] != "capacity" for i in loads[1])
    one = schedule(b.trace, P1, SchedulePolicy(rotation_depth=1))
    assert {r.site: r.depth for r in one.rotation.sites}["list.py:1"] == 4
    # with one set, the next list's first load waits for the buffer read last
    assert one.reason[loads[1][0]] == "capacity"
    assert s.total_time < 0.9 * one.total_time


def test_rotation_gives_what_capacity_leaves_of_a_second_set() -> None:
    """4 live tiles of 28,000 B and a 2 KiB accumulator leave room on trn1 (180,224 B usable) for 2 of the 4
    buffers of a second set: depth 6, between one set and two in time."""
    b, _ = _list_loop(3, 4, 14000, "bfloat16", reads=40)
    s = schedule(b.trace, P1)
    assert {r.site: r.depth for r in s.rotation.sites}["list.py:1"] == 6
    one = schedule(b.trace, P1, SchedulePolicy(rotation_depth=1))
    roomy = schedule(b.trace, load_params(get_target("trn1"), {"sbuf_usable_bytes_per_partition": 10**6}))
    assert {r.site: r.depth for r in roomy.rotation.sites}["list.py:1"] == 8
    assert roomy.total_time < s.total_time < one.total_time
