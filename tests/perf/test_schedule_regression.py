"""The optimised scheduler reproduces, bit for bit, the schedules of the straightforward version.

The pinned values (record count, total time, start of the last record, SHA-1 of every per-record
output) were first computed with the scheduler before its optimisations (linear scans of the byte-range
tables, no grid index, exact-box index, cached lookups or in-place rewrites); both loops, the Python one and
the compiled one (``nkieval.perf._schedule_c``), are held to them. Model 0.5 changed what the dependency
tables feed (the DMA engines' pool fills idle gaps piece by piece, Trn1's shared ports are granted by time,
the refitted ``dma_fixed_ns``), so the values were recomputed then with the Python loop, the compiled one
agreeing on every case; the byte-range tables they guard were not changed. A change of any start,
end, wait, reason, predecessor or track fails here. The Tensor engine's dI/dt throttling (Trn2), added
to the model later and tested in test_pe_throttle.py, is switched off here. Model round 2 (the Vector data path
per dtype: a BF16 SBUF tensor_tensor add at half its NeuronCore-v2 cost, two fp32 streams at N on Trn2) changed
instruction costs in the three Trn2 ``overlaps`` cases; their values were recomputed then with the Python loop,
the compiled one agreeing; the tables they guard were not changed.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sched_regression import digest, matmul, overlaps, pipeline

from nkieval.hardware import get_target
from nkieval.perf import schedule as sched_mod
from nkieval.perf.params import load_params
from nkieval.perf.schedule import SchedulePolicy, schedule

CASES = {
    "pipeline_trn2": (lambda: pipeline("trn2", 40), "trn2", SchedulePolicy()),
    "pipeline_trn2_physical": (lambda: pipeline("trn2", 40, slots=2), "trn2", SchedulePolicy(mode="physical")),
    "pipeline_trn1_serial": (lambda: pipeline("trn1", 40), "trn1", SchedulePolicy(mode="serial")),
    "pipeline_trn1_depth1": (lambda: pipeline("trn1", 40, slots=3), "trn1", SchedulePolicy(rotation_depth=1)),
    "matmul_trn1": (lambda: matmul("trn1"), "trn1", SchedulePolicy()),
    "matmul_trn1_physical": (lambda: matmul("trn1"), "trn1", SchedulePolicy(mode="physical")),
    "matmul_trn2": (lambda: matmul("trn2"), "trn2", SchedulePolicy()),
    "overlaps_trn2": (lambda: overlaps("trn2", 1), "trn2", SchedulePolicy()),
    "overlaps_trn2_physical": (lambda: overlaps("trn2", 1), "trn2", SchedulePolicy(mode="physical")),
    "overlaps_trn1": (lambda: overlaps("trn1", 2), "trn1", SchedulePolicy()),
    "overlaps_trn2_two_cores": (lambda: overlaps("trn2", 3, two_cores=True), "trn2", SchedulePolicy()),
}

NO_THROTTLE = {"pe_throttle_start_fraction": 1.0}

# name: (records, total_time ns, start of the last record ns, digest): model 0.5, the Python loop
PINNED = {
    "pipeline_trn2": (160, 81711.60220994473, 80506.40883977899, "4520def468c1fc4050022cfe3bcd62d96b1c699d"),
    "pipeline_trn2_physical": (160, 81711.60220994473, 80506.40883977899, "4520def468c1fc4050022cfe3bcd62d96b1c699d"),
    "pipeline_trn1_serial": (160, 168490.75630252124, 166836.0504201683, "dff0905aac2db111863682107b41e20263f56dbb"),
    "pipeline_trn1_depth1": (160, 137402.18487394956, 135747.4789915966, "467c89919952d90b69242a00172849c781101728"),
    "matmul_trn1": (64, 29166.588235294115, 27511.882352941175, "ed53bcc67c4eebd0a415d5973cc0180493509dfd"),
    "matmul_trn1_physical": (64, 29166.588235294115, 27511.882352941175, "d789f343827007f6b016ed872a6fa9471c895486"),
    "matmul_trn2": (64, 19439.68784530387, 18234.494475138123, "0cf4c50ef8f0c7efeaaef1b8de33f45ab6104304"),
    "overlaps_trn2": (400, 163147.73204419893, 163014.39871086561, "60641bcdf1a6769a0cd7f70be3d892bc2cdc246a"),
    "overlaps_trn2_physical": (400, 182543.94290976066, 182490.60957642732, "7e9fa47dd022e601d7d7c87918985bc21168e852"),
    "overlaps_trn1": (400, 165006.35294117653, 164255.1764705883, "717949d95e64950d241b61b0dfbe1edde28ed2da"),
    "overlaps_trn2_two_cores": (400, 142808.82965009197, 140564.7467771638, "a8530f836c45069d44d783f7779f89a5a8d0fdf5"),
}


def test_the_compiled_loop_is_built() -> None:
    """The package's build compiles the loop (a C compiler and Python's headers are part of every machine the
    project runs on); without it ``schedule`` still works, at the Python loop's speed."""
    assert sched_mod._schedule_c is not None


@pytest.mark.parametrize("loop", ["python", "native"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_schedule_matches_the_pinned_pre_optimisation_result(name: str, loop: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    if loop == "native" and sched_mod._schedule_c is None:
        pytest.fail("the compiled scheduler (nkieval.perf._schedule_c) is not built")
    monkeypatch.setattr(sched_mod, "_NATIVE", loop == "native")
    make, target, policy = CASES[name]
    trace = make()
    s = schedule(trace, load_params(get_target(target), NO_THROTTLE), policy)
    n, total, last_start, dig = PINNED[name]
    assert len(trace) == n
    assert s.total_time == total
    assert s.start[n - 1] == last_start
    assert digest(s) == dig


def _with_index(monkeypatch: pytest.MonkeyPatch, on: bool, trace, target: str, policy: SchedulePolicy) -> str:
    monkeypatch.setattr(sched_mod, "_NATIVE", False)  # the grid index is the Python loop's
    monkeypatch.setattr(sched_mod, "_INDEX_MIN", 4 if on else 10**9)
    monkeypatch.setattr(sched_mod, "_MISSES_BEFORE_INDEX", 1)
    return digest(schedule(trace, load_params(get_target(target)), policy))


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10**6), mode=st.sampled_from(["compiler", "physical"]),
       target=st.sampled_from(["trn1", "trn2"]))
def test_grid_index_gives_the_same_schedule_as_linear_scans(seed: int, mode: str, target: str) -> None:
    trace = overlaps(target, seed, n=150)
    pol = SchedulePolicy(mode=mode)
    with pytest.MonkeyPatch.context() as mp:
        grids = []
        real = sched_mod._RangeTable.rebuild

        def counting(self, index):
            real(self, index)
            if self.grid is not None:
                grids.append(1)

        mp.setattr(sched_mod._RangeTable, "rebuild", counting)
        indexed = _with_index(mp, True, trace, target, pol)
        assert grids, "no grid index was built"
        grids.clear()
        linear = _with_index(mp, False, trace, target, pol)
        assert not grids
    assert indexed == linear
