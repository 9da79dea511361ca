"""The comparison claims of docs/numerics.md: fixed tolerances reject correct kernels and accept
wrong ones; the standard does neither. Every case compares against the float64 oracle, the
best reference a fixed tolerance could be given."""

from __future__ import annotations

import numpy as np
import pytest
from numerics_testlib import softmax32

from nkieval.numerics import PrecisionRecipe, check, emulate_matmul, matmul_inputs
from nkieval.numerics.baselines import BASELINES, allclose, rel_l2
from nkieval.numerics.formats import round_to
from nkieval.numerics.inputs import generate

R32 = PrecisionRecipe()


def _oracle(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a.astype(np.float64) @ b.astype(np.float64)


@pytest.mark.parametrize(("k", "torch_ok"), [(128, True), (1024, False), (4096, False)])
def test_torch_fp32_defaults_reject_a_correct_fp32_gemm_from_k1024(k: int, torch_ok: bool) -> None:
    a, b = matmul_inputs("normal", 64, k, 64, "fp32", seed=k)
    got = (a @ b).astype(np.float32)  # fp32 BLAS
    assert BASELINES["torch.testing defaults"](got, _oracle(a, b), "fp32") is torch_ok
    assert check(got, [a, b], "matmul", R32, input_family="normal").status == "pass"


def test_kernelbench_fp32_rejects_a_correct_gemm_at_k65536() -> None:
    a, b = matmul_inputs("normal", 8, 65536, 8, "fp32", seed=1)
    got = emulate_matmul(a, b, order="sequential", out="fp32")
    assert not BASELINES["KernelBench"](got, _oracle(a, b), "fp32")
    assert check(got, [a, b], "matmul", R32, input_family="normal").status == "pass"


def _cancellation_case(noise: float) -> tuple[np.ndarray, np.ndarray]:
    """a = 1000 + noise·N(0,1); b's columns are +v then −v (exact zero sum), so partial sums
    climb to S/2 before cancelling: S ≈ 2.6·10^6 at K = 4096 (research note §5.3)."""
    rng = np.random.default_rng(0)
    k = 4096
    a = (1000.0 + noise * rng.standard_normal((16, k))).astype(np.float32)
    half = np.abs(0.8 * rng.standard_normal((k // 2, 16))).astype(np.float32)
    return a, np.concatenate([half, -half])


def test_allclose_1e2_rejects_correct_fp32_kernels_on_cancellation() -> None:
    """The standard never fails them: |y| here is below what fp32 accumulation of S ≈ 2.6·10^6
    can resolve in the worst case (γ_K·S ≈ 640), so it reports inconclusive, not fail."""
    a, b = _cancellation_case(3.6)
    y = _oracle(a, b)
    assert np.median(np.abs(a.astype(np.float64)) @ np.abs(b)) > 2e6 and np.median(np.abs(y)) < 200
    for order in ("sequential", "chunked", "blas"):
        got = emulate_matmul(a, b, order=order, out="fp32")
        assert not allclose(got, y, 1e-2, 1e-2), order  # a correct kernel, rejected
        v = check(got, [a, b], "matmul", R32)  # ordered data: structured, the hard bound decides
        assert v.status != "fail" and v.metrics.margin_det < 0.01, v.explanation
    seq = emulate_matmul(a, b, order="sequential", out="fp32")
    assert not allclose(seq, emulate_matmul(a, b, order="chunked", out="fp32"), 1e-2, 1e-2)  # kernel vs reference


def test_when_the_result_is_pure_rounding_noise_the_standard_says_inconclusive() -> None:
    """Research note §5.3's extreme case (median |y| ≈ 0.03, S ≈ 2.6·10^6): allclose fails the
    correct kernel; the standard does not fail it, but reports that zeros would pass too."""
    a, b = _cancellation_case(6e-4)
    b = b[np.random.default_rng(1).permutation(b.shape[0])]
    y = _oracle(a, b)
    assert np.median(np.abs(y)) < 0.1
    got = emulate_matmul(a, b, order="chunked", out="fp32")
    assert not allclose(got, y, 1e-2, 1e-2)
    v = check(got, [a, b], "matmul", R32, input_family="cancellation")
    assert v.status == "inconclusive" and v.deciding_gate == "G7" and v.metrics.margin_prb < 0.05


def test_allclose_1e2_accepts_a_bf16_output_where_fp32_was_declared() -> None:
    a, b = matmul_inputs("normal", 64, 512, 64, "bf16", seed=2)
    good = emulate_matmul(a, b, order="chunked", out="fp32")
    silent = round_to(good, "bf16").astype(np.float32)
    assert allclose(silent, _oracle(a, b), 1e-2, 1e-2)
    v = check(silent, [a, b], "matmul", PrecisionRecipe(inputs="bf16", output="fp32"), input_family="normal")
    assert v.status == "fail" and v.metrics.margin_prb > 10


def test_allclose_1e2_accepts_zeros_for_a_wide_softmax() -> None:
    x = generate("normal", (8, 4096), "fp32", seed=3)
    y = softmax32(x)
    zeros = np.zeros_like(y)
    assert allclose(zeros, y, 1e-2, 1e-2)
    v = check(zeros, [x], "softmax", R32, input_family="normal")
    assert v.status == "fail" and v.finding_ids()[0] == "zeros"


def test_rel_l2_rejects_every_correct_bf16_output_and_accepts_a_bad_column() -> None:
    a, b = matmul_inputs("normal", 64, 512, 64, "bf16", seed=4)
    good = emulate_matmul(a, b, order="chunked", out="bf16")
    assert rel_l2(good, _oracle(a, b)) > 2e-5  # bf16 output rounding alone: ≈ u/√3 ≈ 2e-3
    assert check(good, [a, b], "matmul", PrecisionRecipe(inputs="bf16", output="bf16"),
                 input_family="normal").status == "pass"
    a, b = matmul_inputs("normal", 64, 512, 512, "bf16", seed=5)
    good = emulate_matmul(a, b, order="chunked", out="fp32")
    bad = good.copy()
    bad[:, 300] *= 1 + 4e-4  # one column 4e-4 off
    assert rel_l2(bad, _oracle(a, b)) <= 2e-5
    v = check(bad, [a, b], "matmul", PrecisionRecipe(inputs="bf16", output="fp32"), input_family="normal")
    assert v.status == "fail" and "column(s) 300" in v.metrics.mismatch_where
