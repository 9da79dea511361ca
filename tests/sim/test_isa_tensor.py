"""Tensor-engine instructions (nc_matmul, nc_transpose) against NumPy expectations."""

import ml_dtypes
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from isa_testlib import BF16, last_trace, psum, rand, sbuf, simulate

K, M, N = 128, 96, 200
LHS = rand((K, M), 1).astype(BF16)
RHS = rand((K, N), 2).astype(BF16)


def _ref(a, b):
    return a.astype(np.float32).T @ b.astype(np.float32)


@pytest.mark.parametrize("target", ["trn1", "trn2", "trn3"])
def test_matmul_bf16_fp32_psum(target):
    def body(a, b):
        acc = psum((M, N))
        nisa.nc_matmul(dst=acc, stationary=a, moving=b)
        return acc
    np.testing.assert_allclose(simulate(body, LHS, RHS, target=target), _ref(LHS, RHS), rtol=1e-5, atol=1e-5)


ACCUMULATE = [
    ("none_auto", [None, None, None], lambda p: p[0] + p[1] + p[2]),
    ("explicit", [False, True, True], lambda p: p[0] + p[1] + p[2]),
    ("restart", [False, True, False], lambda p: p[2]),
]


@pytest.mark.parametrize("name,flags,ref", ACCUMULATE, ids=[a[0] for a in ACCUMULATE])
def test_matmul_accumulate_semantics(name, flags, ref):
    parts_a = [rand((K, M), 10 + i).astype(BF16) for i in range(3)]
    parts_b = [rand((K, N), 20 + i).astype(BF16) for i in range(3)]

    def body(*tiles):
        acc = psum((M, N))
        for i, flag in enumerate(flags):
            nisa.nc_matmul(dst=acc, stationary=tiles[i], moving=tiles[3 + i], accumulate=flag)
        return acc
    out = simulate(body, *parts_a, *parts_b)
    np.testing.assert_allclose(out, ref([_ref(a, b) for a, b in zip(parts_a, parts_b)]), rtol=1e-5, atol=1e-4)
    recs = [r for r in last_trace().records if r.opcode == "nc_matmul"]
    assert [r.attrs["accumulated"] for r in recs] == [False, bool(flags[1] is not False), flags[2] is not False]


def test_matmul_fp32_and_tile_position():
    a = rand((64, 64), 3)
    b = rand((64, 128), 4)

    def body(x, y):
        acc = psum((64, 128))
        nisa.nc_matmul(dst=acc, stationary=x, moving=y, tile_position=(64, 0), tile_size=(64, 64))
        return acc
    np.testing.assert_allclose(simulate(body, a, b), a.T @ b, rtol=1e-5, atol=1e-5)
    assert last_trace().records[-3].attrs["tile_size"] == [64, 64]


def test_matmul_double_row_fp8():
    a = rand((128, 2, 16), 5).astype(ml_dtypes.float8_e4m3)
    b = rand((128, 2, 64), 6).astype(ml_dtypes.float8_e4m3)

    def body(x, y):
        acc = psum((16, 64))
        nisa.nc_matmul(dst=acc, stationary=x, moving=y, perf_mode=nisa.matmul_perf_mode.double_row)
        return acc
    out = simulate(body, a, b)
    ref = a.astype(np.float32).transpose(1, 0, 2).reshape(256, 16).T @ \
        b.astype(np.float32).transpose(1, 0, 2).reshape(256, 64)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-4)


def test_matmul_trn3_wide_moving_and_bf16_psum():
    a = rand((128, 32), 7).astype(BF16)
    b = rand((128, 2048), 8).astype(BF16)

    def body(x, y):
        acc = psum((32, 2048), nl.bfloat16)
        nisa.nc_matmul(dst=acc, stationary=x, moving=y)
        return acc
    np.testing.assert_array_equal(simulate(body, a, b, target="trn3"), _ref(a, b).astype(BF16))


@pytest.mark.parametrize("engine", [nisa.engine.tensor, nisa.engine.vector])
def test_nc_transpose_engines(engine):
    n = 128 if engine == nisa.engine.tensor else 32
    x = rand((n, n // 2), 9).astype(BF16)

    def body(t):
        d = psum((n // 2, n), nl.bfloat16) if engine == nisa.engine.tensor else sbuf((n // 2, n), nl.bfloat16)
        nisa.nc_transpose(dst=d, data=t, engine=engine)
        return d
    np.testing.assert_array_equal(simulate(body, x), x.T)
    assert last_trace().records[-2 if engine == nisa.engine.vector else -3].engine == engine.name


@pytest.mark.parametrize("target,keeps_inf", [("trn1", False), ("trn2", True)])
def test_tensor_transpose_inf_bit_accurate_from_v3(target, keeps_inf):
    x = np.ones((4, 4), np.float32)
    x[1, 2] = np.inf

    def body(t):
        d = psum((4, 4))
        nisa.nc_transpose(dst=d, data=t)
        return d
    out = simulate(body, x, target=target)
    assert np.isinf(out[2, 1]) == keeps_inf


def test_matmul_is_transpose_mode_bit_accurate():
    x = rand((32, 16), 10).astype(BF16)
    x[0, 0] = np.nan
    eye = np.eye(32, dtype=BF16)

    def body(t, i):
        d = psum((16, 32), nl.bfloat16)
        nisa.nc_matmul(dst=d, stationary=t, moving=i, is_transpose=True)
        return d
    out = simulate(body, x, eye)
    np.testing.assert_array_equal(out.view(np.uint16), x.T.view(np.uint16))
