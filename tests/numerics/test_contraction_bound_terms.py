"""Terms of the contraction bound (``numerics/bounds.py`` ``rule_contraction``) checked against figures worked
by hand from docs/numerics.md §4, on oracle blocks built by hand (issue #25, item 5: three of its terms survived
mutation). Formats: bf16 has u = 2^-8, fp32 u = 2^-24; the FP8 fast-accumulation structures model a 2^-13
accumulator."""

from __future__ import annotations

import numpy as np
import pytest

from nkieval.numerics.bounds import RuleContext, rule_contraction
from nkieval.numerics.formats import get_format
from nkieval.numerics.opspec import OracleBlock
from nkieval.numerics.recipe import PrecisionRecipe

BF16 = get_format("bf16")


def _sigma2(accumulation: str, block: OracleBlock, **facts) -> float:
    recipe = PrecisionRecipe(inputs=("bf16", "bf16"), accumulate="fp32", output="fp32", accumulation=accumulation)
    ctx = RuleContext(recipe=recipe, facts=facts, operand_formats=(BF16, BF16))
    return float(rule_contraction(block, ctx).sigma[0]) ** 2


def _block(y: float, s: float, q: float, k: int, **kw) -> OracleBlock:
    return OracleBlock(y=np.array([y]), scale=np.array([s]), sumsq=np.array([q]), k=k, **kw)


def test_the_bf16_psum_variance_for_random_data_without_the_oracles_running_sums():
    """K = 256 in 128-row tiles: T = 2 bf16 PSUM writes. Without the oracle's Σ P_t², its expectation for random
    data is T (y²/3 + (Q + y²/T)/6), grown by (1 + T u)² for the rounded partial sums; each RNE write adds
    u²/3 of variance per unit of Σ P_t². With y = 1, Q = 1 (256 terms of 1/16): Σ P_t² = 2 (1/3 + 1.5/6) = 7/6,
    so the bf16 PSUM structure's variance exceeds the fp32 PSUM one by 2^-16 / 3 · 7/6 · (1 + 2^-7)²."""
    b = _block(1.0, 16.0, 1.0, 256)
    extra = _sigma2("bf16_psum_rne", b) - _sigma2("psum_fp32_k128", b)
    assert extra == pytest.approx(2.0**-16 / 3 * 7 / 6 * (1 + 2.0**-7) ** 2, rel=1e-6, abs=0)


@pytest.mark.parametrize("accumulation,per_run", [("fp8_fast_accum", 512), ("fp8_fast_accum_promote128", 128)])
def test_a_truncating_accumulator_adds_its_bias_to_the_variance(accumulation, per_run):
    """Truncation errs one way: besides the random-rounding variance u²/3 (K - 1)(y²/3 + Q/6) and the output's
    u_out² y²/3, each run of ``per_run`` terms adds (u/2 · per_run)² (y²/3 + Q/6), K / per_run runs in all.
    y = 3, Q = 8, K = 512 (512 terms of 1/8: S = 64): y²/3 + Q/6 = 13/3."""
    u, c = 2.0**-13, 13 / 3
    want = (2.0**-24) ** 2 / 3 * 9 + u * u / 3 * 511 * c + (u / 2 * per_run) ** 2 * c * (512 / per_run)
    assert _sigma2(accumulation, _block(3.0, 64.0, 8.0, 512)) == pytest.approx(want, rel=1e-9, abs=0)


def test_a_daz_kernel_may_drop_subnormal_terms_so_only_elements_without_them_must_be_exact():
    """Operands on the 2^-140 grid, sums far below 2^(24 - 140): every fp32 sum of them is exact, so the result
    must be bitwise; except where subnormal operands contributed (subnormal_scale > 0), which a DAZ
    (denormals-are-zero) kernel may flush."""
    grid = -140
    assert 2.0**grid >= get_format("fp32").subnormal  # the grid is not below fp32's smallest subnormal
    s = np.array([2.0**-120, 2.0**-120])
    b = OracleBlock(y=s.copy(), scale=s, sumsq=s * s, k=1, subnormal_scale=np.array([0.0, 2.0**-140]))
    recipe = PrecisionRecipe(inputs=("fp32", "fp32"), accumulate="fp32", output="fp32")
    fp32 = get_format("fp32")
    ctx = RuleContext(recipe=recipe, facts={"grid": grid}, operand_formats=(fp32, fp32))
    exact = rule_contraction(b, ctx).exact
    assert exact is not None and list(exact) == [True, False]
