"""Review feedback where mutation testing found it unchecked (issue #25, item 5). Expectations come from what each
line must say (docs/reports.md): a value off by 50 % is wrong, not imprecise; every failing later output is
named; a wrong value counts as a dropped bounds guard only when it lies in the last partial tile of 128 rows."""

from __future__ import annotations

import pytest

from nkieval.review.model import CaseResult
from nkieval.review.scoring import _numerics_feedback, _tail_failure, _tail_seen
from nkieval.tasks.loader import builtin_tasks

RMSNORM = next(t for t in builtin_tasks() if t.id == "rmsnorm")  # one output, out[N, D]


def _failing(got: float, expected: float, correct: bool = True, later_fails: bool = True) -> CaseResult:
    c = CaseResult("public-0/normal", {"N": 256, "D": 64}, False, "normal", 7, "ok", correct=correct)
    c.numerics = {"status": "fail", "margin": 3.0, "deciding_gate": "G2",
                  "worst": [{"index": [3, 4], "got": got, "expected": expected, "bound": 1e-3}], "findings": []}
    c.outputs = [{"name": "out", "numerics": {"status": "fail", "margin": 3.0}},
                 {"name": "aux", "numerics": {"status": "fail" if later_fails else "pass", "margin": 2.0}}]
    return c


def _feedback(c: CaseResult):
    return _numerics_feedback("numerics:x", [c], [], RMSNORM, "acc=fp32", set())


def test_a_value_off_by_half_is_called_wrong_not_imprecise():
    fb = _feedback(_failing(1.5, 1.0))
    assert fb.suggestion.startswith("the values are wrong, not imprecise"), fb.suggestion
    assert "reproduce on public-0/normal, seed 7" in fb.suggestion


def test_a_2_to_the_minus_10_error_on_a_correct_case_is_not_called_wrong():
    fb = _feedback(_failing(1.0 + 2 ** -10, 1.0))
    assert not fb.suggestion.startswith("the values are wrong"), fb.suggestion


def test_every_later_failing_output_is_named():
    assert "; also failing: output(s) aux" in _feedback(_failing(1.5, 1.0)).observed
    assert "also failing: output(s)" not in _feedback(_failing(1.5, 1.0, later_fails=False)).observed


def _value_mismatch(n: int, worst_row: int) -> CaseResult:
    c = CaseResult("hidden-0/normal", {"N": n, "D": 64}, True, "normal", 1, "mismatch", correct=False)
    c.mismatch = {"kind": "mismatch", "output": "out", "worst_index": [worst_row, 0]}
    return c


@pytest.mark.parametrize("n,row,tail", [
    (300, 299, True),  # rows 256..299 are the partial tile: a dropped guard can explain it
    (300, 256, True),
    (300, 255, False),  # inside the two whole tiles: not a bounds problem
    (100, 99, None),  # one tile or less: the case cannot tell
    (128, 127, None),
])
def test_a_value_mismatch_is_a_tail_failure_only_in_the_last_partial_tile(n, row, tail):
    assert _tail_failure(_value_mismatch(n, row), RMSNORM, 128) is tail


def test_unwritten_or_nonfinite_output_is_always_a_possible_tail_failure():
    c = _value_mismatch(300, 0)
    c.mismatch = {"kind": "unwritten", "output": "out", "count": 10, "total": 100}
    assert _tail_failure(c, RMSNORM, 128) is True


def test_a_partial_unwritten_tail_is_seen_whatever_string_object_names_its_kind():
    """The mismatch record arrives from the sandbox as parsed JSON: its strings are not the code's literals."""
    c = CaseResult("hidden-0/normal", {"N": 300, "D": 64}, True, "normal", 1, "mismatch", correct=False)
    c.mismatch = {"kind": "".join(["unwrit", "ten"]), "output": "out", "count": 44 * 64, "total": 300 * 64,
                  "last_index": [299, 63]}
    assert _tail_seen([c], RMSNORM) == {"out"}
    c.mismatch["last_index"] = [255, 63]  # the unwritten elements end before the last row: not a tail
    assert _tail_seen([c], RMSNORM) == set()


