"""The z statistic's quantile from kept values and their keys' histogram (``_Stream._fold_z_bins``) is the
quantile of the histogram of every value binned by the log10 definition (``_z_bins_log10``): on values at, and
within ulps of, every bin threshold, at the keys' ends, zeros and infinities, over many blocks, a small first
block and more values than a stream keeps."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nkieval.numerics import stream
from nkieval.numerics.recipe import PrecisionRecipe

QS = (0.0, 0.01, 0.5, 0.9, 0.99, 0.999, 1.0)


def _stream() -> stream._Stream:
    return stream._Stream(recipe=PrecisionRecipe(), statistical=False, out_shape=(1,), worst_k=1, has_ref=False)


def _by_definition(blocks: list[np.ndarray], q: float) -> float:
    """``z_quantile`` as it was: every value binned by the log10 definition, the histogram's quantile."""
    z = np.concatenate(blocks)
    hist = np.bincount(stream._z_bins_log10(z.copy()), minlength=len(stream._Z_EDGES))
    i = min(int(np.searchsorted(np.cumsum(hist), q * z.size)), len(stream._Z_EDGES) - 1)
    return float(stream._Z_EDGES[min(i + 1, len(stream._Z_EDGES) - 1)])


def _folded(blocks: list[np.ndarray]) -> stream._Stream:
    s = _stream()
    for z in blocks:
        s.z_n += z.size
        s._fold_z_bins(z.copy())
    return s


def _near_thresholds(ulps: int = 3) -> np.ndarray:
    edges = stream._z_thresholds()
    near = edges.view(np.int64)[:, None] + np.arange(-ulps, ulps + 1, dtype=np.int64)[None, :]
    return near.reshape(-1).view(np.float64)


def _check(blocks: list[np.ndarray], kept: bool | None = None) -> None:
    s = _folded(blocks)
    if kept is not None:
        assert bool(s.z_kept) is kept
    for q in QS:
        assert s.z_quantile(q) == _by_definition(blocks, q), q


def test_the_quantile_of_kept_values_is_the_binned_one_next_to_every_threshold() -> None:
    assert stream._z_table() is not None
    near = _near_thresholds()
    rng = np.random.default_rng(0)
    for _ in range(30):
        # blocks mostly next to thresholds, so that the quantile lands in a key that holds one, on both sides
        blocks = [np.sort(rng.choice(near, size=int(n)))[::-1].copy() for n in rng.integers(4096, 9000, size=3)]
        _check(blocks, kept=True)


def test_keys_without_a_threshold_zeros_infinities_and_one_value() -> None:
    lo = (np.arange(stream._Z_KEYS // 2, dtype=np.uint64) << stream._Z_KEY_SHIFT).view(np.float64)
    rng = np.random.default_rng(1)
    for extra in ([0.0] * 5000, [np.inf] * 5000, [1e-300] * 5000, [1e300] * 5000):
        _check([np.abs(np.concatenate([rng.choice(lo[:0x7FF1], 5000), extra]))], kept=True)
    _check([np.full(5000, 10.0)], kept=True)
    _check([np.zeros(1)], kept=False)  # (a small first block: binned as before)


def test_a_stream_past_what_it_keeps_or_starting_small_bins_everything_as_before(monkeypatch) -> None:
    rng = np.random.default_rng(2)
    monkeypatch.setattr(stream, "_Z_KEEP_MAX", 20_000)
    blocks = [np.abs(rng.standard_normal(8192)) * 3 for _ in range(4)]
    s = _folded(blocks)
    assert not s.z_kept and s.z_binned and int(s.z_hist.sum()) == 4 * 8192
    _check(blocks)
    _check([np.abs(rng.standard_normal(100)), np.abs(rng.standard_normal(8192))], kept=False)
    # a small last block after kept ones is kept too
    _check([np.abs(rng.standard_normal(8192)), np.abs(rng.standard_normal(7))], kept=True)


def test_a_negative_value_falls_back_to_binning() -> None:
    z = np.abs(np.random.default_rng(3).standard_normal(5000))
    z[7] = -0.0  # (z is |s|: never negative; the keys would not order it)
    s = _folded([z])
    assert s.z_quantile(0.0) == _by_definition([z], 0.0) and not s.z_kept and s.z_binned
    for q in QS:
        assert s.z_quantile(q) == _by_definition([z], q)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, (1 << 16) - 1), min_size=1, max_size=6), st.integers(0, 2**32 - 1),
       st.floats(0.0, 1.0))
def test_the_quantile_agrees_on_random_mixtures(sizes: list[int], seed: int, q: float) -> None:
    rng = np.random.default_rng(seed)
    near = _near_thresholds(8)
    blocks = []
    for n in sizes:
        n = max(n, 1)
        kind = rng.integers(3)
        if kind == 0:
            blocks.append(rng.choice(near, n))
        elif kind == 1:
            blocks.append(np.abs(rng.standard_normal(n)) * 10.0 ** rng.uniform(-6, 8))
        else:
            blocks.append(np.abs(rng.standard_cauchy(n)))
    s = _folded(blocks)
    assert s.z_quantile(q) == _by_definition(blocks, q)


@pytest.mark.parametrize("q", QS)
def test_asking_twice_gives_the_same(q: float) -> None:
    blocks = [_near_thresholds()[::3].copy()]
    s = _folded(blocks)
    assert s.z_quantile(q) == s.z_quantile(q) == _by_definition(blocks, q)


def test_a_quantile_on_the_last_value_below_a_threshold() -> None:
    # exactly x values below a threshold inside one key: the quantile is the bin below it, not the one above
    t = next(t for t in stream._z_thresholds()[1:]
             if (np.nextafter(t, 0).view(np.uint64) >> stream._Z_KEY_SHIFT) == (t.view(np.uint64) >> stream._Z_KEY_SHIFT))
    z = np.concatenate([np.full(4096, np.nextafter(t, 0)), np.full(4096, t)])
    _check([z], kept=True)
    assert _folded([z]).z_quantile(0.5) < _folded([z]).z_quantile(0.5 + 1 / 8192)
