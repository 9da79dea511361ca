"""Bound formulas: the research note's numbers, and the hard bound against every order
hypothesis can build."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nkieval.numerics import PrecisionRecipe, check, gamma, matmul_inputs, prob_coeff
from nkieval.numerics.bounds import worked_example
from nkieval.numerics.formats import get_format, round_to

U32 = 2.0**-24


@pytest.mark.parametrize(
    ("k", "g", "six", "eight"),
    [(128, 7.63e-6, 4.05e-6, 5.40e-6), (1024, 6.10e-5, 1.14e-5, 1.53e-5), (4096, 2.44e-4, 2.29e-5, 3.05e-5),
     (16384, 9.78e-4, 4.58e-5, 6.10e-5), (65536, 3.92e-3, 9.16e-5, 1.22e-4)],
)
def test_coefficient_table(k: int, g: float, six: float, eight: float) -> None:
    """docs/numerics.md coefficient table (fp32 accumulation)."""
    assert gamma(k, U32) == pytest.approx(g, rel=2e-3)
    assert prob_coeff(k, U32, 6) == pytest.approx(six, rel=5e-3)
    assert prob_coeff(k, U32, 8) == pytest.approx(eight, rel=5e-3)


def test_gamma_edges() -> None:
    assert gamma(0, U32) == 0.0
    assert math.isinf(gamma(256, 2.0**-8))  # n·u = 1: no bound survives
    assert prob_coeff(4, 2.0**-8, 8) == gamma(4, 2.0**-8)  # never looser than γ


def test_worked_example_k4096_bf16() -> None:
    """K = 4096, bf16 in, fp32 accumulate, bf16 out, median |y| = 43, S = 2608 (λ = 6)."""
    w = worked_example()
    assert w["output_rounding"] == pytest.approx(0.168, abs=1e-3)
    assert w["acc_prb"] == pytest.approx(0.060, abs=1e-3)
    assert w["tau_prb"] == pytest.approx(0.228, abs=2e-3)
    assert w["tau_prb"] / 43 == pytest.approx(0.0053, abs=1e-4)
    assert w["acc_det"] == pytest.approx(0.64, abs=0.01)
    assert w["tau_det"] == pytest.approx(0.81, abs=0.01)
    assert w["tf32_inputs"] == pytest.approx(2.5, abs=0.05)
    w8 = worked_example(lam=8)  # the default λ
    assert w8["tau_prb"] == pytest.approx(0.248, abs=1e-3) and w8["tau_prb"] / 43 == pytest.approx(0.0058, abs=1e-4)
    assert worked_example(out="fp32", lam=8)["tau_prb"] / 43 == pytest.approx(0.0019, abs=1e-4)


def test_worked_example_medians_are_what_normal_data_gives() -> None:
    a, b = matmul_inputs("normal", 64, 4096, 64, "bf16", seed=0)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    y, s = a64 @ b64, np.abs(a64) @ np.abs(b64)
    assert np.median(np.abs(y)) == pytest.approx(43, rel=0.1)
    assert np.median(s) == pytest.approx(2608, rel=0.03)


# --------------------------------------------------------------------------- property tests


def _tree_sum(values: list[float], fmt: str, data: st.DataObject) -> float:
    """Sum in an arbitrary binary tree chosen by hypothesis, rounding every addition."""
    items = list(values)
    while len(items) > 1:
        i = data.draw(st.integers(0, len(items) - 2), label="pair")
        s = float(round_to(items[i] + items[i + 1], fmt))
        items[i : i + 2] = [s]
    return items[0]


_VALUES = st.lists(
    st.tuples(st.booleans(), st.integers(-12, 12), st.integers(0, 127)), min_size=1, max_size=120
)


def _bf16_values(raw: list[tuple[bool, int, int]]) -> list[float]:
    # bf16 values 2^e·(1 + m/128): their fp32 sums are exact in float64
    return [(-1.0 if neg else 1.0) * 2.0**e * (1 + m / 128) for neg, e, m in raw]


@settings(max_examples=150, deadline=None)
@given(raw=_VALUES, acc=st.sampled_from(["fp32", "fp16", "bf16"]), data=st.data())
def test_hard_bound_holds_for_every_summation_tree(raw, acc, data) -> None:
    vals = _bf16_values(raw)
    if acc != "fp32":  # keep n·u < 1 and every value inside the format
        vals = [v for v in vals if abs(v) < 2**10][: int(0.5 / get_format(acc).u)] or [1.0]
    perm = data.draw(st.permutations(range(len(vals))), label="order")
    got = _tree_sum([vals[i] for i in perm], acc, data)
    x = np.array(vals)
    r = PrecisionRecipe(inputs="fp32", accumulate=acc, output=acc)
    v = check(np.array(got), [x], "sum", r, diagnose=False)
    assert v.status != "fail", v.explanation
    assert v.metrics.margin_det <= 1.0


@settings(max_examples=100, deadline=None)
@given(raw=st.lists(st.tuples(st.floats(-8, 8, width=32), st.floats(-8, 8, width=32)), min_size=1, max_size=80),
       data=st.data())
def test_hard_bound_holds_for_fp32_dot_products_in_any_order(raw, data) -> None:
    """fp32 operands: products are rounded too (γ_K instead of γ_{K−1})."""
    a = np.array([p[0] for p in raw], np.float32)
    b = np.array([p[1] for p in raw], np.float32)
    prods = [float(np.float32(x) * np.float32(y)) for x, y in zip(a, b)]
    perm = data.draw(st.permutations(range(len(prods))), label="order")
    got = _tree_sum([prods[i] for i in perm], "fp32", data)
    v = check(np.array(got, np.float32), [a, b], "dot", PrecisionRecipe(), diagnose=False)
    assert v.status != "fail", v.explanation


def test_hard_bound_is_not_vacuous() -> None:
    """One-signed values summed sequentially in a bf16 accumulator (stagnation) reach a sizeable
    fraction of γ_n·S: the bound is tight to a small factor, so the property tests can fail."""
    rng = np.random.default_rng(0)
    worst = 0.0
    for _ in range(60):
        x = round_to(rng.uniform(0.5, 1.0, 100) * 2.0 ** rng.integers(-3, 3, 100), "bf16")
        s = 0.0
        for v in np.sort(x)[::-1]:
            s = float(round_to(s + v, "bf16"))
        r = PrecisionRecipe(inputs="fp32", accumulate="bf16", output="bf16")
        worst = max(worst, check(np.array(s), [x], "sum", r, diagnose=False).metrics.margin_det)
    assert 0.1 < worst <= 1.0


def test_offset_data_breaks_the_probabilistic_model() -> None:
    """Why `offset` is a structured family: nearly constant terms make rounding errors
    correlated, and a correct kernel exceeds λ√K·u·S although it stays inside γ_K·S."""
    from nkieval.numerics import emulate_matmul

    a, b = matmul_inputs("offset", 3, 16384, 5, "bf16", seed=1)
    got = emulate_matmul(a, b, order="sequential", out="fp32")
    r = PrecisionRecipe(inputs="bf16")
    assert check(got, [a, b], "matmul", r, input_family="random").metrics.margin_prb > 1.5
    v = check(got, [a, b], "matmul", r, input_family="offset")
    assert v.status == "pass" and v.metrics.margin_det < 0.5