def _hw(util: float):
    from nkieval.review.evidence import HardwareEvidence

    return HardwareEvidence(instructions=10, per_engine={}, per_opcode={}, compute_instructions=0,
                            partition_utilisation=util, median_free_elements=512.0, tiny_instruction_share=0.0,
                            dma_count=0, hbm_read_bytes=0, hbm_write_bytes=0, dma_median_bytes_per_partition=4096.0,
                            small_dma_share=0.0, matmul_count=0, matmul_accumulating=0, psum_reads=0,
                            peak_sbuf_bytes=0, peak_psum_bytes=0, sbuf_capacity=1, psum_capacity=1)


@pytest.mark.parametrize("util,driven", [(0.25, "32.0"), (0.05, "6.4")])
def test_the_hardware_line_states_the_partitions_driven_out_of_128(util, driven):
    """Rubric: below 0.5 of 128 partitions is a major defect (below 0.1 a severe one); 0.25 x 128 = 32,
    0.05 x 128 = 6.4."""
    from nkieval.review.rubric import load_rubric
    from nkieval.review.scoring import Evidence, score_hardware

    rubric = load_rubric()
    crit = next(c for c in rubric.criteria if c.id == "hardware")
    r = score_hardware(Evidence(task=RMSNORM, rubric=rubric, target="trn2", cases=[], hw=_hw(util)), crit)
    lines = [f.observed for f in r.feedback if "partitions on average" in f.observed]
    assert lines == [f"compute instructions drive {driven} of 128 partitions on average"], lines


def _migration(findings):
    from nkieval.review.model import CriterionResult
    from nkieval.review.rubric import load_rubric
    from nkieval.review.scoring import Evidence, score_migration

    task = next(t for t in builtin_tasks() if t.id == "adamw_step")  # a task with a CUDA source
    rubric = load_rubric()
    crit = next(c for c in rubric.criteria if c.id == "migration")
    ok = CaseResult("public-0/normal", {}, False, "normal", 1, "ok", correct=True)
    passed = CriterionResult("x", "x", 1.0, "pass", 4, "")
    ev = Evidence(task=task, rubric=rubric, target="trn2", cases=[ok], migration=findings)
    return score_migration(ev, crit, passed, passed)


def test_a_static_finding_the_runs_cannot_test_costs_a_level_and_one_they_contradict_is_kept_as_info():
    """docs/reports.md: a MIG finding the runs cannot test counts on its own (an error: one level); one the runs
    contradict (MIG002's bounds when every case is correct) stays as an info line without penalty."""
    r = _migration([{"rule": "MIG002", "severity": "error", "line": 5, "message": "no tail guard"},
                    {"rule": "MIG005", "severity": "error", "line": 9, "message": "expf is not __expf"}])
    assert r.level == 3, r
    info = [f for f in r.feedback if f.severity == "info"]
    assert [f.observed for f in info] == ["static check MIG002 line 5: no tail guard"]
    assert info[0].suggestion == "none: the runs on every shape contradict it (kept for the record)"
    assert [f.observed for f in r.feedback if f.severity == "error"] == ["MIG005 line 9: expf is not __expf"]
    assert _migration([]).level == 4


def test_an_undiagnosed_mismatch_joins_the_diagnosed_line_of_the_same_output():
    """A failing case whose cause was not diagnosed (the judge diagnoses the first failures only) is listed on the
    line of a diagnosed case with the same symptom on the same output: one line naming both cases."""
    from nkieval.review.rubric import load_rubric
    from nkieval.review.scoring import Evidence, score_correctness

    def bad(case: str, hidden: bool, diagnosis: str) -> CaseResult:
        c = CaseResult(case, {"N": 256, "D": 64}, hidden, "normal", 1, "ok", correct=False)
        c.mismatch = {"kind": "mismatch", "output": "out", "count": 3, "total": 256 * 64,
                      "worst_index": [0, 0], "got": 2.0, "expected": 1.0, "abs_error": 1.0, "allowed": 1e-3,
                      "rows_affected": 1}
        c.numerics = {"status": "fail", "diagnosis": diagnosis, "findings": []}
        return c

    rubric = load_rubric()
    crit = next(c for c in rubric.criteria if c.id == "correctness")
    cases = [bad("public-0/normal", False, "done"), bad("hidden-0/normal", True, "skipped: not among the first")]
    r = score_correctness(Evidence(task=RMSNORM, rubric=rubric, target="trn2", cases=cases), crit)
    lines = [f for f in r.feedback if f.severity == "error"]
    assert len(lines) == 1 and lines[0].cases == ["public-0/normal", "hidden-0/normal"], r.feedback


