"""The z statistic's quantile from kept values counted against the bin thresholds (``_Stream._fold_z_bins``,
``_kept_quantile_bin``) is the
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


def test_negative_values_are_counted_in_the_lowest_bin_and_a_nan_falls_back_to_binning() -> None:
    rng = np.random.default_rng(3)
    z = np.abs(rng.standard_normal(5000))
    z[7], z[9], z[11] = -0.0, -5.0, -np.inf  # (z is |s|: never negative; the definition bins them 0)
    s = _folded([z])
    for q in (0.0, 0.0002, 0.0004, 0.0006, 0.0008, *QS):
        assert s.z_quantile(q) == _by_definition([z], q), q
    assert s.z_kept and not s.z_binned  # (counted, not binned)
    z = np.abs(rng.standard_normal(5000))
    z[3] = np.nan  # (the log10 definition has no bin for NaN; the lookup bins it with infinity)
    s = _folded([z])
    assert not s.z_kept and s.z_binned
    z[3] = np.inf
    for q in QS:
        assert s.z_quantile(q) == _by_definition([z], q)


def test_the_quantile_is_counted_without_binning_on_typical_values() -> None:
    # what the counting is for: on z values as a kernel's errors give them, the sample's guess holds and no value
    # is binned (a guess that misses falls back to binning, exactly but at the old cost)
    rng = np.random.default_rng(4)
    for scale in (0.3, 1.0, 3.0, 30.0):
        blocks = [np.abs(rng.standard_normal(1 << 18)) * scale, np.abs(rng.standard_normal(37856)) * scale]
        s = _folded(blocks)
        for q in (0.5, 0.9, 0.99, 0.999, 1.0):
            assert s.z_quantile(q) == _by_definition(blocks, q)
        assert s.z_kept and not s.z_binned, scale


@pytest.mark.parametrize("first", [1e-2, 0.3, 3.0, 1e2])
def test_a_guess_too_low_or_too_high_is_caught_by_its_counts(monkeypatch, first: float) -> None:
    # every sampled value (every 384th of 3 x 8192, with 64 asked for) is ``first``: the guess is one bin up to
    # two decades (40 bins) below or above the quantile, inside the range searched by counting
    monkeypatch.setattr(stream, "_Z_SAMPLE", 64)
    rng = np.random.default_rng(6)
    blocks = [np.abs(rng.standard_normal(8192)) for _ in range(3)]
    for z in blocks:
        z[::384] = first
    for q in (0.5, 0.9):
        s = _folded(blocks)
        assert s.z_quantile(q) == _by_definition(blocks, q), q


def test_a_wrong_guess_falls_back_to_the_binned_answer(monkeypatch) -> None:
    # a sample of one value guesses one place for every quantile: most are wrong, each answer is still exact
    monkeypatch.setattr(stream, "_Z_SAMPLE", 1)
    rng = np.random.default_rng(5)
    blocks = [np.abs(rng.standard_cauchy(8192)) * 10.0 ** rng.uniform(-3, 5) for _ in range(3)]
    for q in QS:
        assert _folded(blocks).z_quantile(q) == _by_definition(blocks, q), q


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
