"""Property tests: cast semantics against ml_dtypes / exact references, view arithmetic against NumPy."""

import math

import ml_dtypes
import nki
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nkieval.sim import dtypes as dt

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
f32 = st.floats(width=32, allow_nan=True, allow_infinity=True)
f32_arrays = st.lists(f32, min_size=1, max_size=40).map(lambda v: np.array(v, dtype=np.float32))

NARROW = [(dt.bfloat16, ml_dtypes.bfloat16), (dt.float16, np.float16), (dt.float8_e4m3, ml_dtypes.float8_e4m3),
          (dt.float8_e4m3fn, ml_dtypes.float8_e4m3fn), (dt.float8_e5m2, ml_dtypes.float8_e5m2)]


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    return bool(np.all((a32 == b32) | (np.isnan(a32) & np.isnan(b32))))


@pytest.mark.parametrize("nki_dt,ml", NARROW, ids=[n.name for n, _ in NARROW])
@FAST
@given(x=f32_arrays)
def test_float_cast_ieee_mode_matches_ml_dtypes(nki_dt, ml, x):
    with np.errstate(over="ignore", invalid="ignore"):
        assert _same(dt.cast(x, nki_dt, fp8_overflow="ieee"), x.astype(ml))


@pytest.mark.parametrize("nki_dt,ml", NARROW, ids=[n.name for n, _ in NARROW])
@FAST
@given(x=f32_arrays)
def test_float_cast_saturate_mode_clamps_overflow(nki_dt, ml, x):
    m = float(ml_dtypes.finfo(ml).max)
    got = dt.cast(x, nki_dt).astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        rne = x.astype(ml).astype(np.float32)
    finite_in = np.isfinite(x)
    # in range: exactly ml_dtypes' round-to-nearest-even; out of range: ±max, never inf/NaN
    assert np.all(np.isfinite(got[finite_in]))
    ok = np.where(np.isfinite(rne) & finite_in, got == rne, np.abs(got) == np.float32(m))
    assert np.all(ok[finite_in])
    assert np.all(np.isnan(got[np.isnan(x)]))


def _tf32_ref(v: float) -> float:
    m, e = math.frexp(v)  # v = m * 2**e, 0.5 <= |m| < 1: 11 significant bits kept
    return math.ldexp(round(m * 2**11), e - 11)  # Python round() is round-half-even


@FAST
@given(v=st.floats(width=32, allow_nan=False, allow_infinity=False).filter(lambda v: 2**-126 <= abs(v) < 3e38))
def test_tf32_rounds_to_nearest_even_10_bits(v):
    got = float(dt.cast(np.array([v], np.float32), dt.tfloat32)[0])
    assert got == _tf32_ref(v)
    assert (np.array([got], np.float32).view(np.uint32)[0] & 0x1FFF) == 0


INTS = [dt.int8, dt.uint8, dt.int16, dt.uint16, dt.int32, dt.uint32]


@pytest.mark.parametrize("nki_dt", INTS, ids=[d.name for d in INTS])
@FAST
@given(x=st.lists(st.floats(width=32, allow_nan=True, allow_infinity=True).map(float), min_size=1, max_size=30))
def test_float_to_int_rounds_half_even_and_saturates(nki_dt, x):
    info = np.iinfo(nki_dt.storage)
    got = dt.cast(np.array(x, np.float32), nki_dt)
    for v, g in zip(np.array(x, np.float32).tolist(), got.tolist(), strict=True):
        if math.isnan(v):
            assert g == 0
        elif math.isinf(v):
            assert g == (info.max if v > 0 else info.min)
        else:
            assert g == min(max(round(v), info.min), info.max)


@FAST
@given(k=st.integers(-1000, 1000))
def test_half_values_round_to_even(k):
    v = k + 0.5
    assert int(dt.cast(np.array([v]), dt.int32)[0]) == (k if k % 2 == 0 else k + 1)


# -- view arithmetic ------------------------------------------------------------------------------
def _views(array: np.ndarray, make):
    """Run ``make(tensor)`` inside a kernel on an HBM copy of ``array``; return the view's values."""
    def kernel(a):
        return np.array(make(a).data, copy=True)
    return nki.simulate(kernel, target="trn2")(array)


shapes = st.lists(st.integers(1, 6), min_size=2, max_size=4).map(tuple)


@st.composite
def sliced(draw):
    shape = draw(shapes)
    key = []
    for n in shape:
        kind = draw(st.sampled_from(["all", "slice", "int"]))
        if kind == "all":
            key.append(slice(None))
        elif kind == "int":
            key.append(draw(st.integers(0, n - 1)))
        else:
            lo = draw(st.integers(0, n - 1))
            hi = draw(st.integers(lo + 1, n))
            key.append(slice(lo, hi, draw(st.integers(1, 3))))
    return shape, tuple(key)


@FAST
@given(sk=sliced())
def test_hbm_slicing_matches_numpy(sk):
    shape, key = sk
    a = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
    np.testing.assert_array_equal(_views(a, lambda t: t[key]), a[key])


@FAST
@given(shape=shapes, data=st.data())
def test_permute_reshape_broadcast_match_numpy(shape, data):
    a = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
    perm = tuple(data.draw(st.permutations(range(len(shape)))))
    np.testing.assert_array_equal(_views(a, lambda t: t.permute(perm)), a.transpose(perm))
    flat_split = (math.prod(shape[:-1]), shape[-1])
    np.testing.assert_array_equal(_views(a, lambda t: t.reshape(flat_split)), a.reshape(flat_split))
    b = a[..., :1]
    n = data.draw(st.integers(1, 5))
    np.testing.assert_array_equal(_views(b, lambda t: t.broadcast(len(shape) - 1, n)),
                                  np.broadcast_to(b, (*shape[:-1], n)))


@FAST
@given(shape=shapes, data=st.data())
def test_ap_matches_as_strided(shape, data):
    a = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
    n = a.size
    pat = []
    for _ in range(data.draw(st.integers(1, 3))):
        pat.append([data.draw(st.integers(0, 4)), data.draw(st.integers(1, 4))])
    reach = sum(s * (c - 1) for s, c in pat)
    if reach >= n:
        return
    off = data.draw(st.integers(0, n - 1 - reach))
    ref = np.lib.stride_tricks.as_strided(a.reshape(-1)[off:], shape=[c for _, c in pat],
                                          strides=[s * 4 for s, _ in pat])
    np.testing.assert_array_equal(_views(a, lambda t: t.ap(pattern=pat, offset=off)), ref)


@FAST
@given(p=st.integers(1, 8), f=st.integers(2, 6), i=st.data())
def test_on_chip_integer_index_keeps_partition_dim(p, f, i):
    import nki.isa as nisa
    import nki.language as nl

    a = np.arange(p * f, dtype=np.float32).reshape(p, f)
    r = i.draw(st.integers(0, p - 1))

    def make(t):
        s = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=t)
        v = s[r]
        assert v.shape == (1, f)  # on-chip tensors stay >= 2-D; the partition int keeps size 1
        return v
    np.testing.assert_array_equal(_views(a, make), a[r:r + 1])
