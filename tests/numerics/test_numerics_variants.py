"""Diagnosis names a reference op's declared wrong formula (``Variant``) when it reproduces the output."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from nkieval.numerics import PrecisionRecipe, Variant, check, generic_op

_ERF = np.vectorize(math.erf, otypes=[np.float64])


def _z(x_t: np.ndarray, w: np.ndarray) -> np.ndarray:
    return x_t.astype(np.float64).T @ w.astype(np.float64)


def gelu_exact(x_t: np.ndarray, w: np.ndarray) -> np.ndarray:
    z = _z(x_t, w)
    return 0.5 * z * (1.0 + _ERF(z / math.sqrt(2.0)))


def gelu_tanh(x_t: np.ndarray, w: np.ndarray) -> np.ndarray:
    z = _z(x_t, w)
    return 0.5 * z * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (z + 0.044715 * z**3)))


def gelu_sigmoid(x_t: np.ndarray, w: np.ndarray) -> np.ndarray:
    z = _z(x_t, w)
    return z / (1.0 + np.exp(-1.702 * z))


TANH = Variant("gelu_apprx_tanh", "computes the tanh-approximation GELU instead of the exact erf GELU",
               "use the exact (erf) GELU", gelu_tanh)
SIGMOID = Variant("gelu_sigmoid", "computes the sigmoid-approximation GELU", "use the exact (erf) GELU",
                  gelu_sigmoid)
RECIPE = PrecisionRecipe(inputs=("bf16", "bf16"), accumulate="fp32", output="fp32")


def _inputs(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x_t = rng.standard_normal((64, 96)).astype(ml_dtypes.bfloat16)
    w = (rng.standard_normal((64, 80)) / 8).astype(ml_dtypes.bfloat16)
    return x_t, w


def test_declared_variant_is_named_as_the_cause() -> None:
    x_t, w = _inputs()
    got = gelu_tanh(x_t, w).astype(np.float32)
    op = generic_op(gelu_exact, k=64, multilinear=False, variants=(SIGMOID, TANH))
    v = check(got, [x_t, w], op, RECIPE, input_family="normal")
    assert v.status == "fail"
    assert v.findings and v.findings[0].id == "gelu_apprx_tanh", [f.id for f in v.findings]
    assert "tanh" in v.findings[0].cause
    assert "gelu_sigmoid" not in [f.id for f in v.findings]


def test_variant_not_named_when_it_does_not_explain_the_output() -> None:
    x_t, w = _inputs(1)
    got = (gelu_exact(x_t, w) * 1.01).astype(np.float32)  # a wrong scale, not the tanh formula
    op = generic_op(gelu_exact, k=64, multilinear=False, variants=(TANH,))
    v = check(got, [x_t, w], op, RECIPE, input_family="normal")
    assert v.status == "fail"
    assert "gelu_apprx_tanh" not in [f.id for f in v.findings]


def test_passing_output_is_not_diagnosed() -> None:
    x_t, w = _inputs(2)
    got = gelu_exact(x_t, w).astype(np.float32)
    op = generic_op(gelu_exact, k=64, multilinear=False, variants=(TANH,))
    assert check(got, [x_t, w], op, RECIPE, input_family="normal").status == "pass"


def test_variant_formula_is_evaluated_once_per_prepared_check() -> None:
    from nkieval.numerics import PreparedCheck

    calls = []

    def counted(x_t: np.ndarray, w: np.ndarray) -> np.ndarray:
        calls.append(1)
        return gelu_tanh(x_t, w)

    x_t, w = _inputs()
    op = generic_op(gelu_exact, k=64, multilinear=False,
                    variants=(Variant(TANH.id, TANH.cause, TANH.action, counted),))
    pc = PreparedCheck([x_t, w], op, RECIPE, input_family="normal")
    got = gelu_tanh(x_t, w).astype(np.float32)
    other = (got * np.float32(1 + 2.0**-20)).astype(np.float32)  # another output, the same flaw
    fresh = check(got, [x_t, w], op, RECIPE, input_family="normal")
    n0 = len(calls)
    v1 = pc.check(got)
    v2 = pc.check(other)
    assert len(calls) - n0 == 1
    assert v1.findings[0].id == v2.findings[0].id == "gelu_apprx_tanh"
    assert v1.to_dict() == fresh.to_dict()
    assert pc.nbytes() >= got.size * 8  # the kept formula values are counted


def _scaled(x_t: np.ndarray, w: np.ndarray) -> np.ndarray:
    return 1e5 * _z(x_t, w)


def _unscaled(x_t: np.ndarray, w: np.ndarray) -> np.ndarray:
    return _z(x_t, w)  # drops the large factor: tiny next to the reference, as rmsnorm_gemm's no-gamma is


UNSCALED = Variant("drops_scale", "drops the scale factor", "multiply by the scale", _unscaled)


def test_an_all_zeros_output_is_not_reproduced_by_a_variant_that_is_small_next_to_the_reference() -> None:
    # A formula whose values are tiny next to the reference is closer to zeros than the reference is, but it
    # does not reproduce an all-zeros output: zeros explains it exactly (rmsnorm_gemm, the offset family).
    x_t, w = _inputs(3)
    got = np.zeros_like(_scaled(x_t, w), dtype=np.float32)
    op = generic_op(_scaled, k=64, multilinear=True, variants=(UNSCALED,))
    v = check(got, [x_t, w], op, RECIPE, input_family="normal")
    assert v.status == "fail"
    ids = [f.id for f in v.findings]
    assert ids and ids[0] == "zeros", ids
    assert "drops_scale" not in ids


def test_the_small_variant_is_still_named_when_the_kernel_computes_it() -> None:
    x_t, w = _inputs(3)
    got = _unscaled(x_t, w).astype(np.float32)
    op = generic_op(_scaled, k=64, multilinear=True, variants=(UNSCALED,))
    v = check(got, [x_t, w], op, RECIPE, input_family="normal")
    assert v.status == "fail"
    assert v.findings and v.findings[0].id == "drops_scale", [f.id for f in v.findings]
