"""Beta-1 semantics: index grids, masks, block dims, accumulation, launch modes and documented errors."""

import types
import warnings

import neuronxcc.nki as nki
import neuronxcc.nki.compiler as ncc
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np
import pytest

from nkieval.frontends.beta1 import Beta1Unsupported
from nkieval.sim.errors import NkiValidationError

RNG = np.random.default_rng(3)


def run(fn, *args, grid=None):
    k = nki.jit(fn, mode="simulation")
    return (k[grid] if grid else k)(*args)


# -- masks --------------------------------------------------------------------------------------
def test_masked_op_computes_only_the_box_and_issues_one_instruction():
    def kern(x):
        out = nl.ndarray([64, 256], dtype=x.dtype, buffer=nl.shared_hbm)
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(512)[None, :]
        t = nl.load(x[i_p, i_f])
        sq = nl.square(t, mask=((i_p < 64) & (i_f < 256)))
        nl.store(out[i_p, i_f], sq[i_p, i_f], mask=((i_p < 64) & (i_f < 256)))
        return out

    x = RNG.standard_normal((128, 512), dtype=np.float32)
    np.testing.assert_array_equal(run(kern, x), np.square(x[:64, :256]))
    acts = [r for r in nki.last_result().trace.records if r.opcode == "activation"]
    assert len(acts) == 1 and acts[0].operands[0].shape == (64, 256)


def test_masked_store_outside_the_mask_is_not_written_and_oob_only_in_mask_is_checked():
    def kern(x):
        out = nl.ndarray([100, 8], dtype=x.dtype, buffer=nl.shared_hbm)
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(8)[None, :]
        nl.store(out[i_p, i_f], nl.load(x[i_p, i_f], mask=(i_p < 100)), mask=(i_p < 100))
        return out

    x = RNG.standard_normal((100, 8), dtype=np.float32)
    np.testing.assert_array_equal(run(kern, x), x)

    def unmasked(x):
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(8)[None, :]
        return nl.load(x[i_p, i_f])

    with pytest.raises(NkiValidationError, match=r"Out-of-bound access for tensor `x` on dimension 0: index range "
                                                 r"\[0, 127\] exceed dimension size of 100"):
        run(unmasked, x)


def test_non_rectangular_mask_splits_into_boxes():
    def kern(x):
        out = nl.ndarray([8, 8], dtype=x.dtype, buffer=nl.shared_hbm)
        ip, jf = nl.mgrid[0:8, 0:8]
        z = nl.zeros((8, 8), nl.float32)
        z[ip, jf] = nl.copy(nl.load(x), mask=(jf <= ip))
        nl.store(out, z)
        return out

    x = RNG.standard_normal((8, 8), dtype=np.float32) + 5
    res = run(kern, x)
    # the masked copy writes only the lower triangle of z; the rest keeps z's zeros
    np.testing.assert_array_equal(res, np.where(np.tril(np.ones((8, 8), bool)), x, 0))


# -- indexing -----------------------------------------------------------------------------------
def test_strided_and_affine_free_indexing():
    def kern(x):
        out = nl.ndarray([4, 8], dtype=x.dtype, buffer=nl.shared_hbm)
        i_p = nl.arange(4)[:, None]
        i_f = nl.arange(8)[None, :]
        t = nl.load(x[i_p, 2 * i_f + 1])  # odd columns
        nl.store(out[i_p, i_f], t)
        return out

    x = np.arange(64, dtype=np.float32).reshape(4, 16)
    np.testing.assert_array_equal(run(kern, x), x[:, 1::2])


def test_mixing_basic_and_advanced_indexing_is_an_error():
    def kern(x):
        i_f = nl.arange(8)[None, :]
        return nl.load(x[0:4, i_f])

    with pytest.raises(NkiValidationError, match="Mixing basic tensor indexing and advanced tensor indexing"):
        run(kern, np.zeros((4, 8), np.float32))


def test_1d_arange_index_is_an_error():
    def kern(x):
        return nl.load(x[nl.arange(4), nl.arange(8)[None, :]])

    with pytest.raises(NkiValidationError, match="with 1d arange is not supported"):
        run(kern, np.zeros((4, 8), np.float32))


