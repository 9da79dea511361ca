"""Beta-1 features beyond the conformance table: all_reduce rendezvous errors, parameter mutability texts,
dynamic-offset bounds, direct-allocation aliasing and masked assignment."""

import neuronxcc.nki as nki
import neuronxcc.nki.compiler as ncc
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt
import numpy as np
import pytest

from nkieval.sim.errors import NkiValidationError

RNG = np.random.default_rng(11)


def test_all_reduce_needs_every_program_of_the_group():
    @nki.jit(mode="simulation")
    def kern(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        i = nl.program_id(0)
        t = nl.load(x[i])
        if i != 2:  # program 2 never joins
            t = nl.all_reduce(t, op=np.add, program_axes=0)
        nl.store(out[i], t)
        return out

    with pytest.raises(NkiValidationError, match=r"program \[2\] .* ended without calling this all_reduce"):
        kern[3](np.zeros((3, 4, 8), np.float32))


def test_all_reduce_groups_follow_the_other_grid_axes_and_inputs_are_untouched():
    @nki.jit(mode="simulation")
    def kern(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        i, j = nl.program_id(0), nl.program_id(1)
        r = nl.all_reduce(nl.load(x[i, j]), op=np.maximum, program_axes=(0,))
        nl.store(out[i, j], r)
        return out

    x = RNG.standard_normal((3, 2, 4, 8)).astype(np.float32)
    before = x.copy()
    np.testing.assert_array_equal(kern[3, 2](x), np.broadcast_to(x.max(0, keepdims=True), x.shape))
    np.testing.assert_array_equal(x, before)  # the sequential attempt wrote nothing back


def test_all_reduce_single_program_is_identity_with_dtype(monkeypatch):
    monkeypatch.setenv("NKI_PRECISE_FP", "1")  # bf16 held as bf16 (the Beta-1 default keeps fp32)

    @nki.jit(mode="simulation")
    def kern(x):
        out = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
        nl.store(out, nl.all_reduce(nl.load(x), op=np.add, program_axes=0, dtype=nl.bfloat16))
        return out

    x = RNG.standard_normal((4, 8)).astype(np.float32)
    np.testing.assert_array_equal(kern(x).astype(np.float32), x.astype(nl.bfloat16.storage).astype(np.float32))


def test_mutability_errors_use_the_documented_texts():
    def writes_input(a):
        nl.store(a, nl.load(a) + 1.0)
        return a

    def forgets_mutable(a: nt.mutable_tensor):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a))
        return out

    x = np.zeros((4, 8), np.float32)
    with pytest.raises(NkiValidationError, match="Cannot update immutable parameter 'a'"):
        nki.simulate_kernel(writes_input, x)
    assert not x.any()  # the refused write was not written back
    with pytest.raises(NkiValidationError, match="Mutable kernel parameter not returned by 'return' statement"):
        nki.simulate_kernel(forgets_mutable, x)


def test_dynamic_offset_out_of_bounds_is_reported():
    def kern(src, offs):
        s, o = nl.load(src), nl.load(offs)
        ix, iy = nl.mgrid[0:8, 0:4]
        out = nl.ndarray((8, 4), dtype=src.dtype, buffer=nl.shared_hbm)
        nl.store(out, nisa.tensor_copy_dynamic_src(s[ix, o[0, 0] + iy]))
        return out

    src = RNG.standard_normal((8, 16)).astype(np.float32)
    np.testing.assert_array_equal(nki.simulate_kernel(kern, src, np.array([[12]], np.int32)), src[:, 12:16])
    with pytest.raises(NkiValidationError, match=r"Out-of-bound access .* index range \[13, 16\]"):
        nki.simulate_kernel(kern, src, np.array([[13]], np.int32))


