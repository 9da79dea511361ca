"""Numerics verdict details where mutation testing (seed 3) found them unchecked (issue #25, item 5)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nkieval.numerics import PrecisionRecipe, check
from nkieval.numerics.bounds import RULES, RuleContext, rule_contraction, rule_softmax
from nkieval.numerics.formats import get_format
from nkieval.numerics.opspec import OracleBlock

U = 2.0**-24  # fp32 unit roundoff


def test_the_special_value_gate_names_the_first_nan_it_found():
    """exp of normal data with one NaN produced at (2, 5): G1 fails and points at (2, 5), not at the first element."""
    x = np.random.default_rng(1).standard_normal((4, 64)).astype(np.float32)
    got = np.exp(x.astype(np.float64)).astype(np.float32)
    got[2, 5] = np.nan
    v = check(got, [x], "exp", PrecisionRecipe(), diagnose=False)
    assert (v.status, v.deciding_gate) == ("fail", "G1")
    assert "NaN produced at 1 elements where the oracle is finite (first at index (2, 5))" in v.explanation, \
        v.explanation


def test_unary_inputs_on_either_side_of_the_scalar_engine_range_are_out_of_contract():
    """The Scalar engine's log is valid on [2^-64, 2^64] (numerics/recipe.py): 2^-70 and 2^70 are both outside, so
    two elements are out of contract (inconclusive, GC); 0.5 and 1.0 are judged normally."""
    x = np.array([0.5, 1.0, 2.0**-70, 2.0**70], np.float32)
    got = np.log(x.astype(np.float64)).astype(np.float32)
    v = check(got, [x], "log", PrecisionRecipe(transcendental="scalar_engine"), diagnose=False)
    assert (v.status, v.deciding_gate, v.metrics.n_out_of_contract) == ("inconclusive", "GC", 2)


def test_the_sigma_of_rmsnorm_follows_the_expected_error_formula():
    """docs/numerics.md: σ uses the expected accumulation error u√N/3 and per-rounding u/√3. Rows of ones, N = 64,
    eps = 1 (mean square 1, y = 1/√2), fp32 throughout, correctly rounded rsqrt: rel_ms = 8u/3 + 2u/√3, damped by
    var / (var + eps) = 1/2 and halved by the square root, plus u/√3 for rsqrt and 2u/√3 for the products:
    0.25 (8/3 + 2/√3) u + 3u/√3 = 2.6874 u; with the output rounding u/√3 in quadrature σ = 2.7487 u |y|."""
    y = 1 / math.sqrt(2.0)
    block = OracleBlock(y=np.array([y]), k=64, aux={"eps": 1.0, "var": np.array([1.0]), "mean_sq": np.array([1.0]),
                                                      "gamma": np.array([1.0])})
    bb = RULES["rmsnorm"](block, RuleContext(recipe=PrecisionRecipe(transcendental="correctly_rounded"), facts={}))
    core = 0.25 * (8 / 3 + 2 / math.sqrt(3.0)) + 3 / math.sqrt(3.0)
    assert float(bb.sigma[0]) == pytest.approx(U * y * math.sqrt(core**2 + 1 / 3), rel=1e-9, abs=0)


def test_the_sigma_of_softmax_counts_the_normaliser_exp_error_as_uniform():
    """Four equal logits (y = 1/4, |x - max| = 0) with the Scalar engine's exp (2^-12 relative): the normaliser's
    relative error has σ u√(N-1)/3 + 2^-12/√3 (uniform exp error); with the output rounding, the local exp error and
    the two roundings, σ² = y² (u²/3 + (2^-24 + 2u²)/3 + (u√3/3 + 2^-12/√3)²)."""
    e = 2.0**-12
    block = OracleBlock(y=np.array([0.25]), aux={"n": 4, "absd": np.array([0.0]), "absd_rowmax": np.array([0.0])})
    bb = rule_softmax(block, RuleContext(recipe=PrecisionRecipe(transcendental="scalar_engine"), facts={}))
    relz = U * math.sqrt(3.0) / 3 + e / math.sqrt(3.0)
    want = 0.25 * math.sqrt(U**2 / 3 + (e**2 + 2 * U**2) / 3 + relz**2)
    assert float(bb.sigma[0]) == pytest.approx(want, rel=1e-9, abs=0)


def test_the_one_pass_layernorm_bound_counts_the_mean_square_term():
    """docs/numerics.md: a one-pass variance E[x²] - E[x]² errs by (c + 2u) E[x²] + 2|μ| δμ + u μ² + u var. The row
    [0, 2] (N = 2, c = γ(2) ≈ 2u; μ = 1, E|x| = 1, E[x²] = 2, var = 1, eps = 0) at x = 2 (x̂ = 1, rstd = 1,
    y = 1): δμ = 3u, the variance error 4u·2 + 6u + u + u = 16u, rel(rstd) = 8u + u = 9u, the normalised value's
    error 1·(9u + u) + (3u + u)·1 = 14u, plus u for the gamma product: 15u; τ = u + (1 + u)·15u ≈ 16u."""
    block = OracleBlock(y=np.array([1.0]), k=2, aux={
        "eps": 0.0, "var": np.array([1.0]), "mean_sq": np.array([2.0]), "mean_abs": np.array([1.0]),
        "mu": np.array([1.0]), "xhat": np.array([1.0]), "rstd": np.array([1.0]), "absdev": np.array([1.0]),
        "gamma": np.array([1.0]), "has_beta": False})
    recipe = PrecisionRecipe(variance="one_pass", transcendental="correctly_rounded")
    bb = RULES["layernorm"](block, RuleContext(recipe=recipe, facts={}))
    assert float(bb.tau_det[0]) == pytest.approx(16 * U, rel=1e-5, abs=0)


def test_a_contraction_on_a_grid_below_the_accumulator_subnormals_need_not_be_exact():
    """Exactness is demanded when every partial sum is a multiple of the operands' grid 2^g and fits the
    accumulator's precision; with g = -160 below fp32's smallest subnormal (2^-149) the accumulator cannot hold
    that grid, so even a sum of S = 2^-140 (under 2^(24 - 160)) is not required to be exact; with g = -100 a sum
    of 2^-90 (under 2^-76) is."""
    fp32 = get_format("fp32")

    def exact(grid: int, s: float):
        block = OracleBlock(y=np.array([s]), scale=np.array([s]), sumsq=np.array([s * s]), k=2)
        ctx = RuleContext(recipe=PrecisionRecipe(), facts={"grid": grid}, operand_formats=(fp32, fp32),
                          operands_exact_in_compute=True)
        return rule_contraction(block, ctx).exact

    assert exact(-160, 2.0**-140) is None
    assert exact(-100, 2.0**-90).tolist() == [True]