def test_control_flow_on_arange_is_an_error():
    def kern(x):
        if nl.arange(4)[:, None] < 2:
            pass

    with pytest.raises(NkiValidationError, match=r"Control-flow depending on nl\.arange"):
        run(kern, np.zeros((4, 8), np.float32))


def test_indirect_load_store_and_atomic_rmw():
    def kern(data, idx, vals):
        out = nl.ndarray([64, 32], dtype=data.dtype, buffer=nl.shared_hbm)
        acc = nl.ndarray(data.shape, dtype=data.dtype, buffer=nl.shared_hbm)
        nl.store(acc, nl.load(data))
        i_p = nl.arange(64)[:, None]
        i_f = nl.arange(32)[None, :]
        it = nl.load(idx[i_p])
        nl.store(out, nl.load(data[it[i_p, 0], i_f]))
        nl.atomic_rmw(acc[it, i_f], value=nl.load(vals), op=np.add)
        return out, acc

    data = RNG.standard_normal((128, 32), dtype=np.float32)
    idx = np.array([5, 7, 5, *list(range(61))], dtype=np.int32).reshape(64, 1)
    vals = RNG.standard_normal((64, 32), dtype=np.float32)
    out, acc = run(kern, data, idx, vals)
    np.testing.assert_array_equal(out, data[idx[:, 0]])
    want = data.copy()
    np.add.at(want, idx[:, 0], vals)
    np.testing.assert_allclose(acc, want, rtol=1e-6, atol=1e-6)


def test_iota_and_block_dims():
    def kern():
        out = nl.ndarray([2, 128, 4], dtype=nl.int32, buffer=nl.shared_hbm)
        blocks = nl.ndarray((2, nl.par_dim(128), 4), dtype=nl.int32, buffer=nl.sbuf)
        for b in nl.affine_range(2):
            blocks[b] = nisa.iota(5 + 2 * nl.arange(128)[:, None] + 1000 * b + nl.arange(4)[None, :], dtype=nl.int32)
            nl.store(out[b], blocks[b])
        return out

    want = np.stack([5 + 2 * np.arange(128)[:, None] + 1000 * b + np.arange(4)[None, :] for b in range(2)])
    np.testing.assert_array_equal(run(kern), want)


