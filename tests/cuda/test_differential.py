"""Differential port checking in the review (review/stages/differential.py): the port against the task's
CUDA source run on the same inputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from nkieval.review.pipeline import review
from nkieval.review.stages.differential import _cuda_literals, _edge_inputs, _port_literals
from nkieval.tasks.loader import load_task

pytestmark = pytest.mark.slow


def _migration(r: object) -> object:
    return next(c for c in r.criteria if c.id == "migration")  # type: ignore[attr-defined]


def test_expert_port_agrees_and_no_cause_is_stated() -> None:
    task = load_task("layernorm")
    r = review("layernorm", str(task.solution_file), seed=3, compare_references=False)
    mig = _migration(r)
    assert mig.level == 4  # type: ignore[attr-defined]
    assert not [f for f in mig.feedback if f.severity != "info"]  # type: ignore[attr-defined]
    env = [f for f in mig.feedback if "expected envelope" in f.observed]  # type: ignore[attr-defined]
    assert env and "verdict agree" in env[0].observed
    assert env[0].evidence["observed"] <= env[0].evidence["envelope"]  # the triangle inequality


def test_changed_epsilon_is_named_with_both_lines(tmp_path: Path) -> None:
    task = load_task("layernorm")
    src = task.solution_file.read_text()
    assert "operand0=eps)" in src
    bad = src.replace("operand0=eps)", "operand0=1e-6)")
    line = next(i + 1 for i, ln in enumerate(bad.splitlines()) if "operand0=1e-6)" in ln)
    p = tmp_path / "eps.py"
    p.write_text(bad)
    r = review("layernorm", str(p), seed=3, compare_references=False)
    mig = _migration(r)
    causes = [f for f in mig.feedback if f.observed.startswith("semantic infidelity")]  # type: ignore[attr-defined]
    assert len(causes) == 1
    msg = causes[0].observed
    assert "eps = 1e-05" in msg and f"candidate.py:{line}" in msg and "reproduces the port's y" in msg
    assert mig.level <= 2  # type: ignore[attr-defined]


def test_literals_and_edge_inputs() -> None:
    lits = _cuda_literals("__global__ void k(float* x) { x[0] = 0.044715f * x[1] + 1e-5; int i = 3; }")
    assert [(lit.value, lit.text, lit.line) for lit in lits] in (
        [(0.044715, "0.044715f", 1), (1e-5, "1e-5", 1)], [(1e-5, "1e-5", 1), (0.044715, "0.044715f", 1)])
    port = _port_literals("def f(x, eps=1e-5):\n    return x * 0.5 - 2.0\n")
    assert sorted(p.value for p in port) == [0.5, 2.0]  # (a parameter default is not a constant used)
    task = load_task("layernorm")
    x = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)
    inp = {"x": x, "gamma": np.ones(64, np.float32), "beta": np.zeros(64, np.float32)}
    e = _edge_inputs(task, inp, "tiny_variance", 1)
    assert e is not None and e["x"].std(axis=1).max() < 2e-3 and e["gamma"] is inp["gamma"]


def test_the_cuda_runs_on_a_case_are_kept_for_the_next_review_of_the_same_seed(monkeypatch) -> None:
    # The CUDA kernel's outputs on a case (and on the edge inputs derived from it) do not depend on the
    # candidate: a second review with the same seed reuses them and reports the same differential record.
    import nkieval.cuda as cuda

    calls: list[object] = []
    real = cuda.run_task_cuda

    def counted(*a: object, **kw: object) -> object:
        calls.append(kw.get("source"))
        return real(*a, **kw)

    monkeypatch.setattr(cuda, "run_task_cuda", counted)
    task = load_task("layernorm")
    first = review("layernorm", str(task.solution_file), seed=11, compare_references=False)
    n_first = len(calls)
    assert n_first > 0
    second = review("layernorm", str(task.solution_file), seed=11, compare_references=False)
    assert len(calls) == n_first  # no CUDA run for the expert (no attribution either: it agrees)
    assert _migration(first).summary == _migration(second).summary  # type: ignore[attr-defined]
    ev = [[f.observed for f in _migration(r).feedback] for r in (first, second)]  # type: ignore[attr-defined]
    assert ev[0] == ev[1]


def test_an_exact_task_disagrees_where_one_element_differs() -> None:
    # relu's tolerance is exact (rtol = atol = 0): equal elements are 0 tolerances away, not 0/0 = NaN, which
    # np.argmax would pick and no comparison would call a disagreement
    from nkieval.review.stages.differential import _compare, tolerance_ratios

    task = load_task("relu")
    assert task.rtol == 0 and task.atol == 0
    gpu = np.array([[0.0, 1.0, 2.0]], np.float32)
    port = gpu.copy()
    port[0, 2] = 2.5
    per_out = {"out": {"output": "out", "verdict": "agree", "cases": 0, "worst": None, "tol_ratio": 0.0,
                       "max_abs_diff": 0.0, "envelope": None, "observed": 0.0}}
    _compare(task, "public-0/normal", [gpu], [port], None, per_out)
    assert per_out["out"]["verdict"] == "disagree"
    assert per_out["out"]["worst"]["index"] == [0, 2]
    d, r = tolerance_ratios(np.array([1.0, np.nan, np.inf]), np.array([1.0, np.nan, np.inf]), 0.0, 0.0)
    assert not d.any() and not r.any()
