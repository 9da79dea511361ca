"""Correctness and numerics feedback lines and the hardware DMA check where mutation testing (seed 2) found them
unchecked (issue #25, item 5). Expectations come from what each line must say (docs/reports.md): the group's first
case is the one quoted; a matched-pattern cause is stated without a reproduction's evidence; an error's location
is its innermost frame; a tiny relative error is imprecision, not a wrong value; small DMAs are flagged when the
expert's own DMAs are large enough."""

from __future__ import annotations

from nkieval.review.model import CaseResult
from nkieval.review.scoring import _group_feedback, _numerics_feedback
from nkieval.tasks.loader import builtin_tasks

RMSNORM = next(t for t in builtin_tasks() if t.id == "rmsnorm")


def _mismatch(case: str, n: int, seed: int, finding: dict | None = None) -> CaseResult:
    c = CaseResult(case, {"N": n, "D": 64}, False, "normal", seed, "ok", correct=False)
    c.mismatch = {"kind": "mismatch", "output": "out", "count": n * 64, "total": n * 64, "worst_index": [1, 2],
                  "got": 3.0, "expected": 1.0, "abs_error": 2.0, "allowed": 1e-3, "rows_affected": n}
    c.numerics = {"findings": [finding]} if finding else None
    return c


def test_a_group_quotes_its_first_case_and_lists_the_others():
    fb = _group_feedback([_mismatch("public-0/normal", 256, 7), _mismatch("hidden-3/normal", 512, 9)], RMSNORM)
    assert fb.observed.startswith("public-0/normal (N=256, D=64; normal, seed 7): 16,384 of 16,384"), fb.observed
    assert "the same in 1 more case(s): hidden-3/normal" in fb.observed, fb.observed
    assert "public-0/normal" in fb.suggestion and "seed 7" in fb.suggestion, fb.suggestion


def test_a_matched_pattern_cause_is_stated_without_a_reproductions_evidence():
    finding = {"id": "constant_factor", "cause": "the output is off by a constant factor 3",
               "evidence": "got ≈ 3·expected", "action": "check scale factors"}
    fb = _group_feedback([_mismatch("public-0/normal", 256, 7, finding)], RMSNORM)
    assert fb.observed.endswith("; likely cause (matched pattern): the output is off by a constant factor 3"), \
        fb.observed
    assert "got ≈ 3·expected" not in fb.observed
    reproduced = {**finding, "id": "scale", "evidence": "evaluating that formula reproduces the kernel's output"}
    fb = _group_feedback([_mismatch("public-0/normal", 256, 7, reproduced)], RMSNORM)
    assert fb.observed.endswith("(evaluating that formula reproduces the kernel's output)"), fb.observed


def test_an_errors_location_is_its_innermost_frame():
    c = CaseResult("public-0/normal", {"N": 256, "D": 64}, False, "normal", 7, "exception")
    c.error = {"error_type": "ValueError", "message": "bad", "frames": ["kernel.py:10 in k", "kernel.py:42 in helper"]}
    fb = _group_feedback([c], RMSNORM)
    assert fb.observed.endswith("ValueError bad at kernel.py:42 in helper"), fb.observed


def test_a_tiny_relative_error_without_a_precision_match_is_imprecision_not_a_wrong_value():
    """1 + 2^-16 against 1: 16 significand bits (no bf16/fp16 pattern), relative error 1.5e-5 < 1 %."""
    c = CaseResult("public-0/normal", {"N": 256, "D": 64}, False, "normal", 7, "ok", correct=True)
    c.numerics = {"status": "fail", "margin": 3.0, "deciding_gate": "G2",
                  "worst": [{"index": [3, 4], "got": 1.0 + 2 ** -16, "expected": 1.0, "bound": 1e-6}], "findings": []}
    c.outputs = [{"name": "out", "numerics": {"status": "fail", "margin": 3.0}}]
    fb = _numerics_feedback("numerics:x", [c], [], RMSNORM, "acc=fp32", set())
    assert fb.suggestion == "keep accumulations in fp32 (PSUM) and follow the task's precision recipe", fb.suggestion


def _hw(dma_bytes: float):
    from nkieval.review.evidence import HardwareEvidence

    return HardwareEvidence(instructions=10, per_engine={}, per_opcode={}, compute_instructions=0,
                            partition_utilisation=1.0, median_free_elements=512.0, tiny_instruction_share=0.0,
                            dma_count=4, hbm_read_bytes=0, hbm_write_bytes=0, dma_median_bytes_per_partition=dma_bytes,
                            small_dma_share=0.0, matmul_count=0, matmul_accumulating=0, psum_reads=0,
                            peak_sbuf_bytes=0, peak_psum_bytes=0, sbuf_capacity=1, psum_capacity=1)


def test_small_dmas_are_flagged_when_the_experts_dmas_are_large():
    """Rubric: a median DMA under dma_bytes_per_partition_min (2 KiB) is a defect, unless the expert solution's own
    median is under it too (the task cannot do better)."""
    from nkieval.review.rubric import load_rubric
    from nkieval.review.scoring import Evidence, score_hardware

    rubric = load_rubric()
    dmin = float(rubric.t("hardware", "dma_bytes_per_partition_min"))
    crit = next(c for c in rubric.criteria if c.id == "hardware")

    def dma_lines(expert: float) -> list[str]:
        ev = Evidence(task=RMSNORM, rubric=rubric, target="trn2", cases=[], hw=_hw(dmin / 2), hw_solution=_hw(expert))
        return [f.observed for f in score_hardware(ev, crit).feedback if "median DMA moves" in f.observed]

    assert len(dma_lines(dmin)) == 1 and len(dma_lines(4 * dmin)) == 1
    assert dma_lines(dmin / 4) == []
