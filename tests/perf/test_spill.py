"""The SBUF spill estimate: Belady eviction over segments, saves only for dirty data, wired into the metrics."""

from __future__ import annotations

import functools
from dataclasses import fields, replace

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from perf_helpers import TraceBuilder, over_capacity

from nkieval.hardware import get_target
from nkieval.perf import estimate, text_summary
from nkieval.perf import spill as spill_mod
from nkieval.perf.params import load_params
from nkieval.perf.schedule import ScheduleError, SchedulePolicy, schedule
from nkieval.perf.spill import SPILL_SITE, estimate_spill, with_spill_traffic

KIB = 1024


def _load(b: TraceBuilder, t, src, cols=None) -> int:
    return b.rec("dma_copy", "dma", [b.op(t, "dst", "w", cols=cols), b.op(src, "src", "r")]).seq


def _store(b: TraceBuilder, t, dst, cols=None) -> int:
    return b.rec("dma_copy", "dma", [b.op(dst, "dst", "w"), b.op(t, "src", "r", cols=cols)]).seq


def _tiles(b: TraceBuilder, *widths: int):
    """SBUF fp32 tiles of 128 partitions and ``w`` elements each, and an HBM source/sink big enough for any."""
    hbm = b.alloc("hbm", (128, max(widths)))
    return hbm, [b.alloc("sbuf", (128, w)) for w in widths]


def test_no_eviction_when_the_live_tiles_fit() -> None:
    b = TraceBuilder()
    hbm, (x, y) = _tiles(b, 256, 256)
    _load(b, x, hbm)
    _load(b, y, hbm)
    _store(b, x, hbm)
    _store(b, y, hbm)
    e = estimate_spill(b.trace, 2 * KIB)
    assert (e.save_bytes, e.reload_bytes, e.evictions) == (0, 0, 0)
    assert e.peak_live_bytes == 2 * KIB


def test_a_clean_tile_is_reread_from_its_source_never_saved() -> None:
    b = TraceBuilder()
    hbm, (x, y) = _tiles(b, 256, 256)  # 1 KiB per partition each; room for one
    _load(b, x, hbm)
    _load(b, y, hbm)  # evicts x
    _store(b, x, hbm)  # x back, evicts y
    _store(b, y, hbm)  # y back
    e = estimate_spill(b.trace, KIB)
    assert e.evictions == 2
    assert e.save_bytes == 0
    assert e.reload_bytes == 2 * KIB * 128


def test_a_tile_computed_on_chip_is_saved_before_it_is_dropped() -> None:
    b = TraceBuilder()
    hbm, (x, y) = _tiles(b, 256, 256)
    b.rec("iota", "gpsimd", [b.op(x, "dst", "w")])  # x's data exists nowhere else
    _load(b, y, hbm)  # evicts x: saved
    _store(b, x, hbm)  # x reloaded, evicts y (clean)
    _store(b, y, hbm)
    e = estimate_spill(b.trace, KIB)
    assert e.evictions == 2
    assert e.save_bytes == KIB * 128
    assert e.reload_bytes == 2 * KIB * 128


def test_a_memset_tile_is_refilled_not_saved_and_reloaded() -> None:
    b = TraceBuilder()
    hbm, (x, y) = _tiles(b, 256, 256)
    b.rec("memset", "vector", [b.op(x, "dst", "w")], value=0.0)  # a constant: a memset makes it again
    _load(b, y, hbm)  # evicts x: nothing to save
    _store(b, x, hbm)  # x read: refilled by a memset, no HBM read; evicts y (clean)
    _store(b, y, hbm)  # y re-read from its source
    e = estimate_spill(b.trace, KIB)
    assert e.evictions == 2
    assert e.save_bytes == 0
    assert e.reload_bytes == KIB * 128
    assert e.refill_bytes == KIB * 128


def test_a_tile_overwritten_before_it_is_read_moves_nothing() -> None:
    b = TraceBuilder()
    hbm, (x, y) = _tiles(b, 256, 256)
    b.rec("iota", "gpsimd", [b.op(x, "dst", "w")])  # dirty
    _load(b, y, hbm)  # evicts x: its next access overwrites it, so it is dead: no save
    _store(b, y, hbm)
    b.rec("iota", "gpsimd", [b.op(x, "dst", "w")])  # written whole without being read: no reload
    _store(b, x, hbm)
    e = estimate_spill(b.trace, KIB)
    assert e.evictions == 1
    assert (e.save_bytes, e.reload_bytes, e.refill_bytes) == (0, 0, 0)


