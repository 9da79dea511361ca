"""The performance criterion's levels and its summary (issue #25, item 5: mutants of ``score_performance``
survived). Expectations from the rubric nki-review-v1 (``[thresholds.performance]``: level 4 at 80 % of the
expert's speed; against the baseline, level 3 from a 1.1x speed-up, 2 from 0.9x, 1 from 0.5x) and times chosen by
hand."""

from __future__ import annotations

import pytest

from nkieval.review.rubric import load_rubric
from nkieval.review.scoring import Evidence, score_performance

RUBRIC = load_rubric()
CRIT = next(c for c in RUBRIC.criteria if c.id == "performance")


def _score(cand: float, base: float | None = None, sol: float | None = None, summary: dict | None = None):
    perf = {"candidate": {"_total_time": cand, "summary": summary or {}},
            "baseline": None if base is None else {"_total_time": base},
            "solution": None if sol is None else {"_total_time": sol}}
    return score_performance(Evidence(task=None, rubric=RUBRIC, target="trn2", cases=[], perf=perf), CRIT)


def test_the_rubric_thresholds_are_the_documented_ones():
    assert [float(RUBRIC.t("performance", k)) for k in ("expert_fraction_for_4", "baseline_speedup_for_3",
                                                        "baseline_speedup_for_2", "baseline_speedup_for_1")] == [
        0.8, 1.1, 0.9, 0.5]


@pytest.mark.parametrize("cand,base,sol,level", [  # (times in s; cand 1.0 keeps each ratio exact in binary)
    (1.0, None, 0.8, 4),  # the expert takes 0.8 of the candidate's time: 80 % of its speed
    (1.0, None, 0.79, 2),  # slower than that, no baseline: 2
    (1.0, None, None, 3),  # neither baseline nor expert: 3
    (1.0, 1.1, None, 3),  # 1.1x the baseline
    (1.0, 1.09, None, 2),  # 1.09x
    (1.0, 0.9, None, 2),  # 0.9x
    (1.0, 0.89, None, 1),  # 0.89x
    (1.0, 0.5, None, 1),  # 0.5x
    (1.0, 0.49, None, 0),  # 0.49x
    (1.0, 2.0, 0.5, 3),  # 2x the baseline but half the expert's speed: the baseline decides
])
def test_levels(cand, base, sol, level):
    r = _score(cand, base, sol)
    assert r.level == level
    assert r.verdict == {4: "pass", 3: "partial", 2: "partial", 1: "fail", 0: "fail"}[level]
    assert (r.feedback == []) is (level == 4)
    if r.feedback:
        assert r.feedback[0].severity == ("warning" if level >= 2 else "error")


def test_the_summary_states_the_times_in_microseconds_and_the_ratios():
    r = _score(10e-6, 15e-6, 8e-6)
    assert r.summary == "estimated 10.00 us on trn2; baseline 15.00 us (1.50x); expert 8.00 us (80% of expert speed)"


def test_spill_traffic_is_summed_and_stated_in_megabytes():
    r = _score(10e-6, summary={"spill_save_bytes": 1_500_000, "spill_reload_bytes": 500_000,
                               "sbuf_peak_bytes_per_partition": 250_000, "sbuf_usable_bytes_per_partition": 196_608})
    assert "includes 2.00 MB of SBUF spill traffic (peak 250000 B/partition over the usable 196608)" in r.summary
    assert "spill" in r.feedback[0].suggestion


def test_a_psum_peak_over_100_percent_is_named_as_optimistic():
    assert "exceeds the PSUM" in _score(10e-6, summary={"psum_peak_percent": 100.5}).summary
    assert "exceeds the PSUM" not in _score(10e-6, summary={"psum_peak_percent": 100.0}).summary


def test_no_estimate_is_not_assessed():
    r = score_performance(Evidence(task=None, rubric=RUBRIC, target="trn2", cases=[], perf=None,
                                   perf_reason="raised X"), CRIT)
    assert r.level is None and r.verdict == "not-assessed" and "raised X" in r.summary
