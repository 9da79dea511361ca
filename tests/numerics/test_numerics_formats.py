"""Format table and roundings: facts agree with ml_dtypes/NumPy, roundings are single RNE."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from nkieval.numerics.formats import (
    FORMATS,
    UnknownDtypeError,
    format_of,
    get_format,
    next_toward,
    representable,
    round_mantissa,
    round_stochastic,
    round_to,
    ulp_key,
)

FLOATS_WITH_STORAGE = [n for n, f in FORMATS.items() if f.kind == "float" and n != "tf32"]


@pytest.mark.parametrize("name", FLOATS_WITH_STORAGE)
def test_float_facts_match_finfo(name: str) -> None:
    f = FORMATS[name]
    fi = ml_dtypes.finfo(f.storage) if f.storage.name not in ("float16", "float32", "float64") else np.finfo(f.storage)
    assert f.u == float(fi.eps) / 2, "u is half the machine epsilon"
    assert f.max == float(fi.max)
    assert f.tiny == float(fi.tiny)
    assert f.subnormal == float(fi.smallest_subnormal)
    assert f.has_inf == bool(np.isinf(np.array(np.inf).astype(f.storage)))


def test_aliases_and_unknown_names() -> None:
    assert get_format("bfloat16") is FORMATS["bf16"]
    assert get_format(np.float16) is FORMATS["fp16"]
    assert get_format(ml_dtypes.float8_e4m3fn) is FORMATS["fp8_e4m3fn"]
    assert format_of(np.zeros(2, ml_dtypes.float8_e5m2)).name == "fp8_e5m2"
    with pytest.raises(UnknownDtypeError, match="did you mean 'bf16'"):
        get_format("bf61")
    with pytest.raises(UnknownDtypeError, match="unknown dtype"):
        get_format("quux")


def test_round_mantissa_tf32_rne_ties_and_truncation() -> None:
    x = np.array([1 + 2.0**-11, 1 + 3 * 2.0**-11, 1 + 2.0**-11 + 2.0**-20, -(1 + 3 * 2.0**-11)], np.float32)
    assert round_mantissa(x, 10).tolist() == [1.0, 1 + 2.0**-9, 1 + 2.0**-10, -(1 + 2.0**-9)]
    assert round_mantissa(x, 10, "truncate").tolist() == [1.0, 1 + 2.0**-10, 1.0, -(1 + 2.0**-10)]
    big = np.array([np.finfo(np.float32).max, np.inf, np.nan], np.float32)
    r = round_mantissa(big, 10)
    assert np.isinf(r[0]) and np.isinf(r[1]) and np.isnan(r[2])


def test_round_to_is_a_single_rounding() -> None:
    # through float32 first, 1 + 2^-11 + 2^-40 would tie and round to 1.0 (double rounding)
    assert round_to(1 + 2.0**-11 + 2.0**-40, "tf32") == 1 + 2.0**-10
    assert round_to(1 + 2.0**-8 + 2.0**-30, "bf16") == 1 + 2.0**-7
    assert round_to(1 + 2.0**-8, "bf16") == 1.0  # tie to even
    assert np.isinf(round_to(1e6, "fp8_e4m3")) and np.isnan(round_to(1e6, "fp8_e4m3fn"))
    assert round_to(1e6, "fp8_e4m3fn", overflow="saturate") == 448.0
    assert round_to(2.5, "int8") == 2.0 and round_to(1e9, "int8") == 127.0


def test_representable_and_neighbours() -> None:
    assert representable(np.array([1.0, 1 + 2.0**-7, 1 + 2.0**-9]), "bf16").tolist() == [True, True, False]
    for name in ("bf16", "fp16", "fp8_e4m3", "fp8_e4m3fn", "fp8_e5m2", "tf32"):
        r = round_to(np.array([1.0, -3.0, 0.0]), name)
        up = next_toward(r, name, +1)
        down = next_toward(r, name, -1)
        assert np.all(up > r) and np.all(down < r), name
        assert np.all(representable(up, name)) and np.all(representable(down, name)), name


@pytest.mark.parametrize("name", ["bf16", "fp16", "fp8_e4m3fn", "fp8_e5m2", "tf32", "fp32"])
def test_ulp_key_is_monotone_with_unit_steps(name: str) -> None:
    v = np.array([-2.0, -1.0, -0.0, 0.0, 1.0, 2.0])
    r = round_to(v, name)
    k = ulp_key(r, name)
    assert np.all(np.diff(k) >= 0) and k[2] == k[3] == 0
    nxt = next_toward(np.array([1.0]), name, +1)
    assert int(ulp_key(nxt, name)[0] - ulp_key(np.array([1.0]), name)[0]) == 1


def test_stochastic_rounding_neighbours_and_mean() -> None:
    rng = np.random.default_rng(0)
    x = np.full(20000, 1 + 0.3 * 2.0**-7)
    r = round_stochastic(x, "bf16", rng)
    assert set(np.unique(r)) == {1.0, 1 + 2.0**-7}
    assert abs(np.mean(r) - x[0]) < 4 * 2.0**-7 / np.sqrt(x.size)
