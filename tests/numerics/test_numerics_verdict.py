"""Verdict records: JSON round trip, explanation and mismatch message content."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from nkieval.numerics import PrecisionRecipe, Verdict, check, emulate_matmul, matmul_inputs


def _verdicts() -> dict[str, Verdict]:
    a, b = matmul_inputs("normal", 8, 512, 16, "bf16", seed=1)
    r = PrecisionRecipe(inputs="bf16", output="bf16", accumulation="psum_fp32_k128", name="case")
    good = emulate_matmul(a, b, order="chunked", out="bf16")
    bad = emulate_matmul(a, b, order="sequential", acc="bf16", out="bf16")
    nan = good.copy()
    nan[1, 2] = np.nan
    return {
        "pass": check(good, [a, b], "matmul", r, input_family="normal"),
        "fail": check(bad, [a, b], "matmul", r, input_family="normal"),
        "nan": check(nan, [a, b], "matmul", r, input_family="normal"),
        "inconclusive": check(np.zeros((4, 4)), [np.zeros((4, 8)), np.zeros((8, 4))], "matmul", input_family="normal"),
    }


@pytest.fixture(scope="module")
def verdicts() -> dict[str, Verdict]:
    return _verdicts()


@pytest.mark.parametrize("kind", ["pass", "fail", "nan", "inconclusive"])
def test_json_round_trip(verdicts: dict[str, Verdict], kind: str) -> None:
    v = verdicts[kind]
    assert v.status == ("fail" if kind == "nan" else kind)
    text = v.to_json()  # strict JSON: no NaN/Infinity literals
    back = Verdict.from_json(text)
    assert back.to_dict() == v.to_dict()
    assert back.recipe == v.recipe
    assert json.loads(text)["recipe"]["inputs"] == ["bf16"] or kind == "inconclusive"
    if kind == "nan":
        assert math.isinf(back.margin) and back.worst[0].index == (1, 2)


def test_pass_explanation_quotes_the_numbers(verdicts: dict[str, Verdict]) -> None:
    v = verdicts["pass"]
    assert v.explanation.startswith("matmul [bf16 → fp32 acc (psum_fp32_k128) → bf16, RNE], K = 512")
    assert "PASS." in v.explanation and "probabilistic bound (λ = 8)" in v.explanation
    assert v.headroom > 0 and v.deciding_gate in ("G2", "G3", "G5")
    assert str(v) == v.explanation


def test_fail_explanation_names_gate_worst_element_and_cause(verdicts: dict[str, Verdict]) -> None:
    v = verdicts["fail"]
    assert v.explanation.split(". ")[1].startswith("FAIL (G")
    w = v.worst[0]
    assert w.ratio > 1 and w.error == pytest.approx(abs(w.got - w.expected))
    assert f"got {w.got:.6g}" in v.explanation
    assert "Likely cause: bf16 accumulation instead of fp32" in v.explanation
    assert v.gate(v.deciding_gate).status == "fail"


def test_mismatch_message_has_torch_testing_shape(verdicts: dict[str, Verdict]) -> None:
    msg = verdicts["fail"].message()
    lines = msg.splitlines()
    assert lines[0].startswith("Outputs are not within the numerics standard! (gate G")
    m = verdicts["fail"].metrics
    assert lines[1] == f"Mismatched elements: {m.mismatch_count} / 128 ({m.mismatch_percent:.3g}%)"
    assert "Greatest absolute difference:" in msg and "allowed)" in msg
    assert "Greatest relative difference:" in msg


def test_metrics_are_consistent(verdicts: dict[str, Verdict]) -> None:
    m = verdicts["pass"].metrics
    assert m.n_elements == m.n_compared == 128 and m.mismatch_count == 0
    assert sum(m.ulp_histogram.values()) == 128 and m.max_ulp <= 1
    assert 0 <= m.cr_rate <= 1 and m.rel_l2 < 2.0**-8
    assert not math.isnan(m.z_p99) and m.z_p99 < 10
    assert verdicts["inconclusive"].deciding_gate == "G7"


def test_message_for_a_precision_failure_inside_the_bounds() -> None:
    a, b = matmul_inputs("normal", 8, 4096, 16, "fp32", seed=1)
    got = emulate_matmul(a, b, order="chunked", input_format="tf32", out="fp32")
    v = check(got, [a, b], "matmul", PrecisionRecipe(), input_family="normal")
    assert v.deciding_gate == "G5" and v.metrics.mismatch_count == 0
    msg = v.message()
    assert "(gate G5: consistency with the declared precision (z-score))" in msg.splitlines()[0]
    assert f"z > 10 (inconsistent with the declared precision): {v.metrics.z_over} / 128" in msg
    assert v.metrics.z_over > 100
