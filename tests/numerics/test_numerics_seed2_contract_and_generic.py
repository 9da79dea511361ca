"""The two numerics mutants left open by the seed-2 mutation run (issue #25, item 5):

* the norm rule's rsqrt contract has an upper end too: with the Scalar engine's transcendental model, rsqrt is
  valid on [2^-87, 2^97] (``numerics/recipe.py``), so an rmsnorm whose variance + eps is above 2^97 is outside the
  recipe's contract (inconclusive, gate GC), like one below 2^-87;
* the generic rule's probabilistic bound keeps the output rounding ``u_out |y|``: a correctly rounded bf16 output
  of a K = 1 op is off by up to half a bf16 ulp, 2^-9 |y|, and must pass.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from nkieval.numerics import PrecisionRecipe, check


def test_rmsnorm_with_variance_above_the_rsqrt_range_is_out_of_contract():
    """Rows of 2^50: the mean square is 2^100 > 2^97. Every one of the 128 elements is outside the contract."""
    x, g = np.full((2, 64), 2.0**50, np.float32), np.ones((64,), np.float32)
    y = (x / np.sqrt(2.0**100 + 1.0)).astype(np.float32)
    scalar_engine = PrecisionRecipe(transcendental="scalar_engine")
    v = check(y, [x, g], "rmsnorm", scalar_engine, eps=1.0, diagnose=False)
    assert (v.status, v.deciding_gate, v.metrics.n_out_of_contract) == ("inconclusive", "GC", 128)
    assert "rsqrt valid range" in v.explanation
    inside = np.ones((2, 64), np.float32)  # the mean square 1 is inside: judged normally
    v = check((inside / np.sqrt(2.0)).astype(np.float32), [inside, g], "rmsnorm", scalar_engine, eps=1.0,
              diagnose=False)
    assert v.status == "pass" and v.metrics.n_out_of_contract == 0


def test_a_correctly_rounded_bf16_output_of_a_generic_op_passes():
    """y = 3x for x in [64, 128): |y| in [192, 384), a bf16 ulp there is 1 or 2, so the rounding error reaches
    about 1 while the accumulation terms (K = 1, fp32) are ~1e-5: the bound is the output rounding's u_out |y|
    (2^-8 |y| >= 0.75), also in the probabilistic bound (G3, enforced on a random input family). The correctly
    rounded output passes; one two ulps off fails."""
    x = np.random.default_rng(5).uniform(64, 128, (8, 64)).astype(np.float32)
    exact = x.astype(np.float64) * 3.0
    rounded = exact.astype(ml_dtypes.bfloat16).astype(np.float32)
    bf16_out = PrecisionRecipe(output="bf16", k=1)
    v = check(rounded, [x], "generic", bf16_out, fn=lambda a: a * 3.0, multilinear=True,
              input_family="uniform", diagnose=False)
    assert v.status == "pass", v.explanation
    assert v.worst[0].error > 0.5  # the test exercises the rounding term, not a coincidentally exact output
    ulp = np.spacing(rounded.astype(ml_dtypes.bfloat16)).astype(np.float32)
    off = (rounded + 2 * ulp).astype(ml_dtypes.bfloat16).astype(np.float32)
    assert check(off, [x], "generic", bf16_out, fn=lambda a: a * 3.0, multilinear=True, input_family="uniform",
                 diagnose=False).status == "fail"
