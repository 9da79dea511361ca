"""The epsilon edge input of the differential check (review/stages/differential.py): rows whose reduction is
comparable to the epsilon the CUDA source adds under a square root, on a case with many rows; and the cause search
confirming a stated mutation on every edge input where the port disagrees (mutation_causes.py ``also``)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np

import nkieval
from nkieval.review.stages.differential import _edge_inputs, _edge_kinds, _epsilon_dims, _epsilons

PORTS = Path(nkieval.__file__).parent / "tasks" / "ports"


def test_an_epsilon_is_a_small_literal_added_under_a_square_root() -> None:
    assert _epsilons((PORTS / "rmsnorm_warp" / "kernel.cu").read_text()) == (1e-6,)
    assert _epsilons((PORTS / "layernorm_block" / "kernel.cu").read_text()) == (1e-5,)
    assert _epsilons("y[i] = x[i] / (sqrtf(v[i]) + 1e-8f);") == ()  # (added outside the root)
    assert _epsilons("y[i] = rsqrtf(v[i] + eps);") == ()  # (a parameter: no literal)
    assert _epsilons("y[i] = rsqrtf(v[i] + 1.0f) * sqrtf(fmaxf(a, 0.f) + 2.5e-4f);") == (2.5e-4,)
    assert "epsilon" in _edge_kinds("y = rsqrtf(s / n + 1e-6f);")
    assert "epsilon" not in _edge_kinds("y = rsqrtf(s / n);")


def test_a_float_parameter_of_the_task_added_under_the_root_is_an_epsilon_too() -> None:
    params = (("eps", 1e-5), ("scale", 0.5))
    assert _epsilons("rstd = rsqrtf(t.m2 / (float)d + eps);", params) == (1e-5,)
    assert _epsilons("rstd = rsqrtf(t.m2 / (float)d + scale);", params) == ()  # (not small)
    assert _epsilons("rstd = rsqrtf(t.m2 / (float)d + eps);", ()) == ()  # (not a parameter of the task)
    assert _epsilons("rstd = rsqrtf(v + eps[0]);", params) == ()  # (an array, not the parameter)
    assert "epsilon" in _edge_kinds("rstd = rsqrtf(v + eps);", params)


def test_the_epsilon_rows_have_a_mean_square_about_the_epsilon_on_the_largest_small_case() -> None:
    task = SimpleNamespace(inputs=[SimpleNamespace(name="x"), SimpleNamespace(name="w")],
                           outputs=[SimpleNamespace(name="y")])

    def size(n: int, d: int) -> dict[str, int]:
        return {"N": n, "D": d}

    task.inputs[0].concrete = lambda dims: (dims["N"], dims["D"])
    task.inputs[1].concrete = lambda dims: (dims["D"],)
    task.outputs[0].concrete = lambda dims: (dims["N"], dims["D"])
    ran = [size(1, 33), size(130, 96), size(256, 512)]  # (smallest first, as the review runs them)
    assert _epsilon_dims(task, ran) == size(130, 96)
    assert _epsilon_dims(task, [size(256, 512)]) == size(256, 512)
    rng = np.random.default_rng(0)
    inputs = {"x": rng.standard_normal((130, 96)).astype(np.float32), "w": np.ones(96, np.float32)}
    edge = _edge_inputs(task, inputs, "epsilon", 3, 1e-6)
    assert edge is not None
    mean_square = (edge["x"].astype(np.float64) ** 2).mean(axis=1)
    assert 0.5e-6 < np.median(mean_square) < 2e-6
    assert edge["w"] is inputs["w"]  # (rank-1 inputs are left as they are)


def test_the_review_names_all_three_roundings_of_bf16_square_sum() -> None:
    """Fails without the epsilon edge input (the review's inputs then hold no row whose mean square is below
    ~256 x eps, and two of the three roundings reproduce the port on them) and without the cause search checking
    the edge inputs (it confirms on two runs, neither of them the epsilon rows)."""
    from nkieval.review.pipeline import review

    r = review(str(PORTS / "rmsnorm_warp"), str(PORTS / "rmsnorm_warp" / "flawed" / "bf16_square_sum.py"), seed=5,
               compare_references=False)
    mig = next(c for c in r.criteria if c.id == "migration")
    causes = [f.observed for f in mig.feedback if f.observed.startswith("semantic infidelity")]
    assert len(causes) == 1
    for what in ("`ss / (float)n_cols + 1e-6f` rounded to bf16", "`ss / (float)n_cols` rounded to bf16",
                 "`xr[c] * inv_rms * (1.0f + w[c])` rounded to bf16"):
        assert what in causes[0]
    assert "edge/epsilon" in causes[0]
