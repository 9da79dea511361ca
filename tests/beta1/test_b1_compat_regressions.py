"""Beta-1 regressions found by running public `neuronxcc.nki` kernels through `nkieval compat`.

Our own minimal reproductions (no public code is copied here).
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

RNG = np.random.default_rng(11)


def _blocked_matmul(a, b):
    """out = a.T @ b with K split into outer blocks; the SBUF result is reduced over the outer K loop
    with nl.loop_reduce (each block's PSUM partial sum added into it)."""
    K, M = a.shape
    _, N = b.shape
    out = nl.ndarray((M, N), dtype=a.dtype, buffer=nl.shared_hbm)
    acc = nl.zeros((nl.par_dim(M), N), dtype=nl.float32, buffer=nl.sbuf)
    for kb in nl.affine_range(K // 256):
        part = nl.zeros((M, N), dtype=nl.float32, buffer=nl.psum)
        for k in nl.affine_range(2):
            lo = kb * 256 + k * 128
            part += nisa.nc_matmul(nl.load(a[lo:lo + 128, :]), nl.load(b[lo:lo + 128, :]))
        acc[...] = nl.loop_reduce(part, op=np.add, loop_indices=[kb], dtype=nl.float32)
    nl.store(out, acc)
    return out


def test_loop_reduce_accumulates_over_the_loop():
    a = RNG.standard_normal((768, 64), dtype=np.float32)
    b = RNG.standard_normal((768, 32), dtype=np.float32)
    got = nki.jit(_blocked_matmul, mode="simulation")(a, b)
    np.testing.assert_allclose(got, a.T @ b, rtol=1e-4, atol=1e-3)


def _running_max(x):
    out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    m = nl.full((128, 64), -np.inf, dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(x.shape[0] // 128):
        m[...] = nl.loop_reduce(nl.load(x[i * 128:(i + 1) * 128, :]), op=np.maximum, loop_indices=[i])
    nl.store(out, m)
    return out


def test_loop_reduce_with_max():
    x = RNG.standard_normal((512, 64), dtype=np.float32)
    got = nki.jit(_running_max, mode="simulation")(x)
    np.testing.assert_array_equal(got, x.reshape(4, 128, 64).max(axis=0))


def test_beta1_tile_truthiness_is_still_data_dependent_control_flow():
    import pytest

    from nkieval.sim.errors import NkiValidationError

    def kern(x):
        t = nl.load(x)
        if t > 0:
            pass

    with pytest.raises(NkiValidationError, match="control flow cannot depend on a tensor's value"):
        nki.jit(kern, mode="simulation")(np.ones((4, 4), np.float32))


def _masked_pool(x):
    """Max over the two window axes of a [P, H, K, W, K] view, rows masked to the valid height."""
    P, H, _, W, _ = x.shape
    out = nl.ndarray((P, H, W), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(P)[:, None, None]
    i_h = nl.arange(H)[None, :, None]
    i_w = nl.arange(W)[None, None, :]
    t = nl.load(x)
    m = nl.max(t, axis=[2, 4], mask=(nl.arange(P)[:, None, None, None, None] < 96))
    nl.store(out[i_p, i_h, i_w], m[i_p, i_h, i_w], mask=(i_p < 96))
    return out


def test_masked_max_over_non_trailing_axes():
    x = RNG.standard_normal((128, 4, 2, 3, 2), dtype=np.float32)
    got = nki.jit(_masked_pool, mode="simulation")(x)
    np.testing.assert_array_equal(got[:96], x.max(axis=(2, 4))[:96])
