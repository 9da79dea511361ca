"""Correctness's tolerance test with the reference's least allowance (``compare.allowance_floor``, kept with the
case's reference): the same result as without it and as the full checks, next to the allowance of the element
with the least one, with infinities and NaN on either side and empty outputs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from nkieval.review.compare import allowance_floor, compare_each, compare_outputs
from nkieval.sim.dtypes import to_dtype
from nkieval.tasks.schema import TensorSpec

TOLS = ((1e-5, 1e-6), (1e-2, 1e-3), (0.0, 1e-4), (3e-3, 0.0), (0.0, 0.0))


def _same(*results: object) -> bool:
    """Equal results (NaN fields, e.g. a NaN reference's, compare equal as text)."""
    return len({json.dumps(x, sort_keys=True) for x in results}) == 1


def _all_ways(g: np.ndarray, r: np.ndarray, dtype: str, rtol: float, atol: float) -> list:
    spec = (TensorSpec("out", tuple(g.shape), dtype),)
    written = [np.zeros(g.shape, bool)]
    return [compare_outputs([g], [r], spec, rtol, atol, written, [allowance_floor(r, rtol, atol)]),
            compare_outputs([g], [r], spec, rtol, atol, written),  # the short path without the floor
            compare_outputs([g], [r], spec, rtol, atol, None)]  # the full checks


def test_the_floor_is_the_least_allowance_rounded_as_each_element_s() -> None:
    rng = np.random.default_rng(3)
    for st in (*(to_dtype(d).storage for d in ("float32", "bfloat16", "int32")), np.dtype(np.float64)):
        for _ in range(20):
            r = (rng.standard_normal(int(rng.integers(1, 400))) * 10 ** rng.uniform(-3, 3)).astype(st)
            for rtol, atol in TOLS:
                allowed = np.abs(r, dtype=np.float64)
                allowed *= rtol
                allowed += atol
                assert allowance_floor(r, rtol, atol) == allowed.min()
    assert allowance_floor(np.zeros(0, np.float32), 1e-3, 1e-3) is None
    assert allowance_floor(np.ones(4, np.float32), -1e-3, 1.0) is None  # (no longer monotone in |r|)
    assert allowance_floor(np.array([np.nan, 1.0]), 1e-3, 1e-3) is None
    assert allowance_floor(np.array([np.inf]), 1e-3, 1e-3) is None


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "int32"])
def test_errors_next_to_the_least_allowance_are_judged_as_by_the_full_checks(dtype: str) -> None:
    """The element of least ``|r|`` (hence least allowance) gets an error at, just under and just over its
    allowance; a floor one rounding too generous, or taken as ``<`` the wrong way, passes an output the full
    checks fail."""
    rng = np.random.default_rng(4)
    st = to_dtype(dtype).storage
    for trial in range(60):
        r = (rng.standard_normal((12, 20)) * 100).astype(st)
        rtol, atol = TOLS[trial % len(TOLS)]
        k = np.unravel_index(int(np.argmin(np.abs(r, dtype=np.float64))), r.shape)
        g = r.copy()
        # every other element well within its allowance (or exact where the output is exact)
        if dtype != "int32":
            g = (r.astype(np.float64) * (1 + rng.uniform(-1, 1, r.shape) * rtol * 0.1)).astype(st)
        limit = abs(float(r[k])) * rtol + atol
        for step in (-2, -1, 0, 1, 2, 50):
            target = float(r[k]) + np.nextafter(limit, np.inf if step > 0 else 0.0) * (1 + step * 1e-3)
            g2 = g.copy()
            g2[k] = np.asarray(target).astype(st)
            ways = _all_ways(g2, r, dtype, rtol, atol)
            assert ways[0] == ways[1] == ways[2], (trial, step, rtol, atol, ways)


def test_non_finite_values_and_empty_outputs() -> None:
    spec32 = "float32"
    r = np.linspace(-3, 3, 64, dtype=np.float32).reshape(8, 8)
    for where, value in (((1, 2), np.nan), ((0, 0), np.inf), ((7, 7), -np.inf)):
        # (with a NaN the full checks without the written-elements mask say "unwritten": compared with the mask)
        g = r.copy()
        g[where] = value
        ways = _all_ways(g, r, spec32, 1e-3, 1e-3)
        assert ways[0] == ways[1] and ways[0] is not None and ways[0]["kind"] == "nonfinite"
        rr = r.copy()
        rr[where] = value  # a non-finite reference: never within the short path
        ways = _all_ways(r, rr, spec32, 1e-3, 1e-3)
        assert _same(ways[0], ways[1]) and ways[0] is not None and ways[0]["kind"] == "mismatch"
        ways = _all_ways(rr.copy(), rr, spec32, 1e-3, 1e-3)  # the same non-finite value on both sides
        assert _same(*ways)
    big = np.array([6e4, -6e4], np.float16), np.array([-6e4, 6e4], np.float16)  # over float16's range
    ways = _all_ways(big[0], big[1], "float16", 1e-3, 1e-3)
    assert ways[0] == ways[1] == ways[2] and ways[0]["kind"] == "mismatch"
    empty = np.zeros((0, 4), np.float32)
    assert _all_ways(empty, empty, spec32, 1e-3, 1e-3) == [None, None, None]


def test_compare_each_passes_each_output_its_own_floor() -> None:
    """Two outputs of different magnitudes: the first's floor must not be used for the second."""
    rng = np.random.default_rng(5)
    specs = (TensorSpec("a", (50,), "float32"), TensorSpec("b", (50,), "float32"))
    ra = (rng.standard_normal(50) * 1000 + 5000).astype(np.float32)  # least allowance large
    rb = (rng.standard_normal(50) * 0.01).astype(np.float32)  # least allowance about atol
    gb = rb.copy()
    gb[np.argmin(np.abs(rb))] += np.float32(0.5)  # far over b's allowance, within a's floor
    floors = [allowance_floor(ra, 1e-3, 1e-4), allowance_floor(rb, 1e-3, 1e-4)]
    written = [np.zeros(50, bool), np.zeros(50, bool)]
    with_floors = compare_each([ra, gb], [ra, rb], specs, 1e-3, 1e-4, written, floors)
    assert with_floors == compare_each([ra, gb], [ra, rb], specs, 1e-3, 1e-4, None)
    assert with_floors[0] is not None and with_floors[0]["output"] == "b"
    assert [o["correct"] for o in with_floors[1]] == [True, False]