def test_a_partial_overwrite_still_reloads() -> None:
    b = TraceBuilder()
    hbm, (x, y) = _tiles(b, 256, 256)
    b.rec("iota", "gpsimd", [b.op(x, "dst", "w")])
    _load(b, y, hbm)  # evicts x
    _store(b, y, hbm)
    b.rec("iota", "gpsimd", [b.op(x, "dst", "w", rows=(0, 64))])  # half its partitions: the rest is still live
    _store(b, x, hbm)
    e = estimate_spill(b.trace, KIB)
    assert e.save_bytes == KIB * 128
    assert e.reload_bytes == KIB * 128


def test_the_tile_used_furthest_ahead_goes_first() -> None:
    b = TraceBuilder()
    hbm, (x, y, z) = _tiles(b, 256, 512, 256)  # 1, 2 and 1 KiB per partition; room for 3 KiB
    _load(b, x, hbm)
    _load(b, y, hbm)
    _load(b, z, hbm)  # x is used next, y last: y goes (oldest-first or smallest-first would drop x)
    _store(b, x, hbm)
    _store(b, z, hbm)
    _store(b, y, hbm)
    e = estimate_spill(b.trace, 3 * KIB)
    assert e.evictions == 1
    assert e.reload_bytes == 2 * KIB * 128


def test_only_the_segment_a_kernel_is_not_using_is_evicted() -> None:
    b = TraceBuilder()
    hbm, (big, t) = _tiles(b, 1024, 256)  # a 4 KiB accumulator worked on a quarter at a time, and a 1 KiB tile
    for q in range(4):
        _load(b, big, hbm, cols=(256 * q, 256 * (q + 1)))
    _load(b, t, hbm)  # 5 KiB live, room for 4.5: one quarter must go, not the whole accumulator
    _store(b, t, hbm)
    for q in range(4):
        _store(b, big, hbm, cols=(256 * q, 256 * (q + 1)))
    e = estimate_spill(b.trace, 4 * KIB + 512)
    assert e.evictions == 1
    assert e.reload_bytes == KIB * 128
    assert e.peak_live_bytes == 5 * KIB


def test_estimate_reports_spill_only_beyond_usable_sbuf() -> None:
    def trace(width: int):
        b = TraceBuilder("trn1")
        hbm, (x, y) = _tiles(b, width, width)
        _load(b, x, hbm)
        _load(b, y, hbm)
        _store(b, x, hbm)
        _store(b, y, hbm)
        b.trace.peak_sbuf_bytes = 2 * width * 4
        return b.trace

    fits = estimate(trace(16 * KIB), "trn1")  # 2 x 64 KiB of 176 KiB
    assert (fits.summary["spill_evictions"], fits.summary["spill_reload_bytes"]) == (0, 0)
    assert "SBUF spill" not in text_summary(fits)
    over = estimate(trace(32 * KIB), "trn1")  # 2 x 128 KiB: each tile goes out once and comes back
    m = over.summary
    assert m["spill_evictions"] == 2
    assert m["spill_save_bytes"] == 0
    assert m["spill_reload_bytes"] == 2 * 128 * KIB * 128
    assert m["sbuf_usable_bytes_per_partition"] == 180224
    assert "SBUF spill" in text_summary(over)


