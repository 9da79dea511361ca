"""Input families: seeded, in the requested storage dtype, with the property each one is for."""

from __future__ import annotations

import numpy as np
import pytest

from nkieval.numerics import FAMILIES, generate, matmul_inputs
from nkieval.numerics.formats import FORMATS, representable
from nkieval.numerics.inputs import FREE_SIZES, K_SIZES, is_random_family, reduction_inputs


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp16", "fp8_e4m3", "fp8_e4m3fn", "fp8_e5m2"])
def test_seeded_and_in_dtype(family: str, dtype: str) -> None:
    x1 = generate(family, (8, 129), dtype, seed=5)
    x2 = generate(family, (8, 129), dtype, seed=5)
    x3 = generate(family, (8, 129), dtype, seed=6)
    assert x1.dtype == FORMATS[dtype].storage
    assert x1.tobytes() == x2.tobytes()
    if family != "constant":
        assert x1.tobytes() != x3.tobytes()
    fin = np.isfinite(x1.astype(np.float64))
    assert np.all(np.abs(x1.astype(np.float64)[fin]) <= FORMATS[dtype].max / 2)


def test_family_properties() -> None:
    a, b = matmul_inputs("cancellation", 16, 4096, 16, "fp32", seed=1)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ratio = np.median(np.abs(a64 @ b64) / (np.abs(a64) @ np.abs(b64)))
    an, bn = matmul_inputs("normal", 16, 4096, 16, "fp32", seed=1)
    ratio_n = np.median(np.abs(an.astype(np.float64) @ bn.astype(np.float64))
                        / (np.abs(an.astype(np.float64)) @ np.abs(bn.astype(np.float64))))
    assert ratio < ratio_n / 5  # |y| ≪ S
    assert np.all(b64.sum(axis=0) == 0)  # exactly zero-sum columns
    off = generate("offset", (4, 4096), "fp32", seed=1).astype(np.float64)
    assert np.all(off.mean(1) / off.std(1) > 500)
    ints = generate("integers", (64, 64), "bf16", seed=1).astype(np.float64)
    assert np.all(ints == np.round(ints)) and np.abs(ints).max() <= 2
    sp = generate("special", (16, 64), "fp32", seed=1)
    assert (~np.isfinite(sp)).sum() == 4  # one special in a quarter of the rows
    tiny = generate("tiny", (4096,), "bf16", seed=1).astype(np.float64)
    assert np.any((tiny != 0) & (np.abs(tiny) < FORMATS["bf16"].tiny))  # subnormals present
    big = matmul_inputs("large_magnitude", 4, 1024, 4, "fp32", seed=1)[0].astype(np.float64)
    assert np.abs(big).max() > 1e16
    ill = generate("ill_conditioned", (4096,), "fp32", seed=1).astype(np.float64)
    assert np.log2(np.abs(ill).max() / np.abs(ill).min()) > 30
    assert np.all(representable(generate("heavy_tailed", (256,), "fp16", seed=1), "fp16"))


def test_reduction_inputs_keep_sums_finite() -> None:
    x = reduction_inputs("large_magnitude", 4, 4096, "fp32", seed=1).astype(np.float64)
    assert np.all(np.abs(x).sum(1) < FORMATS["fp32"].max / 2)


def test_sizes_cross_tile_and_bank_boundaries() -> None:
    for edge in (128, 512):
        assert {edge - 1, edge, edge + 1} <= set(K_SIZES)
        assert {edge - 1, edge, edge + 1} <= set(FREE_SIZES)
    assert max(K_SIZES) == 16384


def test_random_flags() -> None:
    assert is_random_family("normal") and is_random_family("random")
    assert not is_random_family("integers") and not is_random_family("offset") and not is_random_family(None)
    assert not is_random_family("made_up")
    with pytest.raises(KeyError, match="unknown input family"):
        generate("made_up", 4)
