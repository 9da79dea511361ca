"""Brief rewards (``score(..., feedback=False)``, ``review(..., brief=True)``): the differential check or its cause
search is left out only where no outcome of it can change the verdict, score or levels; the reward, verdict,
score and levels of flawed and hostile candidates equal the full review's."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from reward_helpers import ROOT, SEED, as_response

from nkieval.review.stages import brief
from nkieval.review.stages.timing import Timings
from nkieval.reward import score
from nkieval.tasks import BUILTIN_ROOT, load_task

ADV = ROOT / "tests" / "adversarial" / "candidates"


# ------------------------------------------------------------------ the decision, on stand-in scorers
def _scored(level: int, verdict: str = "fail") -> Any:
    crit = [SimpleNamespace(id="correctness", level=2, feedback=[]), SimpleNamespace(id="migration", level=level, feedback=[])]
    return SimpleNamespace(decision=SimpleNamespace(verdict=verdict, reason=verdict), score=10.0 * level,
                           criteria=crit)


def _charge(d: tuple[dict[str, Any] | None, str | None]) -> int:
    """What a differential record charges the migration criterion (as scoring does: 2 for a cause, 1 for an
    unexplained disagreement)."""
    rec = d[0]
    if rec is None:
        return 0
    return 2 if rec.get("causes") else 1 if rec.get("unexplained") else 0


_LOADED = SimpleNamespace(task=SimpleNamespace(cuda_file=Path("kernel.cu")))


def _run(monkeypatch: pytest.MonkeyPatch, start: int, cap: int, cause: list[dict[str, Any]]
         ) -> tuple[Any, str, list[str]]:
    calls: list[str] = []

    def search() -> dict[str, Any]:
        calls.append("search")
        return {"causes": cause, "unexplained": [] if cause else ["y"], "outputs": []}

    def before(loaded: Any, runs: Any, judged: Any, explain: bool = True) -> tuple[dict[str, Any], None, Any]:
        calls.append("differential" if not explain else "differential explaining the agreeing outputs")
        return {"causes": [], "unexplained": ["y"], "outputs": []}, None, search

    monkeypatch.setattr(brief, "differential_before_causes", before)
    got, left_out = brief.brief_score(_LOADED, [], [], lambda d: _scored(min(cap, max(0, start - _charge(d)))),
                                      Timings())
    return got, left_out, calls


def test_the_whole_check_is_left_out_when_no_charge_changes_a_level(monkeypatch: pytest.MonkeyPatch) -> None:
    got, left_out, calls = _run(monkeypatch, start=4, cap=1, cause=[{"outputs": ["y"]}])  # (a gate caps it at 1)
    assert (left_out, calls, got.criteria[1].level) == ("differential", [], 1)


def test_the_cause_search_is_left_out_when_a_found_cause_changes_no_level(monkeypatch: pytest.MonkeyPatch) -> None:
    # no charge: 1; an unexplained disagreement: 0; a cause: 0 (a level is never below 0): once the check has
    # run and found a disagreement, no cause can change the level
    got, left_out, calls = _run(monkeypatch, start=1, cap=4, cause=[{"outputs": ["y"]}])
    assert (left_out, calls, got.criteria[1].level) == ("cause-search", ["differential"], 0)


def test_the_cause_search_runs_when_a_found_cause_would_change_a_level(monkeypatch: pytest.MonkeyPatch) -> None:
    got, left_out, calls = _run(monkeypatch, start=4, cap=4, cause=[{"outputs": ["y"]}])
    assert (left_out, calls, got.criteria[1].level) == ("nothing", ["differential", "search"], 2)
    got, _, _ = _run(monkeypatch, start=4, cap=4, cause=[])  # (searched, nothing found: the unexplained charge)
    assert got.criteria[1].level == 3


# ------------------------------------------------------------------ real candidates: brief == full
def _eps_port(tmp: Path) -> Path:
    """layernorm's expert with the CUDA kernel's epsilon changed: a cause the search finds and that costs levels."""
    src = load_task("layernorm").solution_file.read_text()
    assert "operand0=eps)" in src
    p = tmp / "eps_port.py"
    p.write_text(src.replace("operand0=eps)", "operand0=1e-6)"))
    return p


CANDIDATES = [
    ("vector_add", "flawed"),  # (the session's scored responses: skips_tail, and a hostile one returning its input)
    ("vector_add", "hostile"),
    ("layernorm", BUILTIN_ROOT / "layernorm" / "flawed" / "one_pass_variance.py"),
    ("vector_add", ADV / "host_compute" / "data_selfcopy_vector_add.py"),
    ("layernorm", None),  # the epsilon port (made in the test's directory)
    # within Correctness's tolerance, failing numerics: the brief review's lean numerics check gives up on it
    ("rmsnorm", BUILTIN_ROOT / "rmsnorm" / "flawed" / "bf16_sum_of_squares.py"),
]


def test_a_brief_review_neither_states_the_envelope_nor_explains_agreeing_outputs(monkeypatch: pytest.MonkeyPatch
                                                                                     ) -> None:
    # the envelope (near-exact CUDA runs, magnitude bands) and what an agreeing output's difference comes from are
    # report text (the ablations' port-side replays are the candidate's own CPU): the brief review runs the check
    # without them, the full review with them, and both give the same outcome
    from nkieval.review import review
    from nkieval.review.stages import differential

    calls: list[str] = []

    def spy(name: str) -> Any:
        real = getattr(differential, name)

        def called(*a: Any, **k: Any) -> Any:
            calls.append(name)
            return real(*a, **k)
        return called

    for name in ("_explain_differences", "_exact_outputs", "_envelope"):
        monkeypatch.setattr(differential, name, spy(name))
    task = load_task(BUILTIN_ROOT / "rmsnorm")
    brief_review = review(task, task.directory / "solution_nki.py", seed=SEED, brief=True)
    assert (brief_review.verdict, calls) == ("pass", [])
    full = review(task, task.directory / "solution_nki.py", seed=SEED)
    assert full.verdict == "pass" and set(calls) == {"_explain_differences", "_exact_outputs", "_envelope"}
    assert (brief_review.score, [(c.id, c.level) for c in brief_review.criteria]) == \
        (full.score, [(c.id, c.level) for c in full.criteria])
    envelope_lines = [f for c in full.criteria for f in c.feedback if "expected envelope" in f.observed]
    assert envelope_lines and not [f for c in brief_review.criteria for f in c.feedback
                                   if "expected envelope" in f.observed]


@pytest.mark.slow
@pytest.mark.parametrize(("task", "path"), CANDIDATES, ids=lambda x: getattr(x, "name", x))
def test_brief_reward_verdict_score_and_levels_equal_the_full_review(task: str, path: Path | str | None,
                                                                      tmp_path: Path, scored: Any) -> None:
    if isinstance(path, str):
        full, short = scored(path), scored(path, feedback=False)
    else:
        path = path or _eps_port(tmp_path)
        response = as_response(path)
        full = score(task, response, seed=SEED)
        short = score(task, response, seed=SEED, feedback=False)
    assert full.status == short.status == "scored"
    assert (short.reward, short.verdict, short.verdict_reason, short.score, short.levels) == \
        (full.reward, full.verdict, full.verdict_reason, full.score, full.levels)
    # the brief feedback: verdict, score and levels only
    assert short.feedback.splitlines()[0] == full.feedback.splitlines()[0]
    assert "→" not in short.feedback and len(short.feedback.splitlines()) == 1 + len(short.levels)
    if isinstance(path, Path) and path.name == "eps_port.py":  # the search ran in the brief review too: the cause costs two levels
        assert full.levels["migration"] is not None and full.levels["migration"] <= 2


@pytest.mark.slow
def test_a_brief_review_says_what_it_left_out() -> None:
    from nkieval.review import review

    task = load_task("layernorm")
    r = review(task, task.directory / "flawed" / "one_pass_variance.py", seed=SEED, brief=True)
    mig = next(c for c in r.criteria if c.id == "migration")
    assert any(brief.LEFT_OUT in f.observed for f in mig.feedback)
    assert r.timings.get("differential_s", 0.0) == 0.0  # (the check did not run)


def test_a_brief_review_judges_passing_outputs_lean_with_the_full_outcome() -> None:
    # the numerics of a passing output in a brief review: only what the gates read (PreparedCheck.check(lean=True));
    # status, margin and deciding gate, which the scoring reads, and the outcome are the full review's
    from nkieval.numerics.gates import LEAN_NOTE
    from nkieval.review import review

    task = load_task("row_softmax")
    short = review(task, task.directory / "solution_nki.py", seed=SEED, brief=True)
    full = review(task, task.directory / "solution_nki.py", seed=SEED)
    assert short.verdict == full.verdict == "pass"
    assert (short.score, [(c.id, c.level) for c in short.criteria]) == \
        (full.score, [(c.id, c.level) for c in full.criteria])
    judged = [(s.numerics, f.numerics) for s, f in zip(short.cases, full.cases, strict=True) if f.numerics]
    assert judged and all(f["status"] == "pass" for _, f in judged)
    for s, f in judged:
        assert LEAN_NOTE in s["notes"] and LEAN_NOTE not in f["notes"]
        assert [s[k] for k in ("status", "margin", "deciding_gate", "gates")] == \
            [f[k] for k in ("status", "margin", "deciding_gate", "gates")]
