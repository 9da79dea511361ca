"""Precision recipes: canonical dtypes, TOML round trip, clear errors."""

from __future__ import annotations

import tomllib

import pytest

from nkieval.numerics import PrecisionRecipe, RecipeError


def test_defaults_and_canonical_names() -> None:
    r = PrecisionRecipe(inputs=["bfloat16", "float8_e4m3fn"], accumulate="float32", output="half")
    assert r.inputs == ("bf16", "fp8_e4m3fn") and r.accumulate == "fp32" and r.output == "fp16"
    assert PrecisionRecipe(inputs="bf16").inputs == ("bf16",)
    assert r.input_format(5).name == "fp8_e4m3fn"  # the last entry repeats
    assert PrecisionRecipe().describe() == "fp32 → fp32 acc → fp32, RNE"


def test_toml_round_trip() -> None:
    text = """
    [numerics]
    inputs = ["bf16", "bf16"]
    accumulate = "fp32"
    output = "bf16"
    accumulation = "bf16_psum_sr"
    rounding = "sr"
    scales = [0.5, 2]
    transcendental = "scalar_engine"
    """
    r = PrecisionRecipe.from_dict(tomllib.loads(text)["numerics"])
    assert r.scales == (0.5, 2.0) and r.accumulation == "bf16_psum_sr"
    assert PrecisionRecipe.from_dict(r.to_dict()) == r
    assert "None" not in repr(r.to_dict())
    assert "bf16×bf16 → fp32 acc (bf16_psum_sr) → bf16, SR" in r.describe()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"output": "bf61"}, "did you mean 'bf16'"),
        ({"inputs": ["fp32", "fp9"]}, "unknown dtype 'fp9'"),
        ({"acumulate": "fp32"}, "did you mean 'accumulate'"),
        ({"accumulation": "psum_fp32_k129"}, "did you mean 'psum_fp32_k128'"),
        ({"rounding": "nearest"}, "rounding must be one of"),
        ({"k": 0}, "k must be a positive integer"),
        ({"lam": -1}, "lam must be positive"),
        ({"scales": [0.0]}, "finite and non-zero"),
        ({"transcendental": "fast"}, "unknown transcendental"),
        ({"platform": "tpu"}, "platform must be one of"),
    ],
)
def test_clear_errors(data: dict, message: str) -> None:
    with pytest.raises(RecipeError, match=message):
        PrecisionRecipe.from_dict(data)


def test_replace_revalidates() -> None:
    r = PrecisionRecipe()
    assert r.replace(output="bf16").output == "bf16"
    with pytest.raises(RecipeError):
        r.replace(output="nope")
