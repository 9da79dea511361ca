"""Input families added for surviving mutants (issue 28, item 3): `near_constant` rows (a row variance far
below eps) and `small` magnitudes (a mean of squares the size of eps) separate `var + eps` from `var - eps`,
which the normal, offset and heavy-tailed families do not. Each test computes the mutated formula with NumPy
and holds it against the task's own reference and tolerance."""

from __future__ import annotations

import numpy as np
import pytest

from nkieval.review.stages.load import case_inputs, plan_cases
from nkieval.tasks import load_task
from nkieval.tasks.inputs import FAMILIES, generate, is_random
from nkieval.tasks.loader import load_reference


def test_near_constant_rows_are_a_constant_plus_noise_far_below_eps() -> None:
    x = generate("x", (64, 1000), "float32", "near_constant", 5)
    std = x.astype(np.float64).std(axis=1)
    assert np.all(std < 2e-3) and np.all(std > 5e-4)  # a row variance ~1e-6, below layernorm's eps 1e-5
    assert x.mean(axis=1).std() > 0.5  # the rows' levels differ
    assert not is_random("near_constant")  # nearly constant terms: correlated rounding errors
    assert generate("g", (7,), "float32", "near_constant", 1).shape == (7,)


def test_small_is_normal_data_at_a_thousandth() -> None:
    x = generate("x", (128, 512), "float32", "small", 3).astype(np.float64)
    assert 0.9e-3 < x.std() < 1.1e-3 and is_random("small")
    assert set(FAMILIES) >= {"near_constant", "small"}


def _worst_ratio(got: np.ndarray, ref: np.ndarray, rtol: float, atol: float) -> float:
    bad = ~np.isfinite(got)
    if bad.any():
        return float("inf")
    return float(np.max(np.abs(got - ref) / (atol + rtol * np.abs(ref))))


@pytest.mark.parametrize("tid,family,mutant", [
    ("layernorm", "near_constant",
     lambda x, gamma, beta, eps: (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) - eps) * gamma + beta),
    ("rmsnorm", "small", lambda x, w, eps: x / np.sqrt((x * x).mean(1, keepdims=True) - eps) * w),
])
def test_the_new_family_rejects_var_minus_eps_where_the_old_ones_do_not(tid, family, mutant) -> None:
    task = load_task(tid)
    assert family in task.families
    ref_fn = load_reference(task)
    shape = task.public_shapes[0]
    worst: dict[str, float] = {}
    for fam in task.families:
        (c,) = [c for c in plan_cases(task, 0, (fam,), "all") if c.label.startswith(shape.label)]
        ins = case_inputs(task, c)
        ref = np.asarray(ref_fn(**ins, **task.params), np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            got = mutant(*(np.asarray(ins[s.name], np.float64) for s in task.inputs), **task.params)
        worst[fam] = _worst_ratio(got, ref, task.rtol, task.atol)
    assert worst[family] > 1.0, worst  # the mutant fails the task's tolerance on the new family
    assert all(v <= 1.0 for f, v in worst.items() if f != family), worst  # and passes on every other one
