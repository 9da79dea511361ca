"""The three review-scoring mutants left open by the seed-1 mutation run (issue #25, item 5):

* ``score_migration`` cites an agreeing static finding in the same line as its run-time evidence (docs/reports.md:
  a finding the runs confirm is cited with its dynamic evidence, no double penalty): a literal port with MIG001,
  a precision loss with MIG003;
* ``score_correctness`` puts a failing case whose cause was not diagnosed on the line of a diagnosed case with the
  same symptom on the same output, also when that line's key is the diagnosed cause, not the output.
"""

from __future__ import annotations

from nkieval.review.evidence import HardwareEvidence
from nkieval.review.model import CaseResult, CriterionResult, Feedback
from nkieval.review.rubric import load_rubric
from nkieval.review.scoring import Evidence, score_correctness, score_migration
from nkieval.tasks.loader import builtin_tasks

TASKS = {t.id: t for t in builtin_tasks()}
RUBRIC = load_rubric()
MIGRATION = next(c for c in RUBRIC.criteria if c.id == "migration")
CORRECTNESS = next(c for c in RUBRIC.criteria if c.id == "correctness")
PASSED = CriterionResult("x", "x", 1.0, "pass", 4, "")


def _hw(util: float, instructions: int) -> HardwareEvidence:
    return HardwareEvidence(instructions=instructions, per_engine={}, per_opcode={}, compute_instructions=0,
                            partition_utilisation=util, median_free_elements=512.0, tiny_instruction_share=0.0,
                            dma_count=0, hbm_read_bytes=0, hbm_write_bytes=0, dma_median_bytes_per_partition=4096.0,
                            small_dma_share=0.0, matmul_count=0, matmul_accumulating=0, psum_reads=0,
                            peak_sbuf_bytes=0, peak_psum_bytes=0, sbuf_capacity=1, psum_capacity=1)


def test_a_literal_port_cites_the_agreeing_mig001_finding_in_its_line():
    """0.05 of 128 partitions (6.4, printed 6) and 100 instructions against the expert's 10 (10x): the rubric's
    literal-port pattern; the static MIG001 finding at line 7 agrees and is cited in the same line."""
    ok = CaseResult("public-0/normal", {}, False, "normal", 1, "ok", correct=True)
    ev = Evidence(task=TASKS["adamw_step"], rubric=RUBRIC, target="trn2", cases=[ok],
                  migration=[{"rule": "MIG001", "severity": "error", "line": 7, "message": "one thread per element"}],
                  hw=_hw(0.05, 100), hw_solution=_hw(1.0, 10))
    r = score_migration(ev, MIGRATION, PASSED, PASSED)
    lines = [f for f in r.feedback if f.key == "layout:partitions"]
    assert [f.observed for f in lines] == [
        "literal port: 6/128 partitions per instruction and 100 instructions (10x the expert); "
        "static check MIG001 line 7 agrees"], r.feedback
    assert lines[0].brief == "a literal port of the CUDA threads (static check MIG001 line 7 agrees)"
    assert r.level == 2  # 4 - 2 for the literal port; the agreeing finding is not counted again


def test_a_precision_loss_cites_the_agreeing_mig003_finding_in_its_line():
    """A case correct by the task's tolerance whose numerics fail: the port does not keep the CUDA precision; the
    static MIG003 finding at line 4 names the clause and is cited in the same line, message included."""
    c = CaseResult("public-0/normal", {}, False, "normal", 1, "ok", correct=True)
    c.numerics = {"status": "fail"}
    numerics = CriterionResult("numerics", "Numerics", 1.0, "fail", 1, "accumulates in bf16",
                               [Feedback("numerics", "error", "x", "y", "z", {}, key="numerics:acc")])
    ev = Evidence(task=TASKS["adamw_step"], rubric=RUBRIC, target="trn2", cases=[c],
                  migration=[{"rule": "MIG003", "severity": "error", "line": 4, "message": "float accumulator"}])
    r = score_migration(ev, MIGRATION, PASSED, numerics)
    lines = [f for f in r.feedback if f.key == "numerics:acc"]
    assert [f.observed for f in lines] == [
        "numerical standard: accumulates in bf16; static check MIG003 line 4: float accumulator"], r.feedback
    assert lines[0].brief == "the port does not keep the CUDA kernel's precision (static check MIG003 line 4)"
    assert r.level == 3  # one level for the precision; MIG003 is confirmed, not counted again


def _mismatching(case: str, hidden: bool, numerics: dict) -> CaseResult:
    c = CaseResult(case, {"N": 256, "D": 64}, hidden, "normal", 1, "ok", correct=False)
    c.mismatch = {"kind": "mismatch", "output": "out", "count": 3, "total": 256 * 64, "worst_index": [0, 0],
                  "got": 2.0, "expected": 1.0, "abs_error": 1.0, "allowed": 1e-3, "rows_affected": 1}
    c.numerics = numerics
    return c


def test_an_undiagnosed_mismatch_joins_the_line_of_a_reproduced_cause_on_the_same_output():
    """The public case's diagnosis reproduced its cause, so its line is keyed by the cause; the hidden case was not
    diagnosed (the judge diagnoses the first failures only) and has the same symptom on the same output: one line
    naming both cases."""
    reproduced = {"id": "acc_bf16", "cause": "the sum is accumulated in bf16",
                  "evidence": "a bf16-accumulating model reproduces the output"}
    cases = [_mismatching("public-0/normal", False, {"status": "fail", "diagnosis": "done", "findings": [reproduced]}),
             _mismatching("hidden-0/normal", True, {"status": "fail", "diagnosis": "skipped: not among the first",
                                                    "findings": []})]
    r = score_correctness(Evidence(task=TASKS["rmsnorm"], rubric=RUBRIC, target="trn2", cases=cases), CORRECTNESS)
    lines = [f for f in r.feedback if f.severity == "error"]
    assert [f.cases for f in lines] == [["public-0/normal", "hidden-0/normal"]], r.feedback
    assert lines[0].key == "cause:acc_bf16"
