"""The task's own reference kernels' evidence (review/stages/evidence.py): a reference run that ends for a reason of
the machine's (a time limit, a lost process) fails the review as a harness error and is never kept, where it
used to be kept as "no evidence", so that report and every later one of the process lacked the expert's or the
baseline's comparison; a kernel that fails the same way every time keeps its missing evidence."""

from __future__ import annotations

from typing import Any

import pytest

from nkieval.review.runs import CaseRun
from nkieval.review.stages import evidence as stage_evidence
from nkieval.review.verdict import JudgeError
from nkieval.tasks.loader import load_task


@pytest.fixture
def vector_add():
    return load_task("vector_add")


def _ended_with(monkeypatch: pytest.MonkeyPatch, status: str) -> list[int]:
    calls = []

    def fake_run(*args: Any, **kwargs: Any) -> list[CaseRun]:
        calls.append(1)
        return [CaseRun("ref", status, error={"message": f"the run ended with {status}"})]

    monkeypatch.setattr(stage_evidence, "run_candidate", fake_run)
    monkeypatch.setattr(stage_evidence, "_REF_CACHE", {})
    return calls


@pytest.mark.parametrize("status", sorted(stage_evidence.TRANSIENT_STATUSES))
def test_a_reference_run_stopped_by_the_machine_is_a_harness_error_and_not_kept(monkeypatch, vector_add,
                                                                                  status: str) -> None:
    calls = _ended_with(monkeypatch, status)
    for _ in range(2):  # (not kept: the next review runs the reference again)
        with pytest.raises(JudgeError, match=r"reference kernel .* harness fault, retry"):
            stage_evidence._reference_kernel_evidence(vector_add, vector_add.solution_file, "trn2", {"N": 1000},
                                                      "forkserver")
    assert len(calls) == 2 and stage_evidence._REF_CACHE == {}


def test_a_reference_kernel_that_raises_keeps_its_missing_evidence(monkeypatch, vector_add) -> None:
    calls = _ended_with(monkeypatch, "exception")
    for _ in range(2):
        got = stage_evidence._reference_kernel_evidence(vector_add, vector_add.solution_file, "trn2", {"N": 1000},
                                                        "forkserver")
        assert got == (None, None)
    assert len(calls) == 1 and len(stage_evidence._REF_CACHE) == 1
