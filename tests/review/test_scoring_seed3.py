"""Review scoring where mutation testing (seed 3) found it unchecked (issue #25, item 5). Expectations come from the
rubric (docs/reports.md, rubrics/nki-review-v1.toml) and from what each line must say, worked by hand."""

from __future__ import annotations

from nkieval.review.evidence import HardwareEvidence
from nkieval.review.model import CaseResult, CriterionResult
from nkieval.review.rubric import load_rubric
from nkieval.review.scoring import (
    Evidence,
    _numerics_feedback,
    score_hardware,
    score_migration,
    score_numerics,
)
from nkieval.tasks.loader import builtin_tasks

TASKS = {t.id: t for t in builtin_tasks()}
RUBRIC = load_rubric()
CRIT = {c.id: c for c in RUBRIC.criteria}
PASSED = CriterionResult("x", "x", 1.0, "pass", 4, "")


def test_a_two_output_summary_names_only_the_failing_output():
    """flash_attention_fwd has outputs out and lse; on the one judged case lse fails and out passes."""
    task = TASKS["flash_attention_fwd"]
    assert [o.name for o in task.outputs] == ["out", "lse"]
    c = CaseResult("public-0/normal", {}, False, "normal", 1, "ok", correct=True)
    c.numerics = {"status": "pass", "margin": 0.5, "deciding_gate": "G2", "findings": []}
    c.outputs = [{"name": "out", "numerics": {"status": "pass", "margin": 0.5}},
                 {"name": "lse", "numerics": {"status": "fail", "margin": 3.0}}]
    r = score_numerics(Evidence(task=task, rubric=RUBRIC, target="trn2", cases=[c]), CRIT["numerics"])
    assert r.evidence["failing_outputs"] == ["lse"]
    assert r.summary.endswith("; outputs judged: lse, out, failing: lse"), r.summary


def test_a_later_output_failing_alone_is_named_with_its_margin():
    """The first output passes and lse fails: the line names lse and its margin, and says the first passes."""
    task = TASKS["flash_attention_fwd"]
    c = CaseResult("public-0/normal", {"S": 256}, False, "normal", 1, "ok", correct=True)
    c.numerics = {"status": "pass", "margin": 0.5, "deciding_gate": "G2", "findings": []}
    c.outputs = [{"name": "out", "numerics": {"status": "pass", "margin": 0.5}},
                 {"name": "lse", "numerics": {"status": "fail", "margin": 3.0}}]
    fb = _numerics_feedback("numerics:unconfirmed", [c], [], task, "acc=fp32", set())
    assert "output(s) lse (margin 3) fail the numerical standard (error/bound must be <= 1); the first output " \
           "passes" in fb.observed, fb.observed


def _numerics_case(case: str, margin: float) -> CaseResult:
    c = CaseResult(case, {"N": 256, "D": 64}, case.startswith("hidden"), "normal", 7, "ok", correct=True)
    c.numerics = {"status": "fail", "margin": margin, "deciding_gate": "G2",
                  "worst": [{"index": [3, 4], "got": 1.5, "expected": 1.0, "bound": 1e-3}], "findings": []}
    c.outputs = [{"name": "out", "numerics": {"status": "fail", "margin": margin}}]
    return c


def test_a_group_of_two_numerics_cases_lists_one_more_case():
    fb = _numerics_feedback("numerics:unconfirmed", [_numerics_case("public-0/normal", 9.0),
                                                     _numerics_case("hidden-1/normal", 10.0)],
                            [], TASKS["rmsnorm"], "acc=fp32", set())
    assert "; also failing, cause not confirmed, in 1 more case(s): hidden-1/normal" in fb.observed, fb.observed


