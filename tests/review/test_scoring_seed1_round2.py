"""Review wording and hack confirmation where mutation testing (seed 1, second round) found them unchecked
(issue #25, item 5). Expectations come from what each line must say (docs/reports.md) and from the rule that only
an error-severity static hack finding can be confirmed by the run."""

from __future__ import annotations

from nkieval.review.model import CaseResult
from nkieval.review.scoring import _group_feedback, _group_key, _numerics_feedback
from nkieval.review.verdict import confirmed_hacks
from nkieval.tasks.loader import builtin_tasks

RMSNORM = next(t for t in builtin_tasks() if t.id == "rmsnorm")


def _bad_output(case: str = "public-0/normal") -> CaseResult:
    c = CaseResult(case, {"N": 256, "D": 64}, False, "normal", 7, "bad-output")
    c.error = {"message": "returned an input array"}
    return c


def test_only_an_error_severity_hack_finding_is_confirmed():
    finding = {"rule": "NKI042", "line": 12, "message": "writes host data into the output"}
    cases = [_bad_output()]
    assert confirmed_hacks([{**finding, "severity": "error"}], cases, []) == [
        "candidate.py:12 [NKI042] writes host data into the output; confirmed by the run: "
        "public-0/normal: returned an input array"]
    assert confirmed_hacks([{**finding, "severity": "warning"}], cases, []) == []


def test_a_nonfinite_group_names_the_rows_it_affects():
    c = CaseResult("public-0/normal", {"N": 256, "D": 64}, False, "normal", 7, "ok", correct=False)
    c.mismatch = {"kind": "nonfinite", "output": "out", "count": 64, "total": 16384, "nan": 64, "inf": 0,
                  "first_index": [5, 0], "last_index": [5, 63], "rows_affected": 1}
    fb = _group_feedback([c], RMSNORM)
    assert "indices [5, 0]..[5, 63]; rows 1; " in fb.observed, fb.observed


def test_a_value_mismatch_is_grouped_by_its_output_not_as_unwritten():
    c = CaseResult("public-0/normal", {"N": 256, "D": 64}, False, "normal", 7, "ok", correct=False)
    c.mismatch = {"kind": "mismatch", "output": "out", "count": 1, "total": 16384, "worst_index": [1, 2]}
    assert _group_key(c, RMSNORM) == "correctness:mismatch:out"


def _numerics_case(case: str, margin: float) -> CaseResult:
    c = CaseResult(case, {"N": 256, "D": 64}, False, "normal", 7, "ok", correct=True)
    c.numerics = {"status": "fail", "margin": margin, "deciding_gate": "G2",
                  "worst": [{"index": [3, 4], "got": 1.5, "expected": 1.0, "bound": 1e-3}], "findings": []}
    c.outputs = [{"name": "out", "numerics": {"status": "fail", "margin": margin}}]
    return c


def test_a_group_of_margins_9_and_10_states_the_range():
    """Two cases at margins 9 and 10: "margin 9..10" (the texts "9" and "10" differ)."""
    fb = _numerics_feedback("numerics:x", [_numerics_case("public-0/normal", 9.0),
                                            _numerics_case("hidden-1/normal", 10.0)], [], RMSNORM, "acc=fp32", set())
    assert "margin 9..10 (error/bound" in fb.observed, fb.observed


def test_one_output_disagreeing_with_the_cuda_kernel_is_worded_in_the_singular():
    """docs/reports.md: "output values disagrees with the CUDA kernel ... compare the port's formula for this
    output" (the output's name is not repeated inside its own disagreement)."""
    from nkieval.review.model import CriterionResult
    from nkieval.review.rubric import load_rubric
    from nkieval.review.scoring import Evidence, score_migration

    task = next(t for t in builtin_tasks() if t.id == "topk")
    rubric = load_rubric()
    crit = next(c for c in rubric.criteria if c.id == "migration")
    bad = CaseResult("public-0/normal", {}, False, "normal", 1, "ok", correct=False)
    passed = CriterionResult("x", "x", 1.0, "pass", 4, "")
    values = {"output": "values", "verdict": "disagree", "tol_ratio": 12.0, "observed": 0.5, "envelope": 1e-3,
              "cases": 2, "worst": {"case": "public-0/normal", "index": [3, 1], "gpu": 1.0, "port": 2.0}}
    ev = Evidence(task=task, rubric=rubric, target="trn2", cases=[bad], migration=[],
                  differential={"causes": [], "unexplained": ["values"], "outputs": [values]})
    found = [f for f in score_migration(ev, crit, passed, passed).feedback if "disagree" in f.observed]
    assert len(found) == 1
    assert found[0].observed.startswith("output values disagrees with the CUDA kernel run on the same inputs "
                                        "(public-0/normal: 12x the tolerance"), found[0].observed
    assert found[0].suggestion.startswith("compare the port's formula for this output"), found[0].suggestion
