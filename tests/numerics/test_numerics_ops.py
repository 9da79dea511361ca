"""Every op class: correct implementations pass, a perturbed one fails; generic path; API edges."""

from __future__ import annotations

import math
from collections.abc import Callable

import ml_dtypes
import numpy as np
import pytest
from numerics_testlib import log_softmax32, rmsnorm32, softmax32

from nkieval.numerics import (
    PrecisionRecipe,
    UnknownOpError,
    check,
    check_stochastic_rounding,
    default_recipe,
    k_scaling_slope,
)
from nkieval.numerics.formats import round_stochastic, round_to
from nkieval.numerics.inputs import generate, reduction_inputs
from nkieval.numerics.oracle import ACTIVATIONS, evaluate
from nkieval.numerics.platforms import accumulate

R32 = PrecisionRecipe()


def _sigmoid64(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


_ERF = np.vectorize(math.erf, otypes=[np.float64])

#: Each activation written from its textbook definition with NumPy and ``math`` in float64 (independent of
#: ``nkieval.numerics.oracle``, which the check uses as its reference).
INDEPENDENT: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "abs": np.abs, "copy": lambda x: x, "cos": np.cos, "erf": _ERF, "exp": np.exp, "exp2": np.exp2,
    "gelu": lambda x: 0.5 * x * (1.0 + _ERF(x / math.sqrt(2.0))),
    "gelu_sigmoid": lambda x: x * _sigmoid64(1.702 * x),
    "gelu_tanh": lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3))),
    "log": np.log, "neg": np.negative, "reciprocal": lambda x: 1.0 / x, "relu": lambda x: np.maximum(x, 0.0),
    "rsqrt": lambda x: 1.0 / np.sqrt(x), "sigmoid": _sigmoid64, "silu": lambda x: x * _sigmoid64(x),
    "sin": np.sin, "softplus": lambda x: np.log1p(np.exp(x)), "sqrt": np.sqrt, "square": np.square,
    "tanh": np.tanh,
}


def test_every_activation_has_an_independent_formula() -> None:
    assert set(INDEPENDENT) == set(ACTIVATIONS)


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_every_activation_correct_passes(name: str, dtype: str) -> None:
    """An fp32 engine computing the textbook formula (float64, rounded once by NumPy) passes; the same
    output with one element pushed 64 fp32 ulps off fails (so the check is not vacuous)."""
    x = generate("normal", (2048,), dtype, seed=1)
    if name in ("log", "sqrt", "rsqrt"):
        x = np.abs(x) + x.dtype.type(0.01)
    exact = INDEPENDENT[name](np.asarray(x).astype(np.float64))
    got = exact.astype(np.float32)
    if dtype == "bf16":
        got = got.astype(ml_dtypes.bfloat16)
    recipe = PrecisionRecipe(inputs=dtype, output=dtype)
    v = check(got, [x], name, recipe, input_family="normal")
    assert v.status == "pass", v.explanation
    if dtype == "fp32" and name != "copy":
        i = int(np.argmax(np.abs(exact)))
        bad = got.copy()
        bad[i] = np.float32(float(bad[i]) * (1.0 + 64 * 2.0**-23))
        assert check(bad, [x], name, recipe, input_family="normal").status == "fail", name


def test_activation_with_lower_precision_than_declared_fails() -> None:
    x = generate("normal", (4096,), "fp32", seed=2)
    bf16_exp = round_to(np.exp(x.astype(np.float64)), "bf16").astype(np.float32)
    v = check(bf16_exp, [x], "exp", R32, input_family="normal")
    assert v.status == "fail" and v.finding_ids()[0] == "bf16_output"


@pytest.mark.parametrize(("op", "axis"), [("sum", -1), ("sum", 0), ("mean", -1), ("sum", None)])
def test_reductions(op: str, axis: int | None) -> None:
    x = reduction_inputs("uniform", 64, 1000, "fp32", seed=3)
    x64 = x.astype(np.float64)
    ref = x64.mean(axis=axis) if op == "mean" else x64.sum(axis=axis)
    got = round_to(ref, "fp32").astype(np.float32)
    assert check(got, [x], op, R32, input_family="uniform", axis=axis).status == "pass"
    if axis == -1:
        bad = got * np.float32(1 + 2.0**-10)
        assert check(bad, [x], op, R32, input_family="uniform", axis=axis).status == "fail"


