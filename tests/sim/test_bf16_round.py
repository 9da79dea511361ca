"""``dtypes.f32_to_bf16`` rounds fp32 to bfloat16 bit for bit as ml_dtypes' ``astype`` does (round to nearest even,
overflow to inf, NaN to the signed quiet NaN), for any layout; and ``dtypes.cast`` / the instructions' stores use it.
(All 2**32 patterns were compared once, outside the test suite: docs/compat-public.md, eleventh pass.)"""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nkieval.sim import dtypes as dt

_BF16 = np.dtype(ml_dtypes.bfloat16)


def _reference(f: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return f.astype(_BF16).view(np.uint16)


def _bits(*patterns: int) -> np.ndarray:
    return np.array(patterns, dtype=np.uint32).view(np.float32)


# the edges of the rounding: ties to even either way, carries into the exponent, the largest finite values, inf,
# NaNs of both signs with payloads that a plain rounding would turn into inf or carry into the sign, denormals, zeros
EDGES = _bits(0x3F808000, 0x3F818000, 0x3F807FFF, 0x3F808001, 0x3FFF8000, 0x7F7F7FFF, 0x7F7F8000, 0x7F7FFFFF,
              0x7F800000, 0xFF800000, 0x7F800001, 0x7F807FFF, 0x7FBFFFFF, 0x7FC00000, 0x7FFFFFFF, 0xFF800001,
              0xFFFF8000, 0xFFFFFFFF, 0x00000001, 0x00008000, 0x00018000, 0x807FFFFF, 0x80000000, 0x00000000)


def test_edges_round_as_ml_dtypes():
    assert np.array_equal(dt.f32_to_bf16(EDGES).view(np.uint16), _reference(EDGES))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=64), st.sampled_from(["flat", "2d", "T", "step"]))
def test_any_patterns_in_any_layout_round_as_ml_dtypes(patterns, layout):
    f = np.array(patterns + patterns, dtype=np.uint32).view(np.float32)
    if layout == "2d":
        f = f.reshape(2, -1)
    elif layout == "T":
        f = f.reshape(2, -1).T
    elif layout == "step":
        f = f[::2]
    out = dt.f32_to_bf16(f)
    assert out.dtype == _BF16 and out.shape == f.shape
    assert np.array_equal(out.view(np.uint16), _reference(f))


def test_random_full_range_block():
    u = np.random.default_rng(7).integers(0, 2**32, size=(256, 512), dtype=np.uint64).astype(np.uint32)
    u[::17, ::5] |= 0x7F800000  # many infs and NaNs of both signs
    f = u.view(np.float32)
    assert np.array_equal(dt.f32_to_bf16(f).view(np.uint16), _reference(f))


@pytest.mark.parametrize("overflow", ["saturate", "ieee"])
@pytest.mark.parametrize("values", [EDGES.reshape(4, 6), np.float32(1.00390625), np.zeros((0, 3), np.float32),
                                    np.linspace(-4, 4, 96, dtype=np.float64).reshape(8, 12)])
def test_cast_to_bf16_is_unchanged(values, overflow, monkeypatch):
    """``dtypes.cast`` with the fast rounding gives what it gave with ``astype`` (its saturation, fp64 first rounded
    to fp32, 0-d and empty arrays included)."""
    got = dt.cast(values, dt.bfloat16, fp8_overflow=overflow)
    monkeypatch.setattr(dt, "f32_to_bf16", lambda f: f.astype(_BF16))
    expected = dt.cast(values, dt.bfloat16, fp8_overflow=overflow)
    assert got.dtype == _BF16 and got.shape == np.shape(values) == expected.shape
    assert np.array_equal(np.asarray(got).view(np.uint16), np.asarray(expected).view(np.uint16))


def test_a_kernel_store_to_bf16_rounds_as_ml_dtypes():
    from nkieval import frontends

    frontends.install()
    import nki
    import nki.isa as nisa
    import nki.language as nl

    def kernel(a, out):
        t = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        b = nl.ndarray(a.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.tensor_copy(dst=b, src=t)
        nisa.dma_copy(dst=out, src=b)

    a = np.resize(EDGES[np.isfinite(EDGES) & (np.abs(EDGES) < 3e38)], (4, 96)).astype(np.float32)  # (no saturation)
    a[1, ::7] = np.nan
    out = np.zeros(a.shape, _BF16)
    nki.simulate(kernel)(a, out)
    assert np.array_equal(out.view(np.uint16), _reference(a))
