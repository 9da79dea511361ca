"""Bounds and gate texts where mutation testing (seed 2) found them unchecked (issue #25, item 5), against figures
worked by hand from docs/numerics.md §4 (fp32: u = 2^-24; rounding errors uniform, variance u²/3 per unit)."""

from __future__ import annotations

import numpy as np
import pytest

from nkieval.numerics import check
from nkieval.numerics.bounds import RuleContext, rule_contraction, rule_unary
from nkieval.numerics.formats import get_format
from nkieval.numerics.opspec import OracleBlock
from nkieval.numerics.recipe import PrecisionRecipe

U = 2.0**-24
FP32 = {"inputs": "fp32", "compute": "fp32", "accumulate": "fp32", "output": "fp32"}


def test_an_exact_element_off_by_three_ulps_is_reported_as_three_ulps():
    """1000 + (-999) is exact; the kernel returns 1 + 3 ulp(1): the exactness gate says "up to 3 ulp"."""
    a, b = np.array([[1000.0, 5.0]], np.float32), np.array([[-999.0, 3.0]], np.float32)
    got = np.array([[1.0 + 3 * 2.0**-23, 8.0]], np.float32)
    v = check(got, [a, b], "add", FP32, diagnose=False)
    ge = next(g for g in v.gates if g.id == "GE")
    assert ge.status == "fail" and "(up to 3 ulp in fp32)" in ge.detail, ge.detail


def test_the_sigma_of_a_unary_op_without_intermediate_error_is_its_output_rounding():
    """square with no intermediate magnitude and an exact argument: σ = u|y| / √3 (uniform output rounding);
    y = 3 gives 3·2^-24/√3 (the η/3 underflow term, ~1e-38, does not show at this precision)."""
    recipe = PrecisionRecipe(inputs=("fp32",), output="fp32")
    block = OracleBlock(y=np.array([3.0]), aux={"x": np.array([np.sqrt(3.0)]), "cond": np.array([0.0]),
                                                "inter": np.array([0.0])})
    bb = rule_unary(block, RuleContext(recipe=recipe, facts={}, activation="square"))
    assert float(bb.sigma[0]) == pytest.approx(3 * U / np.sqrt(3.0), rel=1e-9, abs=0)


def test_fp32_products_add_their_own_rounding_to_the_contraction_variance():
    """fp32 x fp32 products are not exact in fp32: each adds a rounding of u |s_k|, variance u²/3 · Q in all. With
    y = 3, Q = 8, K = 512 (S = 64): σ² = u² y²/3 + u²/3 (K - 1)(y²/3 + Q/6) + u²/3 · Q."""
    fp32 = get_format("fp32")
    recipe = PrecisionRecipe(inputs=("fp32", "fp32"), accumulate="fp32", output="fp32", accumulation="psum_fp32_k128")
    block = OracleBlock(y=np.array([3.0]), scale=np.array([64.0]), sumsq=np.array([8.0]), k=512)
    bb = rule_contraction(block, RuleContext(recipe=recipe, facts={}, operand_formats=(fp32, fp32)))
    want = U * U * 9 / 3 + U * U / 3 * 511 * (3 + 8 / 6) + U * U / 3 * 8
    assert float(bb.sigma[0]) ** 2 == pytest.approx(want, rel=1e-9, abs=0)
