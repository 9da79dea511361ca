"""Issue 31 item 3, sixth pass: the simulator's per-tile and per-run overhead cut without changing what it records.

* a tile's block is freed by a weak reference registered per tile (no longer ``weakref.finalize``): exactly
  once, whether the tile dies by reference count, in a garbage cycle, or is released first by a replay; and
  making one leaves no cyclic garbage behind;
* full garbage collections are paced while a kernel runs, and CPython's thresholds come back after;
* the live-range sweep finds its peak in one pass and lists the tiles live there afterwards: the same
  peak, position and tiles (in the same order) as a sweep that lists them at every new peak (a model here).
"""

from __future__ import annotations

import gc
import threading

import nki.language as nl
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from nkieval.sim import gc_pacing
from nkieval.sim.capacity import _running_sum
from nkieval.sim.memory import SBUF, Allocation, track_lifetime
from nkieval.sim.runner import run_kernel


class _Allocator:
    def __init__(self) -> None:
        self.released: list[int] = []

    def release(self, alloc_id: int) -> None:
        self.released.append(alloc_id)


def _alloc(aid: int) -> Allocation:
    from nkieval.sim import dtypes as dt

    return Allocation(id=aid, buffer=SBUF, name="", dtype=dt.float32, shape=(1, 1),
                      storage=np.zeros((1, 1), np.float32), site=None, program=0)


def test_a_tile_is_released_once_when_its_last_reference_goes():
    al = _Allocator()
    a = _alloc(7)
    track_lifetime(a, al)
    assert al.released == []
    del a
    assert al.released == [7]


def test_a_tile_in_a_garbage_cycle_is_released_by_the_collector():
    al = _Allocator()
    a = _alloc(8)
    track_lifetime(a, al)
    a.cycle = a  # only the cyclic collector can free it
    del a
    assert al.released == []
    gc.collect()
    assert al.released == [8]


def test_an_explicit_release_runs_once_and_the_later_death_does_nothing():
    al = _Allocator()
    a = _alloc(9)
    track_lifetime(a, al)
    a.release()
    a.release()
    assert al.released == [9]
    del a
    gc.collect()
    assert al.released == [9]


def test_tracking_tiles_leaves_no_cyclic_garbage():
    al = _Allocator()
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for i in range(50):
            a = _alloc(i)
            track_lifetime(a, al)
            del a
        gc.collect()
        garbage = list(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert al.released == list(range(50))
    assert garbage == []


def test_full_collections_are_paced_inside_and_the_thresholds_come_back():
    before = gc.get_threshold()
    with gc_pacing.fewer_full_collections():
        inside = gc.get_threshold()
        with gc_pacing.fewer_full_collections():  # nested (or concurrent) runs keep the pacing
            assert gc.get_threshold() == inside
        assert gc.get_threshold() == inside
    assert inside[:2] == before[:2] and inside[2] == max(before[2], gc_pacing.FULL_EVERY)
    assert gc.get_threshold() == before


def test_the_thresholds_come_back_after_concurrent_runs_and_a_failing_kernel():
    before = gc.get_threshold()
    seen: list[tuple[int, ...]] = []

    def kernel(a):
        seen.append(gc.get_threshold())
        nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.sbuf)
        raise ValueError("the kernel fails")

    def run() -> None:
        try:
            run_kernel(kernel, [np.zeros((4, 4), np.float32)])
        except Exception:
            pass

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen and all(s[2] == max(before[2], gc_pacing.FULL_EVERY) for s in seen)
    assert gc.get_threshold() == before


def _model_sweep(events, items):
    """The sweep as it was: the live tiles listed at every new peak."""
    live: set[int] = set()
    best, best_seq, best_live = 0, 0, ()
    total = 0
    for seq, kind, i in events:
        if kind == -1:
            total -= items[i][2].bytes_per_partition
            live.discard(i)
        else:
            total += items[i][2].bytes_per_partition
            live.add(i)
            if total > best:
                best, best_seq, best_live = total, int(seq), tuple(items[j][2] for j in live)
    return best, best_seq, best_live


class _Tile:
    def __init__(self, n: int) -> None:
        self.bytes_per_partition = n


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 12), st.sampled_from([0, 64, 512, 2048])),
                max_size=60))
def test_running_sum_equals_a_sweep_that_lists_the_live_tiles_at_every_peak(spans):
    items = [[lo, lo + n, _Tile(b)] for lo, n, b in spans]
    events = []
    for i, (lo, hi, _t) in enumerate(items):
        events.append((lo, 0, i))
        events.append((hi + 0.25, -1, i))
    # a plain sort orders them as the stable sort by (position, kind) did
    assert sorted(events) == sorted(events, key=lambda e: (e[0], e[1]))
    events.sort()
    best, seq, live = _running_sum(events, items)
    m_best, m_seq, m_live = _model_sweep(events, items)
    assert (best, seq) == (m_best, m_seq)
    assert [id(t) for t in live] == [id(t) for t in m_live]  # the same tiles, in the same order
