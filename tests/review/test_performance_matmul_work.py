"""The Performance line that names redundant matmul work (issue 28: ``flash_attention_fwd/no_block_skipping``):
the trace's executed Tensor-engine FLOPs against the task's own ``[perf] flops`` at the traced shape. The FLOP
counts below are written by hand from the task's formula (flash_attention_fwd: 2*S*S*D, the causal half)."""

from __future__ import annotations

import pytest

from nkieval.review.model import CaseResult
from nkieval.review.rubric import load_rubric
from nkieval.review.scoring import Evidence, score_performance
from nkieval.tasks.loader import load_task, resolve_task_dir

RUBRIC = load_rubric()
CRIT = next(c for c in RUBRIC.criteria if c.id == "performance")
TASK = load_task(resolve_task_dir("flash_attention_fwd"))
SHAPE = {"D": 128, "S": 4096}
NEED = 2 * 4096 * 4096 * 128  # the task's count at SHAPE


def _score(done: float | None, expert: float | None = None, task=TASK):
    case = CaseResult("hidden2/normal", dict(SHAPE), True, "normal", 7, "ok", True)
    perf = {"candidate": {"_total_time": 2.0, "summary": {} if done is None else {"model_flops": done}},
            "baseline": None,
            "solution": None if expert is None else {"_total_time": 1.0, "summary": {"model_flops": expert}}}
    ev = Evidence(task=task, rubric=RUBRIC, target="trn2", cases=[case], hw_case=case, perf=perf)
    return [f for f in score_performance(ev, CRIT).feedback if f.key == "performance:matmul_work"]


def test_the_threshold_is_the_documented_one():
    assert float(RUBRIC.t("performance", "matmul_work_factor_max")) == 1.5


def test_twice_the_task_flops_is_named_with_both_figures():
    (f,) = _score(2.0 * NEED)
    assert f.observed.startswith("executes 2.00x the matmul FLOPs the task needs")
    assert "redundant matmul work" in f.observed
    assert f"{NEED / 1e9:.3g} GFLOP" in f.observed and "D=128, S=4096" in f.observed
    assert f.evidence["value"] == 2.0 * NEED and f.evidence["reference"] == NEED
    assert f.severity == "warning" and f.confidence == "measured"


@pytest.mark.parametrize("ratio,named", [(1.0, False), (1.49, False), (1.5, True), (3.0, True)])
def test_only_a_clear_excess_is_named(ratio, named):
    assert bool(_score(ratio * NEED)) is named


def test_an_expert_that_does_the_same_work_clears_the_candidate():
    # the task's count leaves out work every kernel does: not the candidate's fault
    assert _score(2.0 * NEED, expert=1.9 * NEED) == []
    (f,) = _score(2.0 * NEED, expert=1.1 * NEED)
    assert "the expert executes 1.10x" in f.observed


def test_no_line_without_a_count_or_for_data_dependent_work():
    assert _score(None) == []
    import dataclasses

    moe = dataclasses.replace(TASK, tags=(*TASK.tags, "moe"))
    assert _score(2.0 * NEED, task=moe) == []
    no_flops = dataclasses.replace(TASK, perf=dataclasses.replace(TASK.perf, flops=None))
    assert _score(2.0 * NEED, task=no_flops) == []
