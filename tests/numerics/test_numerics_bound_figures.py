"""Bounds and statistics of the numerics standard checked against figures worked by hand (issue #25, item 5:
mutants of ``bounds.py`` and ``stream.py`` survived). docs/numerics.md §4: an fp32 add is bounded by
``u_out|y| + (1 + u_out) u (|a| + |b|) + η`` (u = 2^-24); the correctly-rounded rate of a reference is the share of
its elements equal to the correctly rounded oracle."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from nkieval.numerics import check

FP32 = {"inputs": "fp32", "compute": "fp32", "accumulate": "fp32", "output": "fp32"}
U = 2.0 ** -24


def test_an_inexact_fp32_add_gets_the_documented_bound():
    """1e8 + fl32(0.3): the exact sum is 100000000.3000000119; the kernel returns 1e8 + 8 (one fp32 step above
    the correctly rounded 1e8). Error 7.69999998808, bound 2^-24 |y| + (1 + 2^-24) 2^-24 (|a| + |b|) = 11.9209...,
    margin 0.6459...; without the operation-rounding term the bound would be 5.96 and the add would fail."""
    b0 = float(np.float32(0.3))
    a, b = np.array([[1e8, 3.0]], np.float32), np.array([[b0, 0.5]], np.float32)
    v = check(np.array([[1e8 + 8, 3.5]], np.float32), [a, b], "add", FP32, diagnose=False)
    exact = 1e8 + b0
    bound = U * exact + (1 + U) * U * (1e8 + b0)
    assert v.status == "pass"
    assert v.worst[0].bound == pytest.approx(bound, rel=1e-9)
    assert v.margin == pytest.approx((1e8 + 8 - exact) / bound, rel=1e-9)
    # its z-score: error / sigma, sigma = sqrt((u|y|)^2 / 3 + (u(|a| + |b|))^2 / 3) (uniform rounding errors)
    sigma = np.sqrt((U * exact) ** 2 / 3 + (U * (1e8 + b0)) ** 2 / 3)
    assert v.worst[0].z == pytest.approx((1e8 + 8 - exact) / sigma, rel=1e-6)


def test_an_exact_fp32_add_must_be_bitwise():
    """1000 - 999 is exact in fp32 (Sterbenz): any other result fails."""
    a, b = np.array([[1000.0]], np.float32), np.array([[-999.0]], np.float32)
    exact = check(np.array([[1.0]], np.float32), [a, b], "add", FP32, diagnose=False)
    assert exact.status == "pass" and exact.worst == ()  # an element without error is nobody's worst element
    assert check(np.array([[1.0001]], np.float32), [a, b], "add", FP32, diagnose=False).status == "fail"


def test_the_reference_correctly_rounded_rate_counts_equal_elements_only():
    """Half of the reference's elements are one fp32 step *below* the correctly rounded sum: rate 0.5."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((4, 64)).astype(np.float32)
    b = rng.standard_normal((4, 64)).astype(np.float32)
    y = (a.astype(np.float64) + b).astype(np.float32)
    ref = y.copy()
    ref[:2] = np.nextafter(y[:2], np.float32(-np.inf))
    v = check(y, [a, b], "add", FP32, reference=ref, diagnose=False)
    assert v.metrics.cr_rate_ref == pytest.approx(0.5)


def test_a_declared_bf16_compute_allows_the_arguments_rounding_to_bf16():
    """square(x) with the argument rounded to bf16 first: its error is up to |2x| |x - bf16(x)| <= 2x^2 2^-8, which
    the recipe's bf16 compute allows (argument conditioning eps_in |x f'(x)|) and an fp32 compute does not."""
    x = np.random.default_rng(2).standard_normal((4, 256)).astype(np.float32)
    xb = x.astype(ml_dtypes.bfloat16).astype(np.float64)
    y = (xb * xb).astype(np.float32)
    bf16 = check(y, [x], "square", {**FP32, "compute": "bf16"}, diagnose=False)
    assert bf16.status == "pass" and bf16.margin <= 1.0
    assert check(y, [x], "square", FP32, diagnose=False).status == "fail"


def test_rmsnorm_with_the_mean_square_equal_to_eps_keeps_a_tight_bound():
    """Rows of ones with eps = 1: y = 1/sqrt(2). The fp32 budget is a few ulps (the relative error of the mean
    square is damped by var / (var + eps) = 1/2), so a result 1 % off fails."""
    x, g = np.ones((2, 64), np.float32), np.ones((64,), np.float32)
    y = (x / np.sqrt(2.0)).astype(np.float32)
    good = check(y, [x, g], "rmsnorm", FP32, eps=1.0, diagnose=False)
    assert good.status == "pass" and good.worst[0].bound < 1e-5
    assert check((y * 1.01).astype(np.float32), [x, g], "rmsnorm", FP32, eps=1.0, diagnose=False).status == "fail"


def test_an_output_rounded_to_bf16_is_recognised_among_exact_zeros():
    """relu of normal data: half the outputs are exact zeros (on every grid), the other half fp32 values that are
    rarely bf16 values. A kernel that rounds its result to bf16 leaves every nonzero output on the bf16 grid: the
    fingerprint names bf16, judged on the nonzero outputs only; the correct output gets none."""
    x = np.random.default_rng(3).standard_normal((8, 128)).astype(np.float32)
    rounded = np.maximum(x, 0).astype(ml_dtypes.bfloat16).astype(np.float32)
    assert check(rounded, [x], "relu", FP32, diagnose=False).metrics.output_grid == "bf16"
    assert check(np.maximum(x, 0), [x], "relu", FP32, diagnose=False).metrics.output_grid is None