def test_a_mig003_finding_counts_as_untestable_when_no_case_was_judged_numerically():
    """docs/reports.md: a static finding the runs cannot test counts on its own (an error: one level). MIG003 is
    contradicted only by a numerics pass; with no numerics judged it is untestable, not contradicted."""
    ok = CaseResult("public-0/normal", {}, False, "normal", 1, "ok", correct=True)
    finding = {"rule": "MIG003", "severity": "error", "line": 4, "message": "float accumulator"}
    ev = Evidence(task=TASKS["adamw_step"], rubric=RUBRIC, target="trn2", cases=[ok], migration=[finding])
    r = score_migration(ev, CRIT["migration"], PASSED, PASSED)
    assert r.level == 3
    assert [f.observed for f in r.feedback if f.severity == "error"] == ["MIG003 line 4: float accumulator"]
    assert not [f for f in r.feedback if f.severity == "info"]


def _hw(reload: float | None) -> HardwareEvidence:
    return HardwareEvidence(instructions=10, per_engine={}, per_opcode={}, compute_instructions=0,
                            partition_utilisation=1.0, median_free_elements=512.0, tiny_instruction_share=0.0,
                            dma_count=0, hbm_read_bytes=0, hbm_write_bytes=0, dma_median_bytes_per_partition=4096.0,
                            small_dma_share=0.0, matmul_count=0, matmul_accumulating=0, psum_reads=0,
                            peak_sbuf_bytes=0, peak_psum_bytes=0, sbuf_capacity=1, psum_capacity=1,
                            reload_factor=reload)


def test_the_reload_limit_is_the_rubric_factor_times_the_experts_reload():
    """reload_factor_max = 1.5 "or 1.5 x the expert's": with the expert reading its inputs 2.0x, the limit is 3.00x;
    3.2x is flagged, 2.9x is not."""
    def reload_lines(rf: float) -> list:
        ev = Evidence(task=TASKS["rmsnorm"], rubric=RUBRIC, target="trn2", cases=[], hw=_hw(rf),
                      hw_solution=_hw(2.0))
        return [f for f in score_hardware(ev, CRIT["hardware"]).feedback if "HBM reads" in f.observed]

    flagged = reload_lines(3.2)
    assert [f.expected for f in flagged] == ["each input read about once (<= 3.00x)"], flagged
    assert reload_lines(2.9) == []


def test_a_rule_violation_other_than_a_host_read_is_a_plain_fail():
    """Only a trace-time read of a device value is a suspected hack; a kernel that breaks another simulator rule
    on every case fails with that rule's status as the reason."""
    from nkieval.review.verdict import decide

    c = CaseResult("public-0/normal", {"N": 256, "D": 64}, False, "normal", 1, "rule-violation", correct=False)
    c.error = {"rule": "sbuf-capacity", "message": "SBUF peak exceeds the partition"}
    d = decide([], [c], [])
    assert (d.verdict, d.reason) == ("fail", "rule-violation"), d
    c.error = {"rule": "trace-time-value", "message": "reads a device value", "location": "candidate.py:9"}
    assert decide([], [c], []).reason == "reads-device-values"


def test_a_reproduced_cause_quotes_the_evidence_of_the_top_finding():
    """The diagnosis lists its findings best first: the quoted evidence is the first (reproduced) finding's."""
    from nkieval.review.scoring import _group_feedback

    c = CaseResult("public-0/normal", {"N": 256, "D": 64}, False, "normal", 7, "ok", correct=False)
    c.mismatch = {"kind": "mismatch", "output": "out", "count": 3, "total": 256 * 64, "worst_index": [0, 0],
                  "got": 2.0, "expected": 1.0, "abs_error": 1.0, "allowed": 1e-3, "rows_affected": 1}
    c.numerics = {"status": "fail", "findings": [
        {"id": "acc_bf16", "cause": "the sum is accumulated in bf16",
         "evidence": "a bf16-accumulating model reproduces the output"},
        {"id": "constant_factor", "cause": "a constant factor", "evidence": "ratio 1.01"}]}
    fb = _group_feedback([c], TASKS["rmsnorm"])
    assert "(a bf16-accumulating model reproduces the output)" in fb.observed, fb.observed
