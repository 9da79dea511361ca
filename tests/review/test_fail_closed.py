"""Fail closed: a judge component that raises, in any stage, makes the review a harness error (exit 3)
naming the component; never a pass, never "not assessed", never the candidate's fault (issue #25, item 2).

Each case injects a raising function at one judge component and runs the CLI on a candidate that
otherwise passes (or, for the diagnosis, fails numerically): the exit code must be 3, the message must
name the component and carry the injected error. Distinct seeds keep the per-process case cache (which
holds prepared numerics checks) from hiding the injection.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from click.testing import CliRunner

from nkieval.cli import main
from nkieval.review import adapters, review
from nkieval.review.sandbox import CaseRun
from nkieval.review.stages import evidence as stage_evidence
from nkieval.review.verdict import JudgeError
from nkieval.tasks import BUILTIN_ROOT

SOLUTION = BUILTIN_ROOT / "vector_add" / "solution_nki.py"
SKIPS_TAIL = BUILTIN_ROOT / "vector_add" / "flawed" / "skips_tail.py"


def _raise(*a: object, **k: object) -> Any:
    raise RuntimeError("injected judge failure")


def _cli(*args: str) -> Any:
    return CliRunner().invoke(main, ["review", *args, "--no-progress"])


# (component the message must name, module, attribute path to replace, candidate, seed)
INJECTIONS = [
    ("numerics", "nkieval.numerics", "PreparedCheck.__init__", SOLUTION, 101),
    ("numerics", "nkieval.numerics", "PreparedCheck.check", SOLUTION, 102),
    ("numerics", "nkieval.numerics", "PreparedCheck.diagnose", SKIPS_TAIL, 103),
    ("compare", "nkieval.review.stages.judge", "compare_each", SOLUTION, 104),
    ("perf", "nkieval.perf", "estimate", SOLUTION, 105),
    ("evidence", "nkieval.review.stages.evidence", "trace_evidence", SOLUTION, 106),
    ("analysis", "nkieval.analysis", "analyze_port", SOLUTION, 107),
    ("analysis", "nkieval.analysis", "parse_cuda", SOLUTION, 108),
    ("scoring", "nkieval.review.stages.score", "score_all", SOLUTION, 109),
    ("physics", "nkieval.review.stages.score", "roofline_violation", SOLUTION, 110),
    ("verdict", "nkieval.review.stages.score", "decide", SOLUTION, 111),
]


@pytest.mark.parametrize("component,module,attr,candidate,seed", INJECTIONS,
                         ids=[f"{m}.{a}" for _, m, a, _, _ in INJECTIONS])
def test_a_raising_judge_component_is_exit_3_naming_it(monkeypatch, component, module, attr, candidate, seed):
    obj: Any = importlib.import_module(module)
    *path, name = attr.split(".")
    for p in path:
        obj = getattr(obj, p)
    monkeypatch.setattr(obj, name, _raise)
    monkeypatch.setattr(adapters, "_CUDA_CACHE", {})  # the task's CUDA parse is cached per process
    # (and a source's static findings: an earlier review of the same candidate would have kept them)
    monkeypatch.setattr(stage_evidence, "_STATIC", stage_evidence._KeptFindings(stage_evidence.STATIC_KEPT))
    r = _cli("vector_add", str(candidate), "--seed", str(seed))
    assert r.exit_code == 3, r.output
    assert f"judge component '{component}'" in r.output and "injected judge failure" in r.output, r.output
    assert "Traceback" not in r.output


def test_the_same_candidate_passes_without_injection():
    """The control: the candidates above pass (SOLUTION) or fail numerically (SKIPS_TAIL) with the judge intact,
    so exit 3 above is the injection's doing."""
    assert _cli("vector_add", str(SOLUTION), "--seed", "101").exit_code == 0
    assert _cli("vector_add", str(SKIPS_TAIL), "--seed", "103").exit_code == 1


def test_an_unreadable_evidence_trace_from_the_replay_is_a_harness_error(monkeypatch):
    """With trace-then-execute (the default), the evidence trace is written by the judge's own replay,
    never by candidate code: one the harness cannot read is the harness's failure, not a pass with
    hardware and performance "not assessed"."""
    from nkieval.review.stages import evidence

    real = evidence.trace_facts

    def garbled(task: Any, run: CaseRun, *a: Any, **k: Any) -> Any:
        return real(task, CaseRun(run.label, "ok", trace_json="{"), *a, **k)

    monkeypatch.setattr(evidence, "trace_facts", garbled)
    with pytest.raises(JudgeError) as ei:
        review("vector_add", SOLUTION, seed=112)
    assert ei.value.component == "evidence" and "could not be read" in str(ei.value)
