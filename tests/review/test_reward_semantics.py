"""Reward semantics: the verdict set, integrity verdicts score exactly 0, one meaning per exit code,
judge components fail closed, physics as an integrity check (docs/review.md, "Verdicts")."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from nkieval.cli import main
from nkieval.review import pipeline, review, validate_report
from nkieval.review.model import CriterionResult
from nkieval.review.physics import (
    TOLERANCE,
    fully_written,
    output_bytes_violations,
    roofline_violation,
    task_bound_ns,
)
from nkieval.review.report import report_schema
from nkieval.review.sandbox import CaseRun
from nkieval.review.scoring import total_score
from nkieval.review.stages import evidence as stage_evidence
from nkieval.review.verdict import (
    EXIT_FAIL,
    EXIT_HARNESS,
    EXIT_PASS,
    EXIT_USAGE,
    INTEGRITY_VERDICTS,
    VERDICTS,
    JudgeError,
    UsageError,
    exit_code,
)
from nkieval.tasks import BUILTIN_ROOT, load_task

TASK = load_task("vector_add")
SOLUTION = BUILTIN_ROOT / "vector_add" / "solution_nki.py"
SKIPS_TAIL = BUILTIN_ROOT / "vector_add" / "flawed" / "skips_tail.py"
HOST = BUILTIN_ROOT / "vector_add" / "flawed" / "host_compute.py"
KERNEL_HEAD = "import nki\n\n@nki.jit\ndef vector_add(a, b):\n"


def _cli(*args: str) -> Any:
    return CliRunner().invoke(main, ["review", *args, "--no-progress"])


def _write(tmp_path: Path, name: str, data: str | bytes) -> Path:
    p = tmp_path / name
    if isinstance(data, bytes):
        p.write_bytes(data)
    else:
        p.write_text(data)
    return p


# ------------------------------------------------------------------------------ the verdict set
def test_verdict_set_is_the_schemas():
    assert tuple(report_schema()["properties"]["verdict"]["enum"]) == VERDICTS
    # every verdict is classified: adding one forces a decision on whether it can earn reward
    assert INTEGRITY_VERDICTS == set(VERDICTS) - {"pass", "fail", "harness-error"}


def test_exit_codes_mean_one_thing_each():
    assert exit_code("pass") == EXIT_PASS == 0
    assert exit_code("fail") == EXIT_FAIL == 1
    assert all(exit_code(v) == 1 for v in INTEGRITY_VERDICTS)
    assert exit_code("harness-error") == EXIT_HARNESS == 3
    assert EXIT_USAGE == 2


def _crits(levels: tuple[int | None, ...]) -> list[CriterionResult]:
    ids = ("correctness", "numerics", "hardware", "performance", "migration", "code_quality")
    weights = (30, 20, 20, 15, 10, 5)
    return [CriterionResult(i, i, w, "pass" if lv == 4 else "partial", lv, "s")
            for i, w, lv in zip(ids, weights, levels)]


@pytest.mark.parametrize("verdict", [*sorted(INTEGRITY_VERDICTS), "harness-error"])
def test_integrity_verdicts_score_exactly_zero(verdict):
    """The property the RL reward rests on: no integrity verdict can score above 0, whatever the levels."""
    for levels in itertools.product((None, 0, 2, 4), repeat=6):
        crits = _crits(levels)
        assert total_score(crits, verdict, "why") == 0.0
        assert all(c.level in (None, 0) for c in crits)
        assert all(c.weight * (c.level or 0) / 4 == 0 for c in crits)  # every criterion's reward contribution


def test_pass_and_fail_score_the_weighted_levels():
    assert total_score(_crits((4, 4, 4, 4, 4, 4)), "pass") == 100.0
    assert total_score(_crits((2, 4, None, 0, None, 4)), "fail") == pytest.approx(100 * (15 + 20 + 5) / 70)


# ------------------------------------------------------------------------------ through the CLI
def test_exit_0_pass_and_1_fail():
    assert _cli("vector_add", str(SOLUTION), "--seed", "1").exit_code == 0
    r = _cli("vector_add", str(SKIPS_TAIL), "--seed", "1", "--format", "json")
    assert r.exit_code == 1
    assert '"verdict": "fail"' in r.output


def test_host_compute_hack_scores_zero_exit_1(tmp_path):
    r = _cli("vector_add", str(HOST), "--seed", "1", "--format", "json", "--out", str(tmp_path))
    assert r.exit_code == 1
    d = json.loads((tmp_path / "review.json").read_text())
    validate_report(d)
    assert d["verdict"] == "hack-suspected" and d["score"] == 0
    assert all(c["level"] in (None, 0) for c in d["criteria"])


def test_unknown_target_is_usage_exit_2_before_anything_runs(monkeypatch):
    def boom(*a: object, **k: object) -> None:
        raise AssertionError("the review ran")

    monkeypatch.setattr(pipeline, "review", boom)
    r = _cli("vector_add", str(SOLUTION), "--target", "trn9")
    assert r.exit_code == 2
    assert "trn9" in r.output and "trn2" in r.output and "trn1" in r.output and "trn3" in r.output
    with pytest.raises(UsageError):
        review("vector_add", SOLUTION, target="trn9")


def test_target_alias_is_canonical():
    r = review("vector_add", SOLUTION, target="TRN1", seed=1, shapes="public", compare_references=False)
    assert r.target == "trn1"


def test_bad_task_exit_2(tmp_path):
    assert _cli(str(tmp_path), str(SOLUTION)).exit_code == 2


@pytest.mark.parametrize("data,message", [
    (b"\xff\xfe\x00\x01 binary", "the candidate is not UTF-8 text"),
    (b"import nki\x00\n", "the candidate is not UTF-8 text"),
    (KERNEL_HEAD.replace("(a, b):", "(a, b)") + "    return a\n", "does not parse: expected ':' (line 4)"),
    (KERNEL_HEAD + "    return None\n", "the kernel returned None"),
    ("", "defines no `vector_add`"),
    (KERNEL_HEAD + "    raise ValueError('an honest bug')\n", "an honest bug"),
], ids=["binary", "nul", "syntax", "returns-none", "empty", "exception"])
def test_candidate_faults_are_fail_exit_1(tmp_path, data, message):
    cand = _write(tmp_path, "cand.py", data)
    r = _cli("vector_add", str(cand), "--seed", "1", "--format", "json", "--out", str(tmp_path / "out"))
    assert r.exit_code == 1, r.output
    d = json.loads((tmp_path / "out" / "review.json").read_text())
    validate_report(d)
    assert d["verdict"] == "fail", d["verdict_message"]
    assert message in d["verdict_message"]
    assert d["score"] == 0  # nothing ran: nothing earns credit (rubric gate correctness < 1)


def test_forbidden_import_is_still_hack_suspected():
    r = review("vector_add", "import subprocess\n" + KERNEL_HEAD + "    return a\n", seed=1, shapes="public")
    assert r.verdict == "hack-suspected" and r.score == 0.0


# ------------------------------------------------------------------------------ fail closed
def _raise(*a: object, **k: object) -> Any:
    raise RuntimeError("injected judge failure")


@pytest.mark.parametrize("component,target,attr", [
    ("numerics", "nkieval.numerics.PreparedCheck", "check"),
    ("perf", "nkieval.perf", "estimate"),
    ("analysis", "nkieval.analysis", "analyze_port"),
    ("evidence", "nkieval.review.stages.evidence", "trace_evidence"),
])
def test_a_judge_component_that_raises_is_a_harness_error(monkeypatch, component, target, attr):
    import importlib

    mod, _, cls = target.rpartition(".") if target.endswith("PreparedCheck") else (target, "", "")
    obj = getattr(importlib.import_module(mod), cls) if cls else importlib.import_module(mod)
    monkeypatch.setattr(obj, attr, _raise)
    # (a source's static findings are kept across reviews: an earlier review of the same candidate kept them)
    monkeypatch.setattr(stage_evidence, "_STATIC", stage_evidence._KeptFindings(stage_evidence.STATIC_KEPT))
    with pytest.raises(JudgeError) as ei:
        review("vector_add", SOLUTION, seed=11)
    assert ei.value.component == component
    r = _cli("vector_add", str(SOLUTION), "--seed", "11")
    assert r.exit_code == 3, r.output
    assert f"'{component}'" in r.output and "injected judge failure" in r.output


# ------------------------------------------------------------------------------ sandbox violations
def _first_case_reports(monkeypatch: pytest.MonkeyPatch, status: str, message: str) -> None:
    """The sandbox reports ``status`` for the first case that comes back."""
    from nkieval.review.stages import execute

    real = execute.run_candidate

    def violation(r: CaseRun) -> CaseRun:
        return CaseRun(r.label, status, error={"message": message})

    def run(*a: Any, **k: Any) -> list[CaseRun]:
        on_case = k.get("on_case")
        first: list[str] = []

        def hook(r: CaseRun) -> None:
            if not first or first[0] == r.label:
                first.append(r.label)
                r = violation(r)
            if on_case is not None:
                on_case(r)

        k["on_case"] = hook
        runs = real(*a, **k)
        i = next(i for i, r in enumerate(runs) if r.label == first[0])
        runs[i] = violation(runs[i])
        return runs

    monkeypatch.setattr(execute, "run_candidate", run)


@pytest.mark.parametrize("status", ["sandbox-violation", "violation"])
def test_sandbox_violation_status_is_an_integrity_verdict(monkeypatch, status):
    _first_case_reports(monkeypatch, status, "tried to open a socket")
    r = review("vector_add", SOLUTION, seed=1)
    validate_report(r.to_dict())
    assert r.verdict == "sandbox-violation" and r.score == 0.0
    assert "socket" in r.verdict_message
    assert _cli("vector_add", str(SOLUTION), "--seed", "1").exit_code == 1


def test_a_harness_failure_in_a_case_is_a_harness_error_exit_3(monkeypatch):
    _first_case_reports(monkeypatch, "infra-error", "the child could not start")
    r = review("vector_add", SOLUTION, seed=1)
    validate_report(r.to_dict())
    assert r.verdict == "harness-error" and r.score == 0.0
    assert _cli("vector_add", str(SOLUTION), "--seed", "1").exit_code == 3


# ------------------------------------------------------------------------------ physics
def test_roofline_bound_of_vector_add():
    dims = {"N": 1 << 20}
    b = task_bound_ns(TASK, dims, "trn2")
    rd, wr = TASK.compulsory_bytes(dims)
    assert b["bytes"] == rd + wr and b["bound_ns"] == pytest.approx((rd + wr) / 362.0)


def test_an_estimate_that_beats_the_roofline_is_impossible():
    dims = {"N": 1 << 20}
    bound = task_bound_ns(TASK, dims, "trn2")["bound_ns"]
    msg = roofline_violation(TASK, dims, "trn2", {"total_time_ns": 0.5 * bound})
    assert msg is not None
    assert f"{0.5 * bound / 1e3:.3f} us" in msg and f"{bound / 1e3:.3f} us" in msg  # both figures
    assert roofline_violation(TASK, dims, "trn2", {"total_time_ns": 0.97 * bound}) is None  # inside the tolerance
    assert TOLERANCE == 0.95


def test_a_trace_that_writes_less_than_the_output_is_impossible():
    from nkieval.review.model import CaseResult

    ok = CaseResult("c", {"N": 256}, False, "normal", 1, "ok", correct=True)
    writes = [{"output": "out", "bytes": 1024, "written_bytes": 512}]
    (msg,) = output_bytes_violations(writes, ok)
    assert "1024 bytes" in msg and "512 bytes" in msg
    assert output_bytes_violations([{"output": "out", "bytes": 1024, "written_bytes": 1024}], ok) == []
    unwritten = CaseResult("c", {"N": 256}, False, "normal", 1, "ok", correct=False, mismatch={"kind": "unwritten"})
    assert output_bytes_violations(writes, unwritten) == []  # the candidate's ordinary failure


def test_a_real_expert_is_not_impossible(reviewed):
    r = reviewed("vector_add", "solution_nki.py")
    assert r.verdict == "pass"
    hw = r.hardware["candidate"]
    assert hw["output_writes"] and all(w["written_bytes"] >= w["bytes"] for w in hw["output_writes"])
    perf = r.performance["candidate"]
    dims = next(c.shape for c in r.cases if c.case == r.hardware["case"])
    assert roofline_violation(TASK, dims, r.target, perf) is None
    assert perf["total_time_ns"] >= task_bound_ns(TASK, dims, r.target)["bound_ns"]


def test_an_estimate_below_the_bound_makes_the_review_impossible(monkeypatch):
    from nkieval.review import adapters

    real = adapters.perf_estimate

    def fast(trace: Any, target: str) -> Any:
        d, why = real(trace, target)
        if d is not None and trace.kernel == "vector_add" and len(trace.records) < 100:
            d = {**d, "total_time_ns": 1.0, "_total_time": 1e-9}  # what a model exploit would report
        return d, why

    monkeypatch.setattr(adapters, "perf_estimate", fast)
    monkeypatch.setattr(stage_evidence, "_REF_CACHE", {})
    r = review("vector_add", SOLUTION, seed=5, compare_references=False)
    assert r.verdict == "impossible", r.verdict_message
    assert r.score == 0.0 and "physical lower bound" in r.verdict_message
    assert all(c.level in (None, 0) for c in r.criteria)


# ------------------------------------------------------------------------------ confirmed static findings
def _with_host_compute(path: Path, guard: str = "") -> str:
    src = path.read_text()
    line = f"    if {guard}:\n        _host = np.asarray(a) + 0\n" if guard else "    _host = np.asarray(a) + 0\n"
    return src.replace("    n = a.shape[0]\n", "    n = a.shape[0]\n" + line, 1).replace(
        "import nki\n", "import nki\nimport numpy as np\n", 1)


def test_confirmed_host_compute_finding_is_hack_suspected():
    """NKI042 (host arrays from kernel tensors) confirmed by the trace: reading a tensor's values while traced
    is refused (rule trace-time-value), and that read is the hack."""
    src = _with_host_compute(SKIPS_TAIL)
    assert "np.asarray(a)" in src
    r = review("vector_add", src, seed=1)
    assert r.verdict == "hack-suspected", (r.verdict, r.verdict_message)
    assert "reads the values" in r.verdict_message and "candidate.py" in r.verdict_message
    assert r.score == 0.0


def test_unconfirmed_host_compute_finding_costs_code_quality_only():
    """The same finding on a line the trace never reaches: the static rule fires, the run does not confirm it."""
    src = _with_host_compute(SOLUTION, guard="n < 0")
    assert "np.asarray(a)" in src
    r = review("vector_add", src, seed=1)
    assert r.verdict == "pass", r.verdict_message
    assert r.criterion("code_quality").level == 0 and r.score > 90


def test_a_kernel_that_skips_work_is_fail_not_impossible(monkeypatch):
    """Fast because it leaves outputs unwritten: an ordinary failure (found by the full suite on a flawed
    candidate that hard-codes a width), not physics."""
    from nkieval.review import adapters
    from nkieval.review.model import CaseResult

    unwritten = CaseResult("c", {"N": 256}, False, "normal", 1, "ok", correct=False, mismatch={"kind": "unwritten"})
    assert not fully_written(unwritten)
    real = adapters.perf_estimate

    def fast(trace: Any, target: str) -> Any:
        d, why = real(trace, target)
        return ({**d, "total_time_ns": 1.0, "_total_time": 1e-9} if d is not None else d), why

    monkeypatch.setattr(adapters, "perf_estimate", fast)
    monkeypatch.setattr(stage_evidence, "_REF_CACHE", {})
    r = review("vector_add", SKIPS_TAIL, seed=5, compare_references=False)
    assert r.verdict == "fail", r.verdict_message