def test_a_confirmed_differential_cause_names_its_kind_and_costs_two_levels():
    """docs/reports.md: a cause confirmed by re-running the CUDA kernel with the port's variant costs two levels; a
    mutation (not a changed constant) is named by its kind."""
    from nkieval.review.model import CriterionResult
    from nkieval.review.rubric import load_rubric
    from nkieval.review.scoring import Evidence, score_migration

    task = next(t for t in builtin_tasks() if t.id == "adamw_step")
    rubric = load_rubric()
    crit = next(c for c in rubric.criteria if c.id == "migration")
    ok = CaseResult("public-0/normal", {}, False, "normal", 1, "ok", correct=True)
    passed = CriterionResult("x", "x", 1.0, "pass", 4, "")
    cause = {"kind": "formula", "summary": "sqrt is applied after adding eps", "cuda_text": "sqrt(v) + eps",
             "cuda_line": 12, "port_line": 30, "case": "public-0/normal", "reproduced": True,
             "mutation": "sqrt(v + eps)"}
    ev = Evidence(task=task, rubric=rubric, target="trn2", cases=[ok], migration=[],
                  differential={"causes": [cause], "outputs": []})
    r = score_migration(ev, crit, passed, passed)
    assert r.level == 2
    assert [f.observed for f in r.feedback if f.severity == "error"] == [
        "semantic infidelity (formula): sqrt is applied after adding eps"]


def test_outputs_disagreeing_with_the_cuda_kernel_for_no_identified_cause_are_one_finding():
    """docs/reports.md, one finding per cause: two outputs that disagree with the CUDA kernel and whose cause is not
    identified are one migration finding naming both (not the same suggestion twice); the level is charged once, and
    an output that agrees keeps its own envelope line."""
    from nkieval.review.model import CriterionResult
    from nkieval.review.rubric import load_rubric
    from nkieval.review.scoring import Evidence, score_migration

    task = next(t for t in builtin_tasks() if t.id == "topk")
    rubric = load_rubric()
    crit = next(c for c in rubric.criteria if c.id == "migration")
    bad = CaseResult("public-0/normal", {}, False, "normal", 1, "ok", correct=False)
    passed = CriterionResult("x", "x", 1.0, "pass", 4, "")

    def out(name, verdict, ratio=None):
        o = {"output": name, "verdict": verdict, "tol_ratio": ratio, "observed": 0.5, "envelope": 1e-3, "cases": 2}
        if ratio is not None:
            o["worst"] = {"case": "public-0/normal", "index": [3, 1], "gpu": 1.0, "port": 2.0}
        return o

    ev = Evidence(task=task, rubric=rubric, target="trn2", cases=[bad], migration=[],
                  differential={"causes": [], "unexplained": ["values", "indices"],
                                "outputs": [out("values", "disagree", 12.0), out("indices", "disagree", 3.0),
                                            out("extra", "agree")]})
    r = score_migration(ev, crit, passed, passed)
    found = [f for f in r.feedback if "disagree" in f.observed]
    assert len(found) == 1, [f.observed for f in r.feedback]
    f = found[0]
    assert f.severity == "error" and r.level == 3
    assert f.observed.startswith("outputs values, indices disagree with the CUDA kernel")
    assert "values on public-0/normal: 12x the tolerance" in f.observed and "indices on public-0/normal: 3x" in f.observed
    assert f.evidence["outputs"] == ["values", "indices"]
    assert [x.observed.split(":")[0] for x in r.feedback if x.severity == "info"] == ["output extra"]
