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
