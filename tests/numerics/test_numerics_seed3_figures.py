"""Numerics verdict details where mutation testing (seed 3) found them unchecked (issue #25, item 5)."""

from __future__ import annotations

import numpy as np

from nkieval.numerics import PrecisionRecipe, check


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
