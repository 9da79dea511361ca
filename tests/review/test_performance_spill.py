"""The performance criterion says when the candidate's estimate carries SBUF spill traffic, or rests on a PSUM excess
the model does not charge for."""

from nkieval.review.rubric import load_rubric
from nkieval.review.scoring import Evidence, score_performance
from nkieval.tasks import load_task


def _perf(total_s: float, spill: int = 0, psum: int = 16384) -> dict:
    summary = {"spill_save_bytes": spill // 2, "spill_reload_bytes": spill - spill // 2,
               "sbuf_peak_bytes_per_partition": 229376, "sbuf_usable_bytes_per_partition": 212984,
               "psum_peak_bytes_per_partition": psum, "psum_peak_percent": 100.0 * psum / 16384}
    return {"_total_time": total_s, "summary": summary}


def _score(cand: dict):
    rubric = load_rubric()
    ev = Evidence(task=load_task("gemm_bf16"), rubric=rubric, target="trn2", cases=[],
                  perf={"candidate": cand, "baseline": _perf(2e-3), "solution": _perf(1e-3)})
    return score_performance(ev, rubric.criterion("performance"))


def test_spill_traffic_is_named_in_the_performance_summary() -> None:
    res = _score(_perf(1.5e-3, spill=302_000_000))
    assert "includes 302.00 MB of SBUF spill traffic (peak 229376 B/partition over the usable 212984)" in res.summary
    assert "spill" in res.feedback[0].observed
    assert res.feedback[0].suggestion.startswith("keep the live tiles within the usable SBUF")


def test_no_spill_no_mention() -> None:
    res = _score(_perf(1.5e-3))
    assert "spill" not in res.summary and "SBUF" not in res.feedback[0].suggestion


def test_a_psum_excess_is_named_as_not_charged_for() -> None:
    res = _score(_perf(1.5e-3, psum=18432))
    assert "its PSUM peak 18432 B/partition exceeds the PSUM, which the model does not charge for" in res.summary
    assert "keep at most the PSUM's banks of accumulators live at once" in res.feedback[0].suggestion
    full = _score(_perf(1.5e-3, psum=16384))  # exactly full: fine
    assert "PSUM" not in full.summary and "PSUM" not in full.feedback[0].suggestion