def test_spill_traffic_goes_in_ahead_of_the_instructions_it_serves() -> None:
    tr = over_capacity()
    tr.allocations[4] = replace(tr.allocations[4], alloc_seq=2, free_seq=5)  # made by record 2, freed after 4
    sp = estimate_spill(tr, 180224)  # trn1's usable SBUF: two of the three 80 KiB tiles fit
    assert [(t.before, t.kind, t.alloc) for t in sp.transfers] == [(2, "save", 3), (2, "evict", 3),
                                                                  (4, "reload", 3)]  # the second tile: used last
    out = with_spill_traffic(tr, sp)
    assert [r.opcode for r in out.records] == ["iota", "iota", "spill_save", "iota", "dma_copy",
                                               "spill_reload", "dma_copy", "dma_copy"]
    assert [r.seq for r in out.records] == list(range(8))
    assert out.records[2].line == 12 and out.records[5].line == 21  # the line of the instruction served
    # each on the spill queue of the engine running the instruction served (a DMA's: the Sync engine's)
    assert [out.records[i].attrs["queue"] for i in (2, 5)] == ["qGpSimdSpillReload", "qSyncSpillReload"]
    save, reload = out.records[2], out.records[5]
    assert [(o.buffer, o.mode) for o in save.operands] == [("hbm", "w"), ("sbuf", "r")]
    assert [(o.buffer, o.mode) for o in reload.operands] == [("sbuf", "w"), ("hbm", "r")]
    assert save.operands[0].alloc == reload.operands[1].alloc  # the reload reads what the save wrote
    assert save.operands[0].nbytes == 80 * KIB * 128
    area = out.allocations[save.operands[0].alloc]
    assert area.site == SPILL_SITE and area.bytes_per_partition == 80 * KIB * 128
    assert len(tr.records) == 6 and tr.records[2].opcode == "iota"  # the original is untouched
    # trace positions move with the records: ahead of the spill traffic inserted for the instruction there
    assert (out.allocations[4].alloc_seq, out.allocations[4].free_seq) == (2, 7)
    # every other field of the copied records and allocations is the original's (a field added to either class
    # must be carried over by with_spill_traffic too)
    kept = [r for r in out.records if not r.opcode.startswith("spill_")]
    for old, new in [*zip(tr.records, kept), *((tr.allocations[a], out.allocations[a]) for a in tr.allocations)]:
        moved = {"seq", "alloc_seq", "free_seq"}
        assert {f.name: getattr(new, f.name) for f in fields(new) if f.name not in moved} == \
            {f.name: getattr(old, f.name) for f in fields(old) if f.name not in moved}


def test_scheduled_spill_orders_save_reload_and_use() -> None:
    tr = over_capacity()
    p = load_params(get_target("trn1"))
    s = schedule(tr, p, SchedulePolicy())
    assert s.spill is not None and s.spill.evictions == 1
    recs = s.trace.records
    ix = {r.opcode: i for i, r in enumerate(recs) if r.opcode.startswith("spill")}
    save, reload = ix["spill_save"], ix["spill_reload"]
    assert s.start[save] >= s.end[0]  # saves what the first memset wrote
    assert s.start[reload] >= s.end[save]  # reads what the save wrote
    assert s.start[reload + 1] >= s.end[reload]  # the store of the reloaded tile waits for it
    # spill transfers run on their own queues, one per triggering engine, not on the queue of the line they serve
    assert s.track[save] != s.track[reload]
    assert s.track[reload] not in {s.track[i] for i, r in enumerate(recs) if not r.opcode.startswith("spill")}
    off = schedule(tr, p, SchedulePolicy(spill_traffic="off"))
    assert off.spill == s.spill and len(off.trace.records) == len(tr.records)
    assert off.total_time < s.total_time


def test_estimate_states_the_spill_assumption_and_keeps_spill_out_of_the_roofline() -> None:
    tr = over_capacity()
    est = estimate(tr, "trn1")
    assert any("Belady" in a for a in est.uncertainty.assumptions)
    assert est.to_dict()["spill_traffic"] == "prefetch"
    plain = estimate(tr, "trn1", policy=SchedulePolicy(spill_traffic="off"))
    assert any("not scheduled" in a for a in plain.uncertainty.assumptions)
    assert est.summary["compulsory_hbm_bytes"] == plain.summary["compulsory_hbm_bytes"]
    assert est.summary["hbm_write_bytes"] == plain.summary["hbm_write_bytes"] + 80 * KIB * 128
    assert est.summary["hbm_read_bytes"] == plain.summary["hbm_read_bytes"] + 80 * KIB * 128
    assert any("waiting_on_spill" in d for d in est.stalls.values())  # the reloaded tile's store waits on it
    assert not any("waiting_on_spill" in d for d in plain.stalls.values())
    assert estimate(over_capacity(width=8 * KIB), "trn1").schedule.spill is None  # fits: nothing added


