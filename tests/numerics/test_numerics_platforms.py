"""GPU and Trainium models, the disagreement envelope and the attribution table (§4.8)."""

from __future__ import annotations

import numpy as np
import pytest

from nkieval.numerics import (
    PRESETS,
    PrecisionRecipe,
    attribute_discrepancy,
    check,
    expected_disagreement_envelope,
    generate,
    gpu_matmul,
    matmul_inputs,
    trainium_matmul,
)
from nkieval.numerics.platforms import accumulate, emulate_sum, gpu_fast_expf


def test_aws_stochastic_rounding_example() -> None:
    """AWS rounding-modes page: fp16 1024 + 0.5 added 2048 times; RNE stays at 1024 (ties to
    even), SR reaches 2048 on average (research note §1.4 measured 2047.5 ± 23.4)."""
    terms = np.concatenate([[1024.0], np.full(2048, 0.5)])
    assert accumulate(terms, acc="fp16")[()] == 1024.0
    runs = emulate_sum(np.tile(terms, (200, 1)), acc="fp16", acc_rounding="sr", out=None, seed=1)  # 200 runs
    assert abs(runs.mean() - 2048) < 4 * 24 / np.sqrt(200)
    assert 10 < runs.std() < 40


def test_every_preset_is_a_valid_recipe_and_its_emulation_passes_it() -> None:
    for name, p in PRESETS.items():
        assert isinstance(p.recipe, PrecisionRecipe) and p.recipe.name == name
        if p.matmul is None:
            continue
        dt = p.recipe.inputs[0]
        a, b = matmul_inputs("normal", 4, 1024, 8, dt, seed=3)
        got = p.matmul(a, b, seed=1)
        v = check(got, [a, b], "matmul", p.recipe, input_family="normal")
        if p.recipe.structure.get("biased"):  # truncating FP8 accumulation: bound too loose to discriminate
            assert v.status == "inconclusive", (name, v.explanation)
        else:
            assert v.status == "pass", (name, v.explanation)


def test_envelope_contains_correct_gpu_and_trainium_results() -> None:
    a, b = matmul_inputs("normal", 16, 4096, 32, "bf16", seed=1)
    g = gpu_matmul(a, b, out="bf16")
    t = trainium_matmul(a, b, out="bf16")
    env = expected_disagreement_envelope("matmul", [a, b], "gpu_bf16", "trn2_bf16")
    assert env.contains(g, t)
    wide = expected_disagreement_envelope("matmul", [a, b], "gpu_bf16", "trn3_bf16_psum_rne")
    assert np.all(wide.tau_det >= env.tau_det) and np.median(wide.tau_prb) > 2 * np.median(env.tau_prb)
    assert "expected |A−B|" in env.summary()


def test_attribution_both_correct_means_nothing_to_fix() -> None:
    a, b = matmul_inputs("normal", 8, 2048, 16, "fp32", seed=1)
    rep = attribute_discrepancy(gpu_matmul(a, b, out="fp32"), trainium_matmul(a, b, out="fp32"), [a, b], "matmul",
                                "gpu_fp32_ieee", "trn2_fp32", input_family="normal")
    assert rep.causes == ["order_rounding"] and rep.envelope_ratio < 1
    assert "nothing to fix" in rep.explanation()


@pytest.mark.parametrize(
    ("case", "cause", "side"),
    [("tf32", "tf32", "GPU"), ("fp8_fast_accum", "fp8_fast_accum", "GPU"), ("bf16_psum", "bf16_psum", "Trainium"),
     ("fast_math", "fast_math", "GPU"), ("tile_edge", "tile_edge", "Trainium")],
)
def test_attribution_table_rows(case: str, cause: str, side: str) -> None:
    fam = "normal"
    if case == "tf32":
        a, b = matmul_inputs(fam, 8, 2048, 16, "fp32", seed=1)
        ins, op = [a, b], "matmul"
        out_a, out_b = gpu_matmul(a, b, precision="tf32", out="fp32"), trainium_matmul(a, b, out="fp32")
        ra, rb = "gpu_fp32_ieee", "trn2_fp32"
    elif case == "fp8_fast_accum":
        a, b = matmul_inputs(fam, 8, 2048, 16, "fp8_e4m3fn", seed=1)
        ins, op = [a, b], "matmul"
        out_a, out_b = gpu_matmul(a, b, fp8_fast_accum=True, out="fp32"), trainium_matmul(a, b, out="fp32")
        ra = rb = PrecisionRecipe(inputs="fp8_e4m3fn", output="fp32")
    elif case == "bf16_psum":
        a, b = matmul_inputs(fam, 8, 2048, 16, "bf16", seed=1)
        ins, op = [a, b], "matmul"
        out_a, out_b = gpu_matmul(a, b, out="bf16"), trainium_matmul(a, b, psum="bf16", out="bf16")
        ra, rb = "gpu_bf16", "trn2_bf16"
    elif case == "fast_math":
        x = (generate(fam, (4096,), "fp32", seed=3).astype(np.float64) * 20).astype(np.float32)
        ins, op = [x], "exp"
        out_a = gpu_fast_expf(x)
        out_b = np.exp(x.astype(np.float64)).astype(np.float32)
        ra = rb = PrecisionRecipe()
    else:  # a Trainium kernel that drops the last partial K tile
        a, b = matmul_inputs(fam, 8, 600, 16, "bf16", seed=1)
        ins, op = [a, b], "matmul"
        from nkieval.numerics import emulate_matmul

        out_a = gpu_matmul(a, b, out="fp32")
        out_b = emulate_matmul(a, b, order="chunked", drop_k=slice(512, None), out="fp32")
        ra = rb = PrecisionRecipe(inputs="bf16")
    with np.errstate(all="ignore"):
        rep = attribute_discrepancy(out_a, out_b, ins, op, ra, rb, input_family=fam)
    rows = [(r.id, s) for r, s, _ in rep.rows]
    assert (cause, side) in rows, (rows, rep.explanation())


def test_fast_expf_error_grows_with_abs_x_within_cuda_table() -> None:
    x = np.array([0.5, 1.0, 10.0, 40.0, 80.0], np.float32)
    y = np.exp(x.astype(np.float64))
    err_ulp = np.abs(gpu_fast_expf(x) - y) / (np.spacing(y.astype(np.float32)).astype(np.float64))
    assert np.all(err_ulp <= 2 + np.floor(1.173 * np.abs(x)) + 1)
    assert err_ulp[-1] > err_ulp[0]


def test_attribution_names_flush_to_zero_and_overflow_conventions() -> None:
    a = np.array([[2.0**-130, 2.0**-131]], np.float32)
    b = np.array([[1.0], [1.0]], np.float32)
    exact = (a.astype(np.float64) @ b).astype(np.float32)
    ftz = np.zeros((1, 1), np.float32)
    rep = attribute_discrepancy(exact, ftz, [a, b], "matmul", PrecisionRecipe(), PrecisionRecipe())
    assert ("ftz", "Trainium") in [(r.id, s) for r, s, _ in rep.rows]
    x = np.array([1.0, 300.0], np.float32)
    r = PrecisionRecipe(inputs=("fp32", "fp32"), output="fp8_e4m3")
    rep = attribute_discrepancy(np.array([1.0, 240.0]), np.array([1.0, np.nan]), [x, np.float32(1)], "quantize",
                                r.replace(platform="gpu"), r.replace(platform="trn2"))
    assert {"fp8_overflow"} <= set(rep.causes)
