"""The core kernels in Beta-1 style pass against NumPy (issue 3 acceptance)."""

import b1_kernels as k
import ml_dtypes
import numpy as np
import pytest

RNG = np.random.default_rng(7)


def _close(got, want, rtol, atol=0.0):
    np.testing.assert_allclose(np.asarray(got, dtype=np.float32), np.asarray(want, dtype=np.float32), rtol=rtol,
                               atol=atol)


@pytest.mark.parametrize("n", [128, 300])
def test_tiled_add_ragged(n):
    a = RNG.standard_normal((n, 200), dtype=np.float32)
    b = RNG.standard_normal((n, 200), dtype=np.float32)
    _close(k.tiled_add(a, b), a + b, 0)


def test_softmax_ragged():
    x = (RNG.standard_normal((200, 96)) * 3).astype(np.float32)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    _close(k.softmax(x), e / e.sum(axis=1, keepdims=True), 1e-5, 1e-7)


def test_rmsnorm():
    x = RNG.standard_normal((250, 64), dtype=np.float32)
    g = RNG.standard_normal(64, dtype=np.float32)
    want = x / np.sqrt((x.astype(np.float64) ** 2).mean(axis=1, keepdims=True) + 1e-6) * g
    _close(k.rmsnorm(x, g), want, 2e-5, 1e-6)


def test_layernorm():
    x = RNG.standard_normal((130, 100), dtype=np.float32) * 2 + 1
    g = RNG.standard_normal(100, dtype=np.float32)
    b = RNG.standard_normal(100, dtype=np.float32)
    mu = x.mean(axis=1, keepdims=True)
    var = x.var(axis=1, keepdims=True)
    _close(k.layernorm(x, g, b), (x - mu) / np.sqrt(var + 1e-5) * g + b, 1e-4, 1e-5)


def test_matmul_tiled_accumulates_in_psum():
    a = RNG.standard_normal((256, 128)).astype(ml_dtypes.bfloat16)
    b = RNG.standard_normal((256, 1024)).astype(ml_dtypes.bfloat16)
    want = a.astype(np.float32).T @ b.astype(np.float32)
    _close(k.matmul_tiled(a, b), want, 1e-5, 1e-4)


def test_matmul_isa_block_tiles():
    a = RNG.standard_normal((384, 64), dtype=np.float32)
    b = RNG.standard_normal((384, 96), dtype=np.float32)
    _close(k.matmul_isa(a, b), a.T @ b, 1e-5, 1e-4)


def test_transpose():
    x = RNG.standard_normal((96, 40), dtype=np.float32)
    o1, o2 = k.transpose(x)
    _close(o1, x.T, 0)
    _close(o2, x.T, 0)


def test_causal_mask():
    s = RNG.standard_normal((128, 128), dtype=np.float32)
    want = np.where(np.tril(np.ones((128, 128), dtype=bool)), s, np.finfo(np.float32).min)
    _close(k.causal_mask(s), want, 0)


def test_spmd_grid():
    a = RNG.standard_normal((2 * 128, 3 * 256), dtype=np.float32)
    _close(k.spmd_scale[2, 3](a, 2.0), a * 2 + 3, 1e-6)
