"""The optimised scheduler reproduces, bit for bit, the schedules of the straightforward version.

The pinned values (record count, total time, start of the last record, SHA-1 of every per-record
output) were computed with the scheduler before its optimisations (linear scans of the byte-range
tables, no grid index, exact-box index, cached lookups or in-place rewrites); both loops, the Python one and
the compiled one (``nkieval.perf._schedule_c``), are held to them. A change of any start,
end, wait, reason, predecessor or track fails here. The Tensor engine's dI/dt throttling (Trn2), added
to the model later and tested in test_pe_throttle.py, is switched off here.
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

# name: (records, total_time ns, start of the last record ns, digest) from the pre-optimisation scheduler
PINNED = {
    "pipeline_trn2": (160, 83311.60220994471, 82206.40883977897, "979c9fd6e4959928f4581c501531ff9a4a59c03b"),
    "pipeline_trn2_physical": (160, 83311.60220994471, 82206.40883977897, "979c9fd6e4959928f4581c501531ff9a4a59c03b"),
    "pipeline_trn1_serial": (160, 160490.7563025212, 158936.05042016823, "ab5f5ddad57ab0cf49aa45e1ae454336023ab1f8"),
    "pipeline_trn1_depth1": (160, 152690.75630252113, 151136.05042016818, "37a0804d74cb7651a13b5bb25581035fd3613fb3"),
    "matmul_trn1": (64, 31032.35294117647, 29477.647058823528, "84121de1ac08729f64fc9e04ebd766d11ea4aa3d"),
    "matmul_trn1_physical": (64, 31032.35294117647, 29477.647058823528, "84121de1ac08729f64fc9e04ebd766d11ea4aa3d"),
    "matmul_trn2": (64, 18982.839779005524, 17877.646408839777, "389d2caab8706a9af007a646ab9043c24ffe55ea"),
    "overlaps_trn2": (400, 166522.9659300185, 166322.9659300185, "5623ab9883afeffa60c654474cf231e00ed7b620"),
    "overlaps_trn2_physical": (400, 186422.41804788212, 186369.08471454878, "9350b7f2cace89d1774eb153893a7c26d4808329"),
    "overlaps_trn1": (400, 161320.4957983194, 160669.31932773118, "555bb0686eadd7e556ace78d8e25c400f46d17c3"),
    "overlaps_trn2_two_cores": (400, 152581.7697974218, 150231.4134438306, "d41ccaa387f91f9ebbbd5e4d8f803bf230b10a3f"),
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