@pytest.mark.parametrize("spill", ["prefetch", "on_demand"])
@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_the_compiled_and_python_loops_agree_on_spill_traffic(target: str, spill: str) -> None:
    import nkieval.perf.schedule as sched_mod

    tr = over_capacity(target, width=28 * KIB)
    p = load_params(get_target(target))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sched_mod, "_NATIVE", True)
        native = schedule(tr, p, SchedulePolicy(spill_traffic=spill))
        mp.setattr(sched_mod, "_NATIVE", False)
        python = schedule(tr, p, SchedulePolicy(spill_traffic=spill))
    assert native.spill is not None and native.spill.evictions >= 1
    assert (list(native.start), list(native.end), native.track) == (list(python.start), list(python.end), python.track)


def test_a_reload_waits_for_the_space_it_takes_to_be_given_up() -> None:
    b = TraceBuilder("trn1")
    width = 20 * KIB  # 80 KiB per partition: two of three fit in trn1's usable 176 KiB
    src = b.alloc("hbm", (128, width))
    hbm = b.alloc("hbm", (128, 4 * width))
    x, y, z = (b.alloc("sbuf", (128, width)) for _ in range(3))
    b.rec("dma_copy", "dma", [b.op(x, "dst", "w"), b.op(src, "src", "r")], line=10)  # x: a copy of HBM data
    for i, t in enumerate((y, z)):
        b.rec("iota", "gpsimd", [b.op(t, "dst", "w")], line=11 + i)  # z evicts y (saved)
    for i, t in enumerate((x, y, z, x)):  # y comes back and evicts x (clean: dropped); x comes back last
        b.rec("dma_copy", "dma", [b.op(hbm, "dst", "w", cols=(i * width, (i + 1) * width)), b.op(t, "src", "r")],
              line=20 + i)
    b.trace.peak_sbuf_bytes = 3 * width * 4
    sp = estimate_spill(b.trace, 180224)
    assert [(t.before, t.kind, t.alloc) for t in sp.transfers] == [
        (2, "save", y.id), (2, "evict", y.id), (4, "reload", y.id), (4, "evict", x.id), (6, "reload", x.id)]
    p = load_params(get_target("trn1"))
    s = schedule(b.trace, p, SchedulePolicy(spill_traffic="on_demand"))
    recs = s.trace.records
    reload_y = next(i for i, r in enumerate(recs) if r.opcode == "spill_reload")
    assert [o.role for o in recs[reload_y].operands] == ["dst", "src", "evicts"]
    store_x = next(i for i, r in enumerate(recs) if r.line == 20 and r.opcode == "dma_copy")
    # y comes into the space x gives up: not before x's last reader is done (nothing else orders the two)
    assert s.start[reload_y] >= s.end[store_x]
    assert s.spill.save_bytes == 80 * KIB * 128 and s.spill.reload_bytes == 2 * 80 * KIB * 128
    # prefetch: the same reload runs once its save is done, ahead of x's store
    pre = schedule(b.trace, p, SchedulePolicy())
    assert [o.role for o in pre.trace.records[reload_y].operands] == ["dst", "src"]
    assert pre.start[reload_y] < pre.end[store_x]
    assert pre.total_time <= s.total_time  # (the DMA engines' time is work-conserving: here no shorter)


def test_spill_traffic_policy_is_checked() -> None:
    with pytest.raises(ScheduleError, match="spill_traffic must be 'prefetch', 'on_demand' or 'off', got True"):
        SchedulePolicy(spill_traffic=True)  # type: ignore[arg-type]