def test_cumsum_sequential_passes_and_shifted_fails() -> None:
    x = reduction_inputs("normal", 16, 4096, "fp32", seed=4)
    seq = np.cumsum(x, axis=-1, dtype=np.float32)
    assert check(seq, [x], "cumsum", R32, input_family="normal").status == "pass"
    shifted = np.concatenate([np.zeros((16, 1), np.float32), seq[:, :-1]], axis=1)
    v = check(shifted, [x], "cumsum", R32, input_family="normal")
    assert v.status == "fail"


def test_log_softmax_and_rmsnorm() -> None:
    x = generate("normal", (32, 1024), "fp32", seed=5)
    assert check(log_softmax32(x), [x], "log_softmax", R32, input_family="normal").status == "pass"
    g = generate("normal", (1024,), "fp32", seed=6)
    assert check(rmsnorm32(x, g), [x, g], "rmsnorm", R32, input_family="normal").status == "pass"
    v = check(rmsnorm32(x, g) * np.float32(1.01), [x, g], "rmsnorm", R32, input_family="normal")
    assert v.status == "fail" and "constant_factor" in v.finding_ids()


def test_softmax_bf16_in_out() -> None:
    x = generate("normal", (8, 4096), "bf16", seed=7)
    got = softmax32(x).astype(ml_dtypes.bfloat16)
    r = PrecisionRecipe(inputs="bf16", output="bf16")
    v = check(got, [x], "softmax", r, input_family="normal")
    assert v.status == "pass" and v.metrics.max_ulp <= 1


@pytest.mark.parametrize("op", ["add", "mul", "maximum"])
def test_binary_ops(op: str) -> None:
    a = generate("normal", (64, 64), "bf16", seed=8)
    b = generate("normal", (64,), "bf16", seed=9)
    fn = {"add": np.add, "mul": np.multiply, "maximum": np.maximum}[op]
    got = fn(a.astype(np.float32), b.astype(np.float32)).astype(ml_dtypes.bfloat16)
    r = PrecisionRecipe(inputs="bf16", output="bf16")
    assert check(got, {"a": a, "b": b}, op, r, input_family="normal").status == "pass"


def test_integer_matmul_is_exact_and_overflow_is_out_of_contract() -> None:
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (8, 300)).astype(np.int8)
    b = rng.integers(-128, 128, (300, 8)).astype(np.int8)
    exact = a.astype(np.int64) @ b.astype(np.int64)
    r = PrecisionRecipe(inputs="int8", accumulate="int32", output="int32")
    v = check(exact.astype(np.int32), [a, b], "matmul", r)
    assert v.status == "pass" and v.deciding_gate == "GE"
    off = exact.copy()
    off[0, 0] += 1
    assert check(off.astype(np.int32), [a, b], "matmul", r).status == "fail"
    big = np.full((1, 140_000), 127, np.int8)  # 127²·140000 > 2^31
    v = check(np.zeros((1, 1), np.int32), [big, big.T.copy()], "matmul", r)
    assert v.status == "inconclusive" and v.deciding_gate == "GC"


def test_quantize_accepts_either_neighbour_only_near_ties() -> None:
    s = np.float32(0.1)
    x = (np.arange(-40, 40, dtype=np.float32) * np.float32(0.0125))
    r = PrecisionRecipe(inputs=("fp32", "fp32"), output="fp8_e4m3fn")
    div = (x / s).astype(ml_dtypes.float8_e4m3fn)
    mul = (x * (np.float32(1) / s)).astype(ml_dtypes.float8_e4m3fn)
    assert check(div, [x, s], "quantize", r).status == "pass"
    assert check(mul, [x, s], "quantize", r).status == "pass"
    bad = div.astype(np.float32)
    bad[7] = round_to(bad[7] * 1.2, "fp8_e4m3fn")
    assert check(bad, [x, s], "quantize", r).deciding_gate == "GE"


