"""Beta-1 regressions found by running public `neuronxcc.nki` kernels through `nkieval compat`.

Our own minimal reproductions (no public code is copied here).
"""

import warnings

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np
import pytest

from nkieval.sim.errors import NkiValidationError

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


@pytest.mark.parametrize("axis,keepdims", [((1, 3), False), ((1, 3), True), ([3, 1], False), ((-3, -1), False),
                                           ((2,), False), ((2, 3), False)])
def test_isa_tensor_reduce_over_any_free_axes(axis, keepdims):
    """nisa.tensor_reduce reduces free axes that are not the trailing ones, as Beta 1's nl reductions do: the max of
    a pooling window, [P, 2, W, 2] over (1, 3) (a course's fused conv2d-maxpool kernel on the 2025 toolchain)."""
    def kern(x):
        t = nl.load(x)
        r = nisa.tensor_reduce(nl.max, t, axis=axis, keepdims=keepdims)
        out = nl.ndarray(r.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, r)
        return out

    x = RNG.standard_normal((128, 2, 6, 2), dtype=np.float32)
    ax = tuple(sorted(a % 4 for a in axis))
    want = x.max(axis=ax, keepdims=keepdims)
    got = nki.jit(kern, mode="simulation")(x)
    np.testing.assert_array_equal(got.reshape(want.shape), want)
    assert got.shape == (want.shape if keepdims or want.ndim >= 2 else (*want.shape, 1))


def test_isa_tensor_reduce_still_refuses_the_partition_axis():
    def kern(x):
        t = nl.load(x)
        r = nisa.tensor_reduce(nl.add, t, axis=(0, 2))
        out = nl.ndarray(r.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, r)
        return out

    with pytest.raises(NkiValidationError, match="partition dimension"):
        nki.jit(kern, mode="simulation")(RNG.standard_normal((128, 2, 6), dtype=np.float32))


@pytest.mark.parametrize("bias_shape", [(128, 1), (128, 1, 1)])
def test_isa_tensor_tensor_broadcasts_a_per_partition_operand_over_every_free_dim(bias_shape):
    """nisa.tensor_tensor of a [P, H, W] tile and a [P, 1] bias: the bias's one element per partition goes to every
    free element (Beta 1's docs point to tensor_scalar as the faster form of that broadcast; course kernels add a
    conv bias this way)."""
    def kern(x, b):
        t, bb = nl.load(x), nl.load(b)
        r = nisa.tensor_tensor(t, bb, op=nl.add)
        out = nl.ndarray(r.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, r)
        return out

    x = RNG.standard_normal((128, 5, 7), dtype=np.float32)
    b = RNG.standard_normal(bias_shape, dtype=np.float32)
    got = nki.jit(kern, mode="simulation")(x, b)
    np.testing.assert_array_equal(got, x + b.reshape(128, 1, 1))


def test_isa_tensor_tensor_refuses_free_dims_that_do_not_broadcast():
    def kern(x, y):
        r = nisa.tensor_tensor(nl.load(x), nl.load(y), op=nl.add)
        out = nl.ndarray(r.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, r)
        return out

    with pytest.raises(NkiValidationError, match="do not broadcast"):
        nki.jit(kern, mode="simulation")(np.ones((128, 5, 7), np.float32), np.ones((128, 3), np.float32))


def test_masked_load_of_a_slice_past_the_end_with_trailing_dims_not_indexed():
    """x[b, :, 8:12] of a [2, 128, 10, 16] x (the last dim not indexed) runs two rows past the end; the mask keeps
    the rows inside, as a course's row-chunked conv2d loads its last chunk."""
    def kern(x):
        out = nl.ndarray((128, 4, 16), dtype=x.dtype, buffer=nl.shared_hbm)
        rows = 8 + nl.arange(4)[None, :, None]
        t = nl.zeros((128, 4, 16), dtype=x.dtype, buffer=nl.sbuf)
        t[:, :, :] = nl.load(x[1, :, 8:12], mask=(rows < 10))
        nl.store(out, t)
        return out

    x = RNG.standard_normal((2, 128, 10, 16), dtype=np.float32)
    want = np.zeros((128, 4, 16), np.float32)
    want[:, :2] = x[1, :, 8:10]
    np.testing.assert_array_equal(nki.jit(kern, mode="simulation")(x), want)


def _block_reduce(x, op):
    """Per outer block i, the reduction over k of x[i, k] into entry i of a fresh (never written) SBUF block
    tensor, as the compiler's own Beta-1 output reduces: no initialisation before the loop."""
    nb, nk, p, f = x.shape
    out = nl.ndarray((nb, p, f), dtype=x.dtype, buffer=nl.shared_hbm)
    acc = nl.ndarray((nb, nl.par_dim(p), f), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(nb):
        for k in nl.affine_range(nk):
            acc[i, nl.arange(p)[:, None], nl.arange(f)[None, :]] = nl.loop_reduce(
                nl.load(x[i, k]), op=op, loop_indices=[k], dtype=nl.float32)
        nl.store(out[i], acc[i])
    return out


@pytest.mark.parametrize(("op", "ref"), [(np.max, np.max), (np.add, np.sum)])
def test_loop_reduce_into_a_never_written_destination_starts_the_reduction(op, ref):
    """Into elements nothing wrote, the reduction starts with the first value (not garbage, not zero: the data
    are all negative, so max(0, ...) or NaN would both show); each block entry starts on its own, also after the
    tensor's other entries were written."""
    x = -1.0 - RNG.random((3, 4, 128, 32), dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (no read before a write is reported either)
        got = nki.jit(lambda t: _block_reduce(t, op), mode="simulation")(x)
    np.testing.assert_allclose(got, ref(x, axis=1), rtol=1e-6)


def _zeros_then_max(x):
    out = nl.ndarray((128, 32), dtype=x.dtype, buffer=nl.shared_hbm)
    acc = nl.zeros((nl.par_dim(128), 32), dtype=nl.float32, buffer=nl.sbuf)
    for k in nl.affine_range(x.shape[0]):
        acc[...] = nl.loop_reduce(nl.load(x[k]), op=np.max, loop_indices=[k])
    nl.store(out, acc)
    return out


def test_loop_reduce_into_a_written_destination_reduces_into_its_values():
    """The documented form: a destination written first (``nl.zeros``) is the right-hand input from the start."""
    x = -1.0 - RNG.random((3, 128, 32), dtype=np.float32)
    got = nki.jit(_zeros_then_max, mode="simulation")(x)
    np.testing.assert_array_equal(got, np.zeros((128, 32), np.float32))


def test_loop_reduce_start_is_recorded_without_values():
    """The start is decided by which elements instructions wrote, not by values: a program recorded over shapes
    alone replays to the eager result, instruction for instruction."""
    from nkieval.sim.program import ArgSpec, Program, record_program, replay_program
    from nkieval.sim.runner import run_kernel

    def kern(x):
        return _block_reduce(x, np.max)

    x = -1.0 - RNG.random((2, 3, 128, 16), dtype=np.float32)
    eager = run_kernel(kern, [x.copy()], {}, target="trn2")
    rec = record_program(kern, [ArgSpec(x.shape, "float32")], {}, target="trn2")
    replay = replay_program(Program.from_json(rec.program.to_json()), [x.copy()], {}, target="trn2")
    np.testing.assert_array_equal(replay.outputs, eager.outputs)
    np.testing.assert_allclose(replay.outputs, x.max(axis=1), rtol=1e-6)
    assert [r.opcode for r in eager.trace.records] == [r.opcode for r in replay.trace.records]
