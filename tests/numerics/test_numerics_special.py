"""NaN/Inf parity, documented platform semantics, FTZ/DAZ equivalence, contracts."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from nkieval.numerics import PrecisionRecipe, check, emulate_matmul, matmul_inputs
from nkieval.numerics.formats import round_to
from nkieval.numerics.inputs import generate


def test_special_values_propagate_like_ieee() -> None:
    a = np.array([[1.0, np.inf], [0.0, 2.0], [np.nan, 1.0]], np.float32)
    b = np.array([[1.0, 0.0], [1.0, -1.0]], np.float32)
    with np.errstate(all="ignore"):
        got = a @ b  # numpy float32: IEEE
    v = check(got, [a, b], "matmul", PrecisionRecipe())
    assert v.status == "pass", v.explanation
    assert v.metrics.nan_expected == 2 and v.metrics.inf_expected == 2
    flipped = got.copy()
    flipped[0, 0] = -np.inf
    v = check(flipped, [a, b], "matmul", PrecisionRecipe())
    assert v.status == "fail" and v.deciding_gate == "G1" and v.metrics.inf_mismatch == 1


def test_overflow_semantics_are_platform_warnings_not_failures() -> None:
    """fp8 overflow: ml_dtypes e4m3 gives inf, Neuron documents NaN, NVIDIA saturates (§2.4)."""
    x = np.array([1.0, 300.0, -1000.0, 2.0], np.float32)
    r = PrecisionRecipe(inputs=("fp32", "fp32"), output="fp8_e4m3")
    ml = (x / np.float32(1)).astype(ml_dtypes.float8_e4m3)
    assert check(ml, [x, np.float32(1)], "quantize", r).status == "pass"
    neuron = np.array([1.0, np.nan, np.nan, 2.0])
    sat = np.array([1.0, 240.0, -240.0, 2.0])
    for got in (neuron, sat):
        v = check(got, [x, np.float32(1)], "quantize", r)
        assert v.status == "pass" and v.gate("G1").status == "warn", v.explanation
        assert v.metrics.special_explained == 2 and any("overflow" in n for n in v.notes)
        assert "Neuron trn2 e4m3 → NaN" in v.gate("G1").detail
    assert check(sat, [x, np.float32(1)], "quantize", r.replace(overflow="saturate")).gate("G1").status == "pass"


def test_ftz_outputs_and_daz_inputs_are_accepted() -> None:
    tiny = np.float32(2.0**-130)  # fp32 subnormal
    a = np.array([[tiny, 1.0]], np.float32)
    b = np.array([[1.0], [0.5]], np.float32)
    exact = np.array([[tiny + np.float32(0.5)]], np.float32)
    daz = np.array([[0.5]], np.float32)  # the denormal operand treated as zero
    for got in (exact, daz):
        assert check(got, [a, b], "matmul", PrecisionRecipe()).status == "pass"
    out_sub = np.array([[tiny]], np.float32)
    v = check(np.zeros((1, 1), np.float32), [out_sub, np.ones((1, 1), np.float32)], "matmul",
              PrecisionRecipe(), diagnose=False)
    assert v.status == "inconclusive"  # FTZ result accepted, but zeros pass: no discrimination


def test_tiny_family_with_fp16_subnormals_must_be_exact() -> None:
    """fp16/fp8 subnormals are ordinary fp32 numbers: flushing them is an error."""
    a, b = matmul_inputs("tiny", 8, 256, 8, "fp16", seed=1)
    good = emulate_matmul(a, b, order="chunked", out="fp32")
    r = PrecisionRecipe(inputs="fp16")
    assert check(good, [a, b], "matmul", r, input_family="tiny").status == "pass"
    a_flushed = np.where(np.abs(a.astype(np.float32)) < 2.0**-14, 0, a).astype(np.float16)
    bad = emulate_matmul(a_flushed, b, order="chunked", out="fp32")
    assert check(bad, [a, b], "matmul", r, input_family="tiny").status == "fail"


def test_activation_outside_scalar_engine_range_is_out_of_contract() -> None:
    x = np.array([0.5, 1.0, 2.0**70], np.float32)
    got = np.log(x.astype(np.float64)).astype(np.float32)
    r = PrecisionRecipe(transcendental="scalar_engine")
    v = check(got, [x], "log", r)
    assert v.status == "inconclusive" and v.deciding_gate == "GC" and v.metrics.n_out_of_contract == 1
    assert "valid range" in v.explanation
    assert check(got, [x], "log", PrecisionRecipe()).status == "pass"  # libm has no range limit
    s = np.array([0.5, 9.0], np.float32)
    v = check(np.sin(s), [s], "sin", r)
    assert v.status == "inconclusive" and v.metrics.n_out_of_contract == 1


def test_softmax_row_with_nan_propagates() -> None:
    x = generate("normal", (4, 64), "fp32", seed=1)
    x[2, 5] = np.nan
    e = np.exp(x - x.max(-1, keepdims=True))
    got = e / e.sum(-1, keepdims=True)
    v = check(got, [x], "softmax", PrecisionRecipe(), input_family="special")
    assert v.status == "pass" and v.metrics.nan_expected == 64
    fixed = np.nan_to_num(got)
    assert check(fixed, [x], "softmax", PrecisionRecipe(), input_family="special").deciding_gate == "G1"


def test_bf16_output_stored_in_fp32_storage_is_fine_but_coarser_storage_is_not() -> None:
    a, b = matmul_inputs("normal", 4, 256, 4, "bf16", seed=2)
    good = emulate_matmul(a, b, order="chunked", out="bf16")
    r = PrecisionRecipe(inputs="bf16", output="bf16")
    assert check(good.astype(np.float32), [a, b], "matmul", r, input_family="normal").status == "pass"
    v = check(good.astype(ml_dtypes.bfloat16), [a, b], "matmul", r.replace(output="fp32"), input_family="normal")
    assert v.status == "fail" and v.deciding_gate == "G0" and "stored as bf16" in v.explanation
    v = check(np.zeros((4, 5)), [a, b], "matmul", r)
    assert v.deciding_gate == "G0" and "shape" in v.explanation
    assert round_to(1.0, "bf16") == 1.0


def test_overflow_with_the_wrong_sign_is_not_excused() -> None:
    x = np.array([1.0, 300.0], np.float32)
    r = PrecisionRecipe(inputs=("fp32", "fp32"), output="fp8_e4m3")
    v = check(np.array([1.0, -np.inf]), [x, np.float32(1)], "quantize", r)
    assert v.status == "fail" and v.deciding_gate == "G1"


def test_trn1_saturate_infinity_only_on_trn1() -> None:
    a = np.array([[np.inf, 1.0]], np.float32)
    b = np.array([[1.0], [1.0]], np.float32)
    got = np.array([[np.finfo(np.float32).max]], np.float32)
    assert check(got, [a, b], "matmul", PrecisionRecipe(platform="trn1")).gate("G1").status == "warn"
    assert check(got, [a, b], "matmul", PrecisionRecipe(platform="trn2")).status == "fail"


def test_integer_elementwise_is_exact() -> None:
    a = np.arange(-50, 50, dtype=np.int32)
    r = PrecisionRecipe(inputs="int32", accumulate="int32", output="int32")
    assert check(a + 3, [a, np.int32(3)], "add", r).deciding_gate == "GE"
    assert check(a + 4, [a, np.int32(3)], "add", r).status == "fail"
