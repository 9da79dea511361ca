"""The judge's faster computations give what their definitions give, bit for bit: the differential check's
magnitude bands (review/stages/differential.py ``_fold_bands``: one sort instead of a pass per band) and the
numerics' z-histogram bins (numerics/stream.py ``_z_bins``: a table lookup instead of a log10)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from nkieval.numerics import stream
from nkieval.review.stages.differential import ZERO_BAND, _fold_bands


def _bands_by_definition(bands: dict, g: np.ndarray, env: np.ndarray, obs: np.ndarray, gpu_err: np.ndarray,
                         port_err: np.ndarray) -> None:
    """Band x: the elements with 2**(x-1) <= |g| < 2**x (ZERO_BAND: g == 0), a pass over them per band."""
    for x in sorted({ZERO_BAND if v == 0 else int(np.frexp(v)[1]) for v in g.tolist()}):
        sel = np.array([(ZERO_BAND if v == 0 else int(np.frexp(v)[1])) == x for v in g.tolist()])
        b = bands.setdefault(x, {"exponent": x, "elements": 0, "envelope": 0.0, "observed": 0.0, "gpu_error": 0.0,
                                 "port_error": 0.0})
        b["elements"] += int(sel.sum())
        for key, values in (("envelope", env), ("observed", obs), ("gpu_error", gpu_err), ("port_error", port_err)):
            b[key] = max(b[key], float(values[sel].max()))


_finite = st.one_of(st.just(0.0), st.floats(-1e30, 1e30, allow_subnormal=True), st.floats(-1e-300, 1e-300))
_nonneg = st.floats(0.0, 1e6)


@settings(max_examples=150, deadline=None)
@given(hnp.arrays(np.float64, st.integers(0, 60), elements=_finite), st.data())
def test_magnitude_bands_fold_as_their_definition(g: np.ndarray, data: st.DataObject) -> None:
    env, obs, ge, pe = (data.draw(hnp.arrays(np.float64, g.size, elements=_nonneg)) for _ in range(4))
    start = {3: {"exponent": 3, "elements": 5, "envelope": 0.5, "observed": 0.25, "gpu_error": 0.1, "port_error": 0.2}}
    got, want = {k: dict(v) for k, v in start.items()}, {k: dict(v) for k, v in start.items()}
    _fold_bands(got, g, env, obs, ge, pe)
    _bands_by_definition(want, g, env, obs, ge, pe)
    assert got == want


def test_z_bins_take_the_lookup_and_agree_with_log10_everywhere() -> None:
    assert stream._z_table() is not None  # (the lookup is in use on this machine)
    rng = np.random.default_rng(5)
    z = np.concatenate([np.abs(rng.standard_normal(50_000)) * 10.0 ** rng.uniform(-8, 9, 50_000),
                        np.abs(rng.standard_normal(10_000)), np.zeros(100), [np.inf, 5e-324, 1e-300, 1e308]])
    want = stream._z_bins_log10(z.copy())
    assert np.array_equal(stream._z_bins(z), want)
    work = z.copy()
    got = stream._z_bins(work, overwrite=True)
    assert np.shares_memory(got, work) and np.array_equal(got, want)
    # every bit pattern next to every bin's threshold, as the lookup's own check, from the outside
    edges = stream._z_thresholds()
    near = (edges.view(np.int64)[:, None] + np.arange(-3, 4)[None, :]).reshape(-1).view(np.float64)
    assert np.array_equal(stream._z_bins(near), stream._z_bins_log10(near.copy()))
    assert np.array_equal(stream._z_bins(near[::2]), stream._z_bins_log10(near[::2].copy()))  # (strided: log10)


def test_a_lookup_that_disagrees_with_log10_is_not_used(monkeypatch) -> None:
    """The table is checked against the log10 definition before use: a threshold off by one ulp is refused."""
    real = stream._z_thresholds

    def off_by_one() -> np.ndarray:
        t = real().copy()
        t[100] = np.nextafter(t[100], np.inf)
        return t

    stream._z_table.cache_clear()
    monkeypatch.setattr(stream, "_z_thresholds", off_by_one)
    try:
        assert stream._z_table() is None
        z = np.array([0.0, 1.0, 2.5, 1e9])
        assert np.array_equal(stream._z_bins(z), stream._z_bins_log10(z.copy()))
    finally:
        monkeypatch.undo()
        stream._z_table.cache_clear()
    assert stream._z_table() is not None