@settings(max_examples=40, deadline=None)
@given(data=st.data(), n_tiles=st.integers(2, 6), n_ops=st.integers(1, 30))
def test_spill_on_random_access_sequences(data, n_tiles: int, n_ops: int) -> None:
    import nkieval.perf.schedule as sched_mod

    b = TraceBuilder("trn2")
    widths = [data.draw(st.sampled_from([256, 512, 1024])) for _ in range(n_tiles)]
    hbm = b.alloc("hbm", (128, max(widths)))
    tiles = [b.alloc("sbuf", (128, w)) for w in widths]
    for _ in range(n_ops):
        t = tiles[data.draw(st.integers(0, n_tiles - 1))]
        half = data.draw(st.sampled_from([None, 0, 1]))  # the whole tile or one half of it
        cols = None if half is None else (half * t.shape[1] // 2, (half + 1) * t.shape[1] // 2)
        kind = data.draw(st.sampled_from(["load", "store", "memset"]))
        if kind == "load":
            b.rec("dma_copy", "dma", [b.op(t, "dst", "w", cols=cols), b.op(hbm, "src", "r", cols=(0, 1))])
        elif kind == "store":
            b.rec("dma_copy", "dma", [b.op(hbm, "dst", "w", cols=(0, 1)), b.op(t, "src", "r", cols=cols)])
        else:
            b.rec("memset", "vector", [b.op(t, "dst", "w", cols=cols)], value=0.0)
    cap = data.draw(st.sampled_from([1, 2, 3, 4, 6])) * KIB
    sp = estimate_spill(b.trace, cap)
    moved = {k: sum((t.addr_hi - t.addr_lo) * t.partitions for t in sp.transfers if t.kind == k)
             for k in ("save", "reload", "evict")}
    assert (moved["save"], moved["reload"]) == (sp.save_bytes, sp.reload_bytes)
    assert sp.save_bytes <= sp.reload_bytes  # only what is used again is evicted, so every save is reloaded
    if sp.peak_live_bytes <= cap:
        assert sp.evictions == 0 and not sp.transfers
    else:
        assert sp.evictions > 0 or sp.overfull_instructions > 0
    assert estimate_spill(b.trace, sp.peak_live_bytes).evictions == 0
    with pytest.MonkeyPatch.context() as mp:  # the compiled walk (where built) and the Python one: the same moves
        mp.setattr(spill_mod, "_NATIVE", False)
        assert estimate_spill(b.trace, cap) == sp
    out = with_spill_traffic(b.trace, sp, on_demand=True)
    kept = [r for r in out.records if not r.opcode.startswith("spill_")]
    assert [(r.opcode, r.operands) for r in kept] == [(r.opcode, r.operands) for r in b.trace.records]
    assert [r.seq for r in out.records] == list(range(len(out.records)))
    assert len(out.records) - len(kept) == sum(t.kind != "evict" for t in sp.transfers)
    b.trace.peak_sbuf_bytes = max(sp.peak_live_bytes, 1)
    p = load_params(get_target("trn2"), {"sbuf_usable_bytes_per_partition": cap})
    with pytest.MonkeyPatch.context() as mp:
        for spill in ("prefetch", "on_demand"):
            mp.setattr(sched_mod, "_NATIVE", True)
            native = schedule(b.trace, p, SchedulePolicy(spill_traffic=spill))
            mp.setattr(sched_mod, "_NATIVE", False)
            python = schedule(b.trace, p, SchedulePolicy(spill_traffic=spill))
            assert (list(native.start), list(native.end)) == (list(python.start), list(python.end))


def _fewest_reloads(seq: list[int], slots: int) -> int:
    """By exhaustive search over every eviction choice: the fewest reloads that serve the accesses ``seq`` (one
    whole tile each) with room for ``slots`` tiles, a tile's room freed after its last access."""
    last = {t: i for i, t in enumerate(seq)}

    @functools.cache
    def best(i: int, resident: frozenset[int], seen: frozenset[int]) -> int:
        if i == len(seq):
            return 0
        t = seq[i]

        def after(r: frozenset[int]) -> int:
            return best(i + 1, r - {t} if last[t] == i else r, seen | {t})

        if t in resident:
            return after(resident)
        cost = int(t in seen)
        if len(resident) < slots:
            return cost + after(resident | {t})
        return cost + min(after(resident - {v} | {t}) for v in resident)

    return best(0, frozenset(), frozenset())


@settings(max_examples=100, deadline=None)
@given(seq=st.lists(st.integers(0, 4), min_size=1, max_size=12), slots=st.integers(1, 3))
@example(seq=[0, 1, 2, 0, 1, 2, 0, 1, 2], slots=2)  # evicting the nearest next use instead costs 5 reloads, not 3
def test_belady_reloads_are_the_fewest_any_eviction_order_needs(seq: list[int], slots: int) -> None:
    """Equal tiles, one read per instruction, never written on chip: Belady's choice is optimal, so the walk's reloads
    (compiled where built, and the Python reference) equal the exhaustive search's minimum."""
    b = TraceBuilder("trn2")
    hbm = b.alloc("hbm", (128, 256))
    tiles = [b.alloc("sbuf", (128, 256)) for _ in range(5)]  # 1 KiB per partition each
    for t in seq:  # each access reads its tile (a load would overwrite it whole: nothing to reload)
        b.rec("dma_copy", "dma", [b.op(hbm, "dst", "w"), b.op(tiles[t], "src", "r")])
    want = _fewest_reloads(seq, slots)
    for native in (True, False):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(spill_mod, "_NATIVE", native)
            sp = estimate_spill(b.trace, slots * KIB)
        assert sp.reload_bytes == want * KIB * 128
        assert sp.save_bytes == 0 and sp.overfull_instructions == 0


@pytest.mark.skipif(spill_mod._schedule_c is None, reason="the compiled walk is not built")
def test_the_compiled_walk_rejects_inconsistent_arrays() -> None:
    import numpy as np

    ev = np.zeros(2, dtype=np.int64)
    with pytest.raises(ValueError, match="array lengths disagree"):
        spill_mod._schedule_c.belady(ev, ev, ev[:1], ev, np.array([0, 2]), ev[:1], ev[:1], 1024)
    with pytest.raises(ValueError, match="unit out of range"):
        spill_mod._schedule_c.belady(ev, ev + 5, ev, ev, np.array([0, 2]), ev[:1], ev[:1], 1024)
    with pytest.raises(ValueError, match="not an int64 array"):
        spill_mod._schedule_c.belady(b"abc", ev, ev, ev, np.array([0, 2]), ev[:1], ev[:1], 1024)


def test_the_timeline_shows_spill_dmas_at_the_line_they_serve() -> None:
    from nkieval.perf import to_perfetto

    est = estimate(over_capacity(), "trn1")
    ev = [e for e in to_perfetto(est)["traceEvents"] if e.get("ph") == "X" and e["name"].startswith("spill_")]
    assert [(e["name"], e["cat"], e["args"]["nki_source_location"]) for e in ev] == [
        ("spill_save", "dma", "k.py:12"), ("spill_reload", "dma", "k.py:21")]
    assert all(e["args"]["bytes"] == 80 * KIB * 128 and e["dur"] > 0 for e in ev)
    # each DMA queue track is named after what it carries: the kernel's store lines, and the two spill queues
    names = sorted(e["args"]["name"] for e in to_perfetto(est)["traceEvents"] if e.get("name") == "thread_name"
                   and e["args"]["name"].startswith("dma:"))
    assert sorted(n.split(" ", 1)[1] for n in names) == ["(k.py:20)", "(k.py:21)", "(k.py:22)",
                                                         "(qGpSimdSpillReload)", "(qSyncSpillReload)"]


def test_a_spill_save_for_a_load_does_not_hold_up_that_line_s_next_loads() -> None:
    """Loads from one source line into fresh tiles, each needing room taken from a tile computed on chip: the saves
    run on the Sync engine's spill queue, so the loads after a save do not queue behind it (FIFO per queue) while
    it waits for its victim's last writer."""
    b = TraceBuilder("trn1")
    hbm = b.alloc("hbm", (128, 6 * 10240))
    dirty = [b.alloc("sbuf", (128, 10240)) for _ in range(4)]  # 4 x 40 KiB computed on chip
    for t in dirty:
        b.rec("iota", "gpsimd", [b.op(t, "dst", "w")], line=10)
    loads = []
    for i in range(3):  # 3 more 40 KiB tiles: 7 x 40 KiB > 176 KiB, so dirty tiles must be saved to make room
        t = b.alloc("sbuf", (128, 10240))
        loads.append(b.rec("dma_copy", "dma", [b.op(t, "dst", "w"), b.op(hbm, "src", "r", cols=(i * 10240,
                                                                                          (i + 1) * 10240))],
                           line=30).seq)
        b.rec("memset", "vector", [b.op(t, "dst", "w")], line=31, value=0.0)
    for t in dirty:  # the on-chip tiles are used again at the end
        b.rec("dma_copy", "dma", [b.op(hbm, "dst", "w", cols=(0, 10240)), b.op(t, "src", "r")], line=40)
    b.trace.peak_sbuf_bytes = 7 * 40 * KIB
    s = schedule(b.trace, load_params(get_target("trn1")))
    recs = s.trace.records
    saves = [i for i, r in enumerate(recs) if r.opcode == "spill_save"]
    assert saves and {recs[i].attrs["queue"] for i in saves} == {"qSyncSpillReload"}
    load_track = {s.track[i] for i, r in enumerate(recs) if r.line == 30 and r.opcode == "dma_copy"}
    assert len(load_track) == 1 and load_track.isdisjoint({s.track[i] for i in saves})
