"""The GPU-vs-Trainium envelope per element, summarised per magnitude band (review/stages/differential.py)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from nkieval.review.stages.differential import _envelope

TASK = SimpleNamespace(outputs=[SimpleNamespace(name="y")])


def _fresh() -> dict[str, dict[str, object]]:
    return {"y": {"envelope": None, "observed": 0.0}}


def _attention_like() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Large outputs where GPU and port round alike (bitwise equal, both one fp32 step from the pivot) and small
    ones where they differ by one step: the causal_attention 'large' case in miniature."""
    rng = np.random.default_rng(0)
    big = (64 + 60 * rng.random(200)).astype(np.float32)
    small = (4 + 3 * rng.random(12)).astype(np.float32)
    gpu = np.concatenate([big, small])
    port = np.concatenate([big, np.nextafter(small, np.float32(np.inf))])
    pivot = np.concatenate([np.nextafter(big, np.float32(np.inf)).astype(np.float64) + 0.0,
                            small.astype(np.float64) + 0.4 * np.spacing(small).astype(np.float64)])
    return gpu, port, pivot


def test_bitwise_equal_large_outputs_do_not_inflate_the_envelope_of_the_small_ones() -> None:
    gpu, port, pivot = _attention_like()
    rec = _fresh()
    _envelope([gpu], [port], [[pivot]], rec, TASK)
    y = rec["y"]
    observed = float(np.spacing(np.float32(7.0)))
    assert 0 < y["observed"] <= observed
    # (the bound over every element: two fp32 steps at 64 and more, ~16x the largest difference)
    assert y["envelope_all"] > 10 * y["observed"]
    assert y["observed"] <= y["envelope"] <= 3 * y["observed"]
    assert "|GPU output| in [4, 8)" in y["envelope_scope"]
    differing = [b for b in y["envelope_bands"] if b["observed"] > 0]
    assert [b["exponent"] for b in differing] == [3]  # (4 <= |y| < 8)
    assert sum(b["elements"] for b in y["envelope_bands"]) == gpu.size
    # (each side's share over the differing magnitudes: X is 0.4 of a step above the GPU, the port one step above)
    step = float(np.spacing(np.float32(4.0)))
    assert y["envelope_gpu_error"] <= 0.41 * step < 0.59 * step <= y["envelope_port_error"] <= 0.61 * step
    assert y["envelope_gpu_error"] + y["envelope_port_error"] >= y["envelope"]


def test_an_output_that_never_differs_keeps_the_envelope_over_every_element() -> None:
    gpu, _port, pivot = _attention_like()
    rec = _fresh()
    _envelope([gpu], [gpu.copy()], [[pivot]], rec, TASK)
    assert rec["y"]["observed"] == 0
    assert rec["y"]["envelope"] == max(b["envelope"] for b in rec["y"]["envelope_bands"]) > 0
    assert rec["y"]["envelope_scope"] is None


def test_cases_fold_into_the_same_bands() -> None:
    gpu, port, pivot = _attention_like()
    rec = _fresh()
    _envelope([gpu[:200]], [port[:200]], [[pivot[:200]]], rec, TASK)  # (the large outputs alone: bitwise)
    assert rec["y"]["observed"] == 0
    _envelope([gpu], [port], [[pivot]], rec, TASK)
    assert rec["y"]["observed"] > 0 and rec["y"]["envelope"] <= 3 * rec["y"]["observed"]
    assert sum(b["elements"] for b in rec["y"]["envelope_bands"]) == 200 + gpu.size


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, 40), st.floats(-30, 30))
def test_the_envelope_is_never_below_the_observed_difference(seed: int, n: int, scale_exp: float) -> None:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n) * 2.0**scale_exp
    gpu = (x + rng.standard_normal(n) * 1e-6 * np.abs(x)).astype(np.float32)
    port = (x + rng.standard_normal(n) * 1e-6 * np.abs(x)).astype(np.float32)
    same = rng.random(n) < 0.5
    port[same] = gpu[same]  # (some elements bitwise equal)
    rec = _fresh()
    _envelope([gpu], [port], [[x], [x * (1 + 1e-7)]], rec, TASK)
    y = rec["y"]
    assert y["envelope"] >= y["observed"] == float(np.abs(gpu.astype(np.float64) - port).max())
    assert y["envelope_all"] >= y["envelope"] or y["observed"] == 0