def test_generic_path_with_declared_k() -> None:
    """conv1d through a reference function: S from |inputs| (sums of products)."""
    x = generate("normal", (4096,), "bf16", seed=10)
    w = generate("normal", (129,), "bf16", seed=11)

    def conv(x, w):
        return np.convolve(x, w, mode="valid")

    got = np.convolve(x.astype(np.float32), w.astype(np.float32), mode="valid")
    r = PrecisionRecipe(inputs="bf16", output="fp32", k=129)
    v = check(got, [x, w], conv, r, input_family="normal")
    assert v.status == "pass" and v.op == "generic"
    v = check(got[::-1].copy(), [x, w], conv, r, input_family="normal")
    assert v.status == "fail"
    with pytest.raises(ValueError, match="needs the contraction"):
        check(got, [x, w], conv, PrecisionRecipe(inputs="bf16"))


def test_generic_path_nonlinear_by_perturbation() -> None:
    x = generate("normal", (16, 256), "fp32", seed=12)

    def sm(x):
        e = np.exp(x - x.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    got = softmax32(x)
    v = check(got, [x], "generic", PrecisionRecipe(k=256), fn=sm, multilinear=False, input_family="normal")
    assert v.status == "pass"
    assert check(got * np.float32(1.001), [x], "generic", PrecisionRecipe(k=256), fn=sm, multilinear=False,
                 input_family="normal").status == "fail"


def test_generic_early_acceptance_is_conservative() -> None:
    """Sequential perturbation draws: a pass may stop after 4 draws (S is then a lower bound
    of the 16-draw S, so the margin can only be larger); a fail, and an input set where an
    all-zeros output would pass (G7), are judged with all 16 draws, exactly as in one pass."""
    from nkieval.numerics import generic_op

    x = generate("normal", (16, 256), "fp32", seed=12)
    calls = []

    def sm(x):
        calls.append(1)
        e = np.exp(x - x.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    r = PrecisionRecipe(k=256)
    full, early = generic_op(sm, k=256, multilinear=False, early=False), generic_op(sm, k=256, multilinear=False)
    got = softmax32(x)
    calls.clear()
    vf = check(got, [x], full, r, input_family="normal")
    assert len(calls) == 17
    calls.clear()
    ve = check(got, [x], early, r, input_family="normal")
    assert len(calls) == 5 and ve.status == vf.status == "pass"
    assert any("remaining draws were skipped" in n for n in ve.notes)
    assert vf.margin <= ve.margin <= 1.0 and ve.metrics.margin_det >= vf.metrics.margin_det
    bad = got * np.float32(1.001)
    calls.clear()
    vb = check(bad, [x], early, r, input_family="normal", diagnose=False)
    assert len(calls) == 17 and vb.status == "fail"
    assert vb.to_dict() == check(bad, [x], full, r, input_family="normal", diagnose=False).to_dict()

    # massive cancellation: every |y| is inside its bound, the data cannot discriminate (G7)
    a = generate("normal", (4096,), "fp32", seed=13).astype(np.float64)
    b = a * (1 + 2.0**-20)

    def diff(a, b):
        calls.append(1)
        return a - b

    y = (a - b).astype(np.float32)
    for kw in ({}, {"early": False}):
        calls.clear()
        v = check(y, [a.astype(np.float32), b.astype(np.float32)], generic_op(diff, k=256, multilinear=False, **kw),
                  r, input_family="normal")
        assert v.status == "inconclusive" and v.deciding_gate == "G7" and len(calls) == 17


def test_stochastic_rounding_conformance() -> None:
    rng = np.random.default_rng(1)
    exact = rng.standard_normal(512)
    runs = np.stack([round_stochastic(exact, "bf16", rng) for _ in range(32)])
    assert check_stochastic_rounding(runs, exact, "bf16").status == "pass"
    truncated = np.stack([np.trunc(exact * 128) / 128] * 32)  # not neighbours for most values
    assert check_stochastic_rounding(truncated, exact, "bf16").status == "fail"
    down = np.stack([np.where(round_to(exact, "bf16") <= exact, round_to(exact, "bf16"),
                              round_to(exact - np.abs(exact) * 2.0**-8, "bf16"))] * 32)
    g = check_stochastic_rounding(down, exact, "bf16")
    assert g.status == "fail" and g.value > 6  # always rounding down is biased


def test_k_scaling_slope_separates_biased_accumulation() -> None:
    ks, unbiased, biased = [256, 1024, 4096, 16384], [], []
    for k in ks:
        x = reduction_inputs("normal", 64, k, "fp32", seed=k).astype(np.float64)
        S = np.abs(x).sum(1)
        for mode, out in (("rne", unbiased), ("truncate", biased)):
            got = accumulate(x, order="sequential", acc_bits=13, acc_rounding=mode)
            out.append(float(np.sqrt(np.mean(((got - x.sum(1)) / S) ** 2))))
    assert k_scaling_slope(ks, unbiased) < 0.3 < k_scaling_slope(ks, biased)


def test_api_edges() -> None:
    a = generate("normal", (4, 8), "bf16", seed=1)
    b = generate("normal", (8, 3), "bf16", seed=2)
    y = evaluate("matmul", [a, b])
    assert y.shape == (4, 3)
    r = default_recipe([a, b], y.astype(np.float32))
    assert r.inputs == ("bf16", "bf16") and r.output == "fp32" and r.accumulate == "fp32"
    with pytest.raises(UnknownOpError, match="did you mean 'softmax'"):
        check(y, [a], "sofmax")
    with pytest.raises(ValueError, match="unknown input name"):
        check(y, {"a": a, "c": b}, "matmul")
    v = check(y.astype(np.float32), [a, b], "matmul", PrecisionRecipe(inputs="bf16", k=9))
    assert v.deciding_gate == "G0" and "K = 9" in v.explanation
    # fp32 data declared as bf16: the oracle rounds it first, and says so
    a32 = generate("normal", (4, 8), "fp32", seed=1)
    y = evaluate("matmul", [round_to(a32, "bf16"), b])
    v = check(y.astype(np.float32), [a32, b], "matmul", PrecisionRecipe(inputs="bf16"))
    assert v.status == "pass" and any("rounded to the declared bf16" in n for n in v.notes)


def test_ratio_gate_against_a_same_precision_reference() -> None:
    """G4: error no worse than 1.5× (RMS) / 3× (max) a reference in the same recipe, floored by
    the recipe's expected error, so a correct kernel never fails for a more accurate reference."""
    from nkieval.numerics import emulate_matmul, matmul_inputs

    a, b = matmul_inputs("normal", 32, 2048, 64, "bf16", seed=1)
    r = PrecisionRecipe(inputs="bf16", output="fp32")
    ref = emulate_matmul(a, b, order="pairwise", out="fp32")  # a very accurate reference
    seq = emulate_matmul(a, b, order="sequential", out="fp32")  # ~10× less accurate, still correct
    v = check(seq, [a, b], "matmul", r, reference=ref, input_family="normal")
    assert v.status == "pass" and v.gate("G4").status == "pass"
    assert v.metrics.sigma_ratio > 3  # plainly less accurate than the reference...
    assert v.metrics.ratio_rms <= 1.5  # ...but not than the recipe's expected error
    bad = seq.copy()
    bad[:, 5] = emulate_matmul(a, b[:, 5:6], order="chunked", psum="bf16", out="fp32")[:, 0]
    v = check(bad, [a, b], "matmul", r, reference=ref, input_family="normal")
    assert v.status == "fail" and v.gate("G4").status == "fail"
    assert "column(s) 5" in v.metrics.mismatch_where
    tf32_ref = emulate_matmul(a, b, order="chunked", input_format="tf32", out="fp32")
    assert check(seq, [a, b], "matmul", r, reference=tf32_ref, input_family="normal").gate("G4").status == "pass"


def test_generic_perturbation_leaves_integer_operands_alone() -> None:
    """A gather through a reference function: the ids are indices, not rounded data."""
    table = generate("normal", (64, 16), "fp32", seed=1)
    ids = np.array([3, 7, 7, 63, 0], np.int32)

    def gather(t, i):
        return t[i.astype(np.int64)]

    got = table[ids]
    r = PrecisionRecipe(inputs=("fp32", "int32"), k=1)
    v = check(got, [table, ids], gather, r, multilinear=False, input_family="normal")
    assert v.status == "pass" and v.margin == 0.0
    bad = got.copy()
    bad[1] = table[6]
    assert check(bad, [table, ids], gather, r, multilinear=False, input_family="normal").status == "fail"