def test_direct_allocation_aliasing_is_visible_and_loop_safe():
    def kern(x):
        out = nl.ndarray((3, 8, 16), dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((3, nl.par_dim(8), 16), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
        for b in nl.affine_range(3):  # one physical tile for all blocks: each iteration writes then reads it
            t[b] = nl.load(x) * float(b + 1)
            nl.store(out[b], t[b])
        return out

    x = RNG.standard_normal((8, 16)).astype(np.float32)
    np.testing.assert_allclose(nki.simulate_kernel(kern, x), np.stack([x, 2 * x, 3 * x]), rtol=1e-6)

    def stale(x):
        out = nl.ndarray((8, 16), dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((2, nl.par_dim(8), 16), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
        t[0] = nl.load(x)
        t[1] = nl.load(x) * 5.0  # same physical tile (no num_free_tiles): overwrites block 0
        nl.store(out, t[0])
        return out

    np.testing.assert_allclose(nki.simulate_kernel(stale, x), 5 * x, rtol=1e-6)


def test_masked_result_assigned_into_a_larger_tile_writes_only_the_mask():
    def kern(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        i_p = nl.arange(x.shape[0])[:, None]
        i_f = nl.arange(x.shape[1])[None, :]
        z = nl.full(x.shape, 7.0, nl.float32)
        z[i_p, i_f] = nl.matmul(nl.load(x), nl.load(x), transpose_x=True, mask=(i_p < 3))
        nl.store(out, z)
        return out

    x = RNG.standard_normal((8, 8)).astype(np.float32)
    want = np.full((8, 8), 7.0, np.float32)
    want[:3] = (x.T @ x)[:3]
    np.testing.assert_allclose(nki.simulate_kernel(kern, x), want, rtol=1e-5, atol=1e-5)


def test_gemm_grid_is_the_documented_tile_definition():
    assert nl.gemm_grid().shape == (nl.tile_size.pmax, nl.tile_size.gemm_moving_fmax)
    assert nl.gemm_stationary_grid().shape == (nl.tile_size.pmax, nl.tile_size.gemm_stationary_fmax)


def test_psum_accumulation_group_restarts_after_its_result_is_read():
    """`psum += matmul` without nl.zeros: the first matmul of a group overwrites (the Beta-1 compiler set the
    flag); once the result is read, the next `+=` into the same tile starts a new group."""
    def kern(a, b):
        out = nl.ndarray((2, 16, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        ps = nl.ndarray((16, 8), dtype=nl.float32, buffer=nl.psum)  # never zeroed, reused for both groups
        for g in nl.sequential_range(2):
            for k in nl.affine_range(2):
                ps += nisa.nc_matmul(nl.load(a[g, k]), nl.load(b[g, k]))
            nl.store(out[g], nl.copy(ps))
        return out

    a = RNG.standard_normal((2, 2, 32, 16)).astype(np.float32)
    b = RNG.standard_normal((2, 2, 32, 8)).astype(np.float32)
    want = np.stack([sum(a[g, k].T @ b[g, k] for k in range(2)) for g in range(2)])
    np.testing.assert_allclose(nki.simulate_kernel(kern, a, b), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("transposed", [False, True])
def test_a_masked_load_assigned_to_a_tile_writes_only_the_mask(transposed):
    """``t[...] = nl.load(x, mask=m)`` (and ``load_transpose2d``) writes the masked elements of ``t``; the rest
    keeps its values, as for every other masked result (Beta 1 wrote the load straight into ``t``)."""
    @nki.jit(mode="simulation")
    def kern(x):
        out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(64)[None, :]
        buf = nl.full((128, 64), 7.0, dtype=x.dtype, buffer=nl.sbuf)
        if transposed:
            buf[i_p, i_f] = nl.load_transpose2d(x, mask=i_p < 44)
        else:
            buf[i_p, i_f] = nl.load(x[i_p, i_f], mask=i_p < 44)
        nl.store(out[i_p, i_f], value=buf[i_p, i_f])
        return out

    x = RNG.standard_normal((64, 128) if transposed else (128, 64)).astype(np.float32)
    got = kern(x)
    want = (x.T if transposed else x)[:44]
    np.testing.assert_array_equal(got[:44], want)
    np.testing.assert_array_equal(got[44:], np.full((84, 64), 7.0, np.float32))


@pytest.mark.parametrize("masked", [True, False])
def test_a_row_wise_instruction_masked_past_the_tile_edge_reads_only_the_mask(masked):
    """``nisa.bn_stats(t[i_p, j * 512 + i_f], mask=j * 512 + i_f < d)`` over a ragged last chunk indexes past the
    tile where the mask is off: only the box is bounds-checked and read (unmasked, it is out of bounds)."""
    d = 700

    @nki.jit(mode="simulation")
    def kern(x):
        out = nl.ndarray((128, 12), dtype=nl.float32, buffer=nl.shared_hbm)
        i_p = nl.arange(128)[:, None]
        t = nl.load(x)
        i_f = nl.arange(512)[None, :]
        i_s = nl.arange(6)[None, :]
        stats = nl.ndarray((128, 12), dtype=nl.float32, buffer=nl.sbuf)
        for j in nl.affine_range(2):
            stats[i_p, j * 6 + i_s] = nisa.bn_stats(t[i_p, j * 512 + i_f], mask=(j * 512 + i_f < d) if masked else None)
        nl.store(out, value=stats)
        return out

    x = RNG.standard_normal((128, d)).astype(np.float32)
    if not masked:
        with pytest.raises(NkiValidationError, match="Out-of-bound access"):
            kern(x)
        return
    stats = kern(x)
    agg = nki.simulate_kernel(_aggr_kernel, stats)
    np.testing.assert_allclose(agg[:, 0], x.mean(axis=1), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(agg[:, 1], x.var(axis=1), rtol=1e-3, atol=1e-5)


@nki.jit(mode="simulation")
def _aggr_kernel(stats):
    out = nl.ndarray((128, 2), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, value=nisa.bn_aggr(nl.load(stats)))
    return out


def test_transpose_and_partition_reduce_masked_past_the_tile_edge():
    """The same for ``nc_transpose`` (mask over the transposed result) and ``tensor_partition_reduce``: an index
    expression running past the tile is cut to the mask box before it is bounds-checked."""
    w = 200

    @nki.jit(mode="simulation")
    def kern(x):
        out_t = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.shared_hbm)
        out_r = nl.ndarray((1, 128), dtype=x.dtype, buffer=nl.shared_hbm)
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(128)[None, :]
        t = nl.load(x)
        tr = nisa.nc_transpose(t[i_p, 128 + i_f], mask=(128 + i_p < w))  # result rows = data columns
        nl.store(out_t[i_p, i_f], value=nl.copy(tr), mask=(128 + i_p < w))
        r = nisa.tensor_partition_reduce(np.add, t[i_p, 128 + i_f], mask=(128 + i_f < w))
        nl.store(out_r[nl.arange(1)[:, None], i_f], value=r, mask=(128 + i_f < w))
        return out_t, out_r

    x = RNG.standard_normal((128, w)).astype(np.float32)
    got_t, got_r = kern(x)
    np.testing.assert_array_equal(got_t[:w - 128], x[:, 128:].T)
    np.testing.assert_allclose(got_r[0, :w - 128], x[:, 128:].sum(axis=0), rtol=1e-5, atol=1e-4)


def test_a_one_dimensional_access_is_a_column_of_partitions():
    """A 1-D access (``a[c0:c1, j]``, or ``t[0:64, 0]`` on chip) is a tile of that many partitions and one column,
    as Beta 1 had it: loaded, it is usable as a ``[P, 1]`` per-partition scale (the fused-Mamba tutorial's
    ``nisa.activation(op=nl.exp, data=..., scale=nl.load(A[c0:c0 + 128, i]))``)."""
    @nki.jit(mode="simulation")
    def kern(x, a):
        out = nl.ndarray((128, 16), dtype=nl.float32, buffer=nl.shared_hbm)
        col = nl.load(a[0:128, 3])
        assert tuple(col.shape) == (128, 1)
        nl.store(out, value=nisa.activation(op=nl.exp, data=nl.load(x), scale=col))
        return out

    x = RNG.standard_normal((128, 16)).astype(np.float32)
    a = RNG.standard_normal((128, 8)).astype(np.float32) * 0.5
    np.testing.assert_allclose(kern(x, a), np.exp(x * a[:, 3:4]), rtol=1e-5, atol=1e-6)


def test_double_row_matmul_and_a_column_operand_of_tensor_tensor():
    """``nisa.nc_matmul(a, b, perf_mode='double_row_gen3')`` with fp8 ``[K, 2, M]`` / ``[K, 2, N]`` operands
    contracts over both rows (NeuronCore-v3), and ``nisa.tensor_tensor`` broadcasts a ``[P, 1]`` operand along
    the free dims (the nki-samples double-row matmul dequantizes this way)."""
    import ml_dtypes

    def kern(a, b, s):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
        acc[...] += nisa.nc_matmul(nl.load(a), nl.load(b), perf_mode="double_row_gen3")
        res = nl.copy(acc, dtype=nl.float32)
        nl.store(out, value=nisa.tensor_tensor(res, nl.load(s), nl.multiply))
        return out

    a = RNG.standard_normal((128, 2, 128)).astype(ml_dtypes.float8_e4m3)
    b = RNG.standard_normal((128, 2, 512)).astype(ml_dtypes.float8_e4m3)
    s = RNG.standard_normal((128, 1)).astype(np.float32)
    got = nki.jit(kern, mode="simulation", platform_target="trn2")(a, b, s)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    ref = a32.transpose(1, 0, 2).reshape(256, 128).T @ b32.transpose(1, 0, 2).reshape(256, 512)
    np.testing.assert_allclose(got, ref * s, rtol=1e-4, atol=1e-3)
    with pytest.raises(NkiValidationError, match="perf_mode"):
        nki.jit(kern, mode="simulation", platform_target="trn1")(a, b, s)


def test_tensor_tensor_operands_of_one_size_and_two_shapes_pair_elements_in_order():
    """Operands with the same elements per partition but different shapes are not broadcast: they pair in order."""
    @nki.jit(mode="simulation")
    def kern(a, b):
        out = nl.ndarray((128, 32), dtype=nl.float32, buffer=nl.shared_hbm)
        r = nisa.tensor_tensor(nl.load(a), nl.load(b).reshape((128, 4, 8)), nl.add)
        nl.store(out, value=r.reshape((128, 32)))
        return out

    a = RNG.standard_normal((128, 32)).astype(np.float32)
    b = RNG.standard_normal((128, 32)).astype(np.float32)
    np.testing.assert_allclose(kern(a, b), a + b, rtol=1e-6)


@pytest.mark.parametrize("api", ["nc_matmul", "matmul", "matmul_transpose_x"])
def test_a_matmul_masked_past_the_tile_edge_computes_the_mask(api):
    """A matmul whose operands are index expressions running past the tile, masked to the rows / columns that
    exist: only those are computed and bounds-checked (``nisa.nc_matmul``, ``nl.matmul`` with and without
    ``transpose_x``)."""
    w = 200

    @nki.jit(mode="simulation")
    def kern(a, b):
        out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(128)[None, :]
        ta, tb = nl.load(a), nl.load(b)
        keep = (128 + i_p < w) & (128 + i_f < w)
        if api == "nc_matmul":
            r = nisa.nc_matmul(ta[i_p, 128 + i_f], tb[i_p, 128 + i_f], mask=keep)
        elif api == "matmul":  # x [M, K]: result rows are x's partitions
            r = nl.matmul(ta[i_p, i_f], tb[i_p, 128 + i_f], mask=(128 + i_f < w))
        else:
            r = nl.matmul(ta[i_p, 128 + i_f], tb[i_p, 128 + i_f], transpose_x=True, mask=keep)
        nl.store(out, value=nl.copy(r))
        return out

    a = RNG.standard_normal((128, w)).astype(np.float32)
    b = RNG.standard_normal((128, w)).astype(np.float32)
    got = kern(a, b)
    n = w - 128
    if api == "matmul":
        np.testing.assert_allclose(got[:, :n], a[:, :128] @ b[:, 128:], rtol=2e-2, atol=2e-2)
    else:
        np.testing.assert_allclose(got[:n, :n], a[:, 128:].T @ b[:, 128:], rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("cond", [np.array([-1, 0, 1, 2, -128, 0, 5, 0], np.int8),
                                  np.array([-1, 0, 1, 2, -70000, 0, 5, 0], np.int32),
                                  np.array([-0.5, 0.0, 0.5, 2.0, -0.0, 1e-30, 5.0, 0.0], np.float32)])
def test_where_holds_where_the_condition_is_nonzero(cond):
    # (a converting copy to uint8 saturated -1 to 0 and truncated 0.5 to 0: both read as false)
    @nki.jit(mode="simulation")
    def kern(c, x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.where(nl.load(c), nl.load(x), 9.0))
        return out

    c = np.tile(cond, (4, 1))
    x = RNG.standard_normal((4, 8)).astype(np.float32)
    np.testing.assert_array_equal(kern(c, x), np.where(c, x, np.float32(9.0)))
    extra = [r.opcode for r in nki.last_result().trace.records if r.opcode not in ("dma_copy", "memset")]
    # an integer condition is read as unsigned bits in place; a float one is compared with 0
    assert extra == (["tensor_copy_predicated"] if cond.dtype.kind == "i" else ["tensor_scalar", "tensor_copy_predicated"])


def test_where_broadcasts_a_one_column_comparison_over_the_free_dims():
    # (the broadcast bool condition has a zero-stride last dim: it is compared with 0, not reread in place, which
    # raised "view(dtype) needs a contiguous last dimension")
    @nki.jit(mode="simulation")
    def kern(c, x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.where(nl.greater(nl.load(c), 0), nl.load(x), 9.0))
        return out

    c = np.array([[-1], [0], [1], [2]], np.int8)
    x = RNG.standard_normal((4, 8)).astype(np.float32)
    np.testing.assert_array_equal(kern(c, x), np.where(c > 0, x, np.float32(9.0)))
