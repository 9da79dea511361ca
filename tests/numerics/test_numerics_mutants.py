"""Tests written to kill mutants of the numerics gates (issue #25, item 5; benchmarks/mutation.py): each
states its expectation from the numerics standard (docs/numerics.md), not from the code."""

from __future__ import annotations

import numpy as np

from nkieval.numerics import PrecisionRecipe, check, emulate_matmul, matmul_inputs
from nkieval.numerics import gates as g


def test_gate_limits_are_the_standards_numbers():
    """docs/numerics.md: G5 fails a 99th-percentile z above 10; G4 allows 1.5x the RMS and 3x the max error
    of a same-precision reference."""
    assert g.Z_P99_LIMIT == 10.0
    assert g.RATIO_RMS_LIMIT == 1.5 and g.RATIO_MAX_LIMIT == 3.0


def _matmul():
    a, b = matmul_inputs("normal", 32, 2048, 64, "bf16", seed=1)
    r = PrecisionRecipe(inputs="bf16", output="fp32")
    ref = emulate_matmul(a, b, order="pairwise", out="fp32")
    seq = emulate_matmul(a, b, order="sequential", out="fp32")  # a correct kernel's summation order
    return a, b, r, ref, seq


def test_g4_fails_on_the_max_error_alone():
    """One element 28x the sequential kernel's worst error off the reference: the RMS ratio stays under 1.5
    (one element of 2048 barely moves it) while the max ratio passes 3, and G4 fails: either limit fails it."""
    a, b, r, ref, seq = _matmul()
    bad = seq.copy()
    bad[3, 7] = ref[3, 7] + 28 * np.abs(seq - ref).max()
    v = check(bad, [a, b], "matmul", r, reference=ref, input_family="normal")
    assert v.metrics.ratio_rms < g.RATIO_RMS_LIMIT < g.RATIO_MAX_LIMIT < v.metrics.ratio_max
    assert v.gate("G4").status == "fail" and v.status == "fail"
    assert [x.id for x in v.gates if x.status == "fail"] == ["G4"]  # no other gate sees one element


def test_a_correct_kernel_passes_every_gate():
    a, b, r, ref, seq = _matmul()
    v = check(seq, [a, b], "matmul", r, reference=ref, input_family="normal")
    assert v.status == "pass" and not [x.id for x in v.gates if x.status == "fail"]