# -- accumulation and loops ------------------------------------------------------------------------
def test_affine_range_write_conflict_is_detected():
    def kern(x):
        out = nl.ndarray([4, 8], dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((4, 8), dtype=x.dtype, buffer=nl.sbuf)
        for _i in nl.affine_range(2):
            t[...] = nl.load(x)
        nl.store(out, t)
        return out

    with pytest.raises(NkiValidationError, match="Unexpected output dependencies"):
        run(kern, np.zeros((4, 8), np.float32))
    kern.__globals__  # noqa: B018 - same kernel with sequential_range is fine

    def seq(x):
        out = nl.ndarray([4, 8], dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((4, 8), dtype=x.dtype, buffer=nl.sbuf)
        for _i in nl.sequential_range(2):
            t[...] = nl.load(x)
        nl.store(out, t)
        return out

    run(seq, np.zeros((4, 8), np.float32))


@pytest.mark.parametrize(("bounds", "first", "second"), [
    ((-3, -1), -3, -2),  # every value negative
    ((-1, 1), -1, 0),  # a value equal to the detector's "unwritten" mark
    ((5, -1, -2), 5, 3),  # a descending step
    ((0, 600, 300), 0, 300),  # values past the record's int8 range, two iterations
])
def test_affine_range_write_conflict_is_detected_whatever_the_range_values(bounds, first, second):
    """The detector records which iteration wrote each element by its ordinal; the range's values (negative,
    descending, large) change neither the finding nor the iterations the message names."""
    def kern(x):
        out = nl.ndarray([4, 8], dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((4, 8), dtype=x.dtype, buffer=nl.sbuf)
        for _i in nl.affine_range(*bounds):
            t[...] = nl.load(x)
        nl.store(out, t)
        return out

    with pytest.raises(NkiValidationError, match=rf"iterations {first} and {second} of an nl\.affine_range"):
        run(kern, np.zeros((4, 8), np.float32))


def test_affine_range_with_negative_values_writing_apart_is_not_a_conflict():
    def kern(x):
        out = nl.ndarray([4, 8], dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((4, nl.par_dim(1), 8), dtype=x.dtype, buffer=nl.sbuf)
        for i in nl.affine_range(-2, 2):
            t[i + 2] = nl.load(x[i + 2:i + 3, :])
        for r in range(4):
            nl.store(out[r:r + 1, :], t[r])
        return out

    x = RNG.standard_normal((4, 8), dtype=np.float32)
    np.testing.assert_array_equal(run(kern, x), x)


def _write_blocks(x, clash_at=None, interleave=False):
    """Each of 3 iterations writes 100 single-row blocks of an SBUF block tensor: its own rows, or (interleave)
    every third row starting at its number; with ``clash_at``, iteration 2's write number ``clash_at`` goes to
    row 6 instead, which iteration 0 wrote."""
    out = nl.ndarray((300, 8), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((300, nl.par_dim(4), 8), dtype=x.dtype, buffer=nl.sbuf)
    for i in nl.affine_range(3):
        for j in range(100):
            row = 3 * j + i if interleave else 100 * i + j
            if clash_at is not None and i == 2 and j == clash_at:
                row = 6
            t[row] = nl.load(x[0:4, :])
    for r in range(300):
        nl.store(out[r:r + 1, :], t[r, 0:1, :])
    return out


def test_affine_range_write_conflict_after_many_disjoint_writes_names_both_iterations():
    """Past the first 64 writes the detector keeps each iteration's bounding box; a clash hidden behind 300
    disjoint writes is still found, with the iteration that wrote the element first."""
    x = np.ones((4, 8), np.float32)
    run(_write_blocks, x)
    with pytest.raises(NkiValidationError, match=r"iterations 0 and 2 of an nl\.affine_range"):
        run(lambda t: _write_blocks(t, clash_at=50), x)


def test_affine_range_interleaved_iterations_writing_apart_are_not_a_conflict():
    """Iterations whose bounding boxes meet but whose elements do not (every third row) pass; a later clash in
    the same pattern is still found."""
    x = np.ones((4, 8), np.float32)
    run(lambda t: _write_blocks(t, interleave=True), x)
    with pytest.raises(NkiValidationError, match="iterations 0 and 2"):
        run(lambda t: _write_blocks(t, clash_at=80, interleave=True), x)


class _StorageView:
    """What the write-conflict detector reads of a tile: its view's data and its storage."""

    def __init__(self, storage: np.ndarray, view: np.ndarray) -> None:
        self.data = view
        self.alloc = types.SimpleNamespace(storage=storage)
        self._offset = view.__array_interface__["data"][0] - storage.__array_interface__["data"][0]

    def _byte_offset(self) -> int:
        return self._offset


def test_write_owners_keep_nothing_per_element_for_disjoint_slices():
    """Memory: iterations writing their own slices leave no per-element array however many writes there are;
    when one is needed it is the smallest integer type holding the loop's iteration numbers."""
    from nkieval.frontends.beta1.state import WriteOwners, iteration_dtype

    data = np.zeros((64, 4, 16), np.float32)
    owners = WriteOwners(data.shape, iteration_dtype(64))
    for it in range(64):
        for k in range(4):
            assert owners.write(_StorageView(data, data[it, k]), it) is None
        # (a free dim written as two, 8 * i + j: the box bounds it)
        assert owners.write(_StorageView(data, data[it].reshape(4, 2, 8)), it) is None
    assert owners.dense is None
    prev = owners.write(_StorageView(data, data[3, 1:3, 5:9]), 40)
    assert owners.dense is not None and owners.dense.dtype == np.int8
    assert set(prev.tolist()) == {3}
    assert iteration_dtype(200) == np.int16 and iteration_dtype(40000) == np.int32


def test_psum_accumulation_in_affine_range_is_allowed_and_sums():
    def kern(a, b):
        out = nl.ndarray([32, 64], dtype=nl.float32, buffer=nl.shared_hbm)
        ps = nl.zeros((32, 64), nl.float32, buffer=nl.psum)
        for k in nl.affine_range(3):
            ps += nisa.nc_matmul(nl.load(a[k * 128:(k + 1) * 128, :]), nl.load(b[k * 128:(k + 1) * 128, :]))
        nl.store(out, nl.copy(ps))
        return out

    a = RNG.standard_normal((384, 32), dtype=np.float32)
    b = RNG.standard_normal((384, 64), dtype=np.float32)
    np.testing.assert_allclose(run(kern, a, b), a.T @ b, rtol=1e-4, atol=1e-4)
    mm = [r for r in nki.last_result().trace.records if r.opcode == "nc_matmul"]
    assert len(mm) == 3 and [r.attrs["accumulated"] for r in mm] == [False, True, True]


# -- operators, ufuncs, dtypes, broadcasting ----------------------------------------------------
def test_operators_ufuncs_broadcast_and_promotion():
    def kern(x, y, col, row):
        out = nl.ndarray([16, 8], dtype=nl.float32, buffer=nl.shared_hbm)
        cmp = nl.ndarray([16, 8], dtype=nl.uint8, buffer=nl.shared_hbm)
        tx, ty = nl.load(x), nl.load(y)
        # (a [1, 8] row joins through nl.add: Beta 1's operators do not broadcast partitions, see below)
        r = nl.add(np.exp(tx) * 2 - ty / 4 + nl.load(col), nl.load(row))
        assert r.dtype == nl.float32
        assert (nl.load(y, dtype=nl.bfloat16) + nl.load(y, dtype=nl.float16)).dtype == nl.float32
        nl.store(out, r)
        nl.store(cmp, tx > ty)
        return out, cmp

    x = RNG.standard_normal((16, 8), dtype=np.float32)
    y = RNG.standard_normal((16, 8), dtype=np.float32)
    col = RNG.standard_normal((16, 1), dtype=np.float32)
    row = RNG.standard_normal((1, 8), dtype=np.float32)
    out, cmp = run(kern, x, y, col, row)
    np.testing.assert_allclose(out, np.exp(x) * 2 - y / 4 + col + row, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(cmp, (x > y).astype(np.uint8))


def test_static_cast_shared_constant_identity_and_device_print(capsys):
    def kern():
        out = nl.ndarray([4, 4], dtype=nl.float32, buffer=nl.shared_hbm)
        c = nl.shared_constant(np.full((4, 4), 2.5, np.float32))
        eye = nl.load(nl.shared_identity_matrix(4, dtype=nl.float32))
        t = nl.static_cast(nl.load(c) + eye, nl.int32)
        nl.device_print("t=", t)
        nl.store(out, t)
        return out

    # toward zero, as the Beta-1 simulator's NumPy cast (SimOptions.float_to_int; 3.5 -> 3, not 4)
    np.testing.assert_array_equal(run(kern), np.trunc(np.full((4, 4), 2.5) + np.eye(4)))
    assert "t=" in capsys.readouterr().out


def test_partition_limit_uses_the_beta1_text():
    def kern():
        nl.ndarray((256, 4), dtype=nl.float32, buffer=nl.sbuf)

    with pytest.raises(NkiValidationError, match="number of partitions 256 exceed architecture limitation of 128"):
        run(kern)


def test_load_from_sbuf_uses_the_beta1_text():
    def kern():
        nl.load(nl.zeros((4, 4), nl.float32))

    with pytest.raises(NkiValidationError, match="Expected operand 'src' of 'load' to be in address space 'hbm'"):
        run(kern)


# -- launch -----------------------------------------------------------------------------------------
def _grid_kernel(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    i, j = nl.program_id(0), nl.program_id(1)
    assert nl.program_ndim() == 2 and nl.num_programs() == 8
    nl.store(out[i, j], nl.load(a[i, j]) + 10 * i + j)
    return out


def test_spmd_grids_nc_and_simulate_kernel():
    a = RNG.standard_normal((4, 2, 1, 3), dtype=np.float32)
    want = a + 10 * np.arange(4)[:, None, None, None] + np.arange(2)[None, :, None, None]
    k = nki.jit(_grid_kernel, mode="simulation", platform_target="trn2")
    np.testing.assert_allclose(k[4, 2](a), want, rtol=1e-6)
    np.testing.assert_allclose(k[nl.spmd_dim(nl.nc(2), 2), 2](a), want, rtol=1e-6)
    np.testing.assert_allclose(nki.simulate_kernel(nki.baremetal(_grid_kernel)[nl.nc(2) * 2, 2], a), want,
                               rtol=1e-6)
    with pytest.raises(NkiValidationError, match="needs 2 NeuronCores"):
        nki.jit(_grid_kernel, mode="simulation", platform_target="trn1")[nl.nc(2), 4](a)


def test_grid_launch_inside_a_kernel_is_an_error():
    inner = nki.jit(lambda x: x)

    def outer(x):
        inner[2](x)

    with pytest.raises(NkiValidationError, match=r"Calling kernel with spmd grid .* inside another kernel"):
        run(outer, np.zeros((2, 2), np.float32))


def test_benchmark_and_profile_modes():
    def kern(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.exp(nl.load(x)))
        return out

    x = RNG.standard_normal((128, 64), dtype=np.float32)
    bench = nki.benchmark(warmup=2, iters=3)(kern)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_allclose(bench(x), np.exp(x), rtol=1e-5)
    lat = bench.benchmark_result.nc_latency
    assert lat.is_estimate
    try:
        v = lat.get_latency_percentile(50)
    except NkiValidationError as e:  # no performance model available: a clear message
        assert "needs Neuron hardware" in str(e)
    else:
        assert v > 0
    prof = nki.profile(working_directory="/tmp/x")(kern)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_allclose(prof(x), np.exp(x), rtol=1e-5)


def test_unknown_mode_and_unsupported_api_are_clear():
    with pytest.raises(NkiValidationError, match=r"unknown nki\.jit mode"):
        nki.jit(lambda: None, mode="turbo")
    with pytest.raises(Beta1Unsupported, match=r"nisa\.builtin_custom_op is not implemented by nkieval"):
        run(lambda: nisa.builtin_custom_op())


def test_compiler_allocators_are_accepted():
    def kern(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((2, nl.par_dim(128), 16), dtype=x.dtype, buffer=ncc.sbuf.mod_alloc(base_addr=0,
                                                                                         num_free_tiles=(2,)))
        for b in nl.affine_range(2):
            t[b] = nl.load(x[b])
            nl.store(out[b], t[b])
        return out

    x = RNG.standard_normal((2, 128, 16), dtype=np.float32)
    np.testing.assert_array_equal(run(kern, x), x)


def test_rand_trace_subkernel_and_private_hbm_return():
    @nki.trace
    def fill(t):
        t[...] = nl.rand((8, 16), dtype=nl.float32)

    def kern():
        nl.random_seed(7)
        out = nl.ndarray((8, 16), dtype=nl.float32, buffer=nl.hbm)
        t = nl.ndarray((8, 16), dtype=nl.float32)
        fill(t)
        nl.store(out, t)
        return out

    r = run(kern)
    assert r.shape == (8, 16) and (r >= 0).all() and (r < 1).all() and len(np.unique(r)) > 100


def test_a_grid_launchs_private_hbm_output_is_refused_without_the_current_apis_version_note():
    # (each program of an SPMD grid has its own private HBM: which program's would the output be? The current
    # API's error adds "since NKI 0.3", a version difference that is not Beta 1's)
    def kern(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.hbm)
        nl.store(out, nl.load(a))
        return out

    x = np.ones((4, 4), np.float32)
    np.testing.assert_array_equal(run(kern, x), x)
    with pytest.raises(NkiValidationError, match=r"buffer=nl.shared_hbm \[rule kernel\]"):
        run(kern, x, grid=(2,))


def test_bool_predicate_and_bf16_affine_views():
    def kern(x, y):
        out = nl.ndarray((4, 8), dtype=x.dtype, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:4, 0:8]
        tx = nl.load(x[i_p, 2 * i_f])  # bf16 strided view
        ty = nl.load(y)
        nisa.tensor_copy_predicated(src=ty, dst=tx, predicate=ty > tx)
        nl.store(out, tx)
        return out

    import ml_dtypes

    x = RNG.standard_normal((4, 16)).astype(ml_dtypes.bfloat16)
    y = RNG.standard_normal((4, 8)).astype(ml_dtypes.bfloat16)
    want = np.maximum(x[:, ::2].astype(np.float32), y.astype(np.float32))
    np.testing.assert_array_equal(run(kern, x, y).astype(np.float32), want)
