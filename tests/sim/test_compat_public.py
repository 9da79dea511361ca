"""Issue 31: current-API (`nki`) code that public repositories run, rejected or mis-simulated by nkieval.

Our own minimal kernels, one per defect (no public code is copied here).
"""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from nkieval.sim.errors import NkiValidationError


@nki.jit
def _evacuate_with_dtype(x, out_dtype):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    ps = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.psum)
    nisa.tensor_copy(dst=ps, src=t)
    res = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=ps, dtype=out_dtype)  # NKI 0.2's output dtype, still passed with dst=
    nisa.dma_copy(dst=out, src=res)
    return out


def test_tensor_copy_takes_nki_02_dtype_and_writes_dsts_dtype():
    import warnings

    from nkieval.sim.errors import NkiSimulatorWarning

    x = np.arange(32, dtype=np.float32).reshape(4, 8) + 1 / 3
    with warnings.catch_warnings():
        warnings.simplefilter("error", NkiSimulatorWarning)
        np.testing.assert_array_equal(nki.simulate(_evacuate_with_dtype)(x, nl.float32), x)
        np.testing.assert_array_equal(nki.simulate(_evacuate_with_dtype)(x, np.float32), x)
    with pytest.warns(NkiSimulatorWarning, match=r"dtype=bfloat16 is ignored: .* writes dst's dtype \(float32\)"):
        got = nki.simulate(_evacuate_with_dtype)(x, nl.bfloat16)
    np.testing.assert_array_equal(got, x)  # dst is fp32: no bf16 rounding


@nki.jit
def _view_fp8_as_uint8(x):
    out = nl.ndarray(x.shape, dtype=nl.uint8, buffer=nl.shared_hbm)
    v = x.view(nl.float8_e5m2)  # the input's own dtype: a relabel
    assert tuple(v.shape) == tuple(x.shape)
    t = nl.ndarray(x.shape, dtype=nl.uint8, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=v.view(nl.uint8))  # the bits
    nisa.dma_copy(dst=out, src=t)
    return out


@pytest.mark.parametrize("precise", [True, False])
def test_view_of_an_fp8_input_keeps_its_shape_in_either_precision(precise):
    from nkieval.sim.options import SimOptions

    x = (np.arange(16, dtype=np.float32).reshape(4, 2, 2) / 4).astype(nl.float8_e5m2.storage)
    got = nki.simulate(_view_fp8_as_uint8, options=SimOptions(precise_fp=precise))(x)
    np.testing.assert_array_equal(got, x.view(np.uint8))


@nki.jit
def _select_by_bool(pred, x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    p = nl.ndarray(pred.shape, dtype=pred.dtype, buffer=nl.sbuf)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=p, src=pred)
    nisa.dma_copy(dst=t, src=x)
    res = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.select_reduce(dst=res, predicate=p, on_true=t, on_false=-1.0)
    nisa.dma_copy(dst=out, src=res)
    return out


def test_select_reduce_takes_a_bool_predicate():
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    pred = (x % 3 == 0)
    np.testing.assert_array_equal(nki.simulate(_select_by_bool)(pred, x), np.where(pred, x, -1.0))
    with pytest.raises(NkiValidationError, match="predicate dtype float32"):
        nki.simulate(_select_by_bool)(pred.astype(np.float32), x)


@nki.jit(platform_target="trn2")
def _range_select_narrow(x, bound):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    b = nl.ndarray(bound.shape, dtype=bound.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=b, src=bound)
    res = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.range_select(dst=res, on_true_tile=t, comp_op0=nl.greater_equal, comp_op1=nl.less, bound0=0.0,
                      bound1=b, range_start=0, on_false_value=np.finfo(np.float32).min)
    nisa.dma_copy(dst=out, src=res)
    return out


@pytest.mark.parametrize("dtype", [np.float32, nl.bfloat16])
def test_range_select_fill_downcast_to_a_narrow_dst_is_minus_inf(dtype):
    dtype = getattr(dtype, "storage", dtype)
    x = np.ones((4, 8), np.float32).astype(dtype)
    bound = np.full((4, 1), 5.0, np.float32)
    got = np.asarray(nki.simulate(_range_select_narrow)(x, bound), np.float32)
    fill = np.finfo(np.float32).min if dtype == np.float32 else -np.inf
    np.testing.assert_array_equal(got, np.where(np.arange(8) < 5, 1.0, fill)[None, :].repeat(4, 0))


@nki.jit
def _gather_rows(x, idx):
    out = nl.ndarray((idx.shape[0], x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
    i = nl.ndarray(idx.shape, dtype=idx.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=i, src=idx)
    t = nl.ndarray((idx.shape[0], x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x.ap([[x.shape[1], idx.shape[0]], [1, x.shape[1]]], vector_offset=i, indirect_dim=0))
    nisa.dma_copy(dst=out, src=t)
    return out


def test_out_of_bounds_indirect_dma_is_also_an_index_error():
    from nkieval.sim.errors import NkiIndexError

    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    ok = nki.simulate(_gather_rows)(x, np.array([[3], [0]], np.int32))
    np.testing.assert_array_equal(ok, x[[3, 0]])
    with pytest.raises(IndexError, match=r"^dma_copy: index 40 is out of bounds for axis 0 with size 32") as e:
        nki.simulate(_gather_rows)(x, np.array([[1], [5]], np.int32))
    assert isinstance(e.value, NkiValidationError) and isinstance(e.value, NkiIndexError)
    assert e.value.rule == "out-of-bounds"


@nki.jit(platform_target="trn3")
def _tiled_by_moving_fmax(a, b):
    """Tiles N by nl.tile_size.gemm_moving_fmax, as the trn3 tutorials do, and also issues one wider matmul."""
    K, M = a.shape
    N = b.shape[1]
    tn = nl.tile_size.gemm_moving_fmax
    assert tn == 512
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    at = nl.ndarray((K, M), dtype=a.dtype, buffer=nl.sbuf)
    bt = nl.ndarray((K, N), dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=at, src=a)
    nisa.dma_copy(dst=bt, src=b)
    res = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.sbuf)
    for j in nl.affine_range(N // tn):
        ps = nl.ndarray((M, tn), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=ps, stationary=at, moving=bt[:, j * tn:(j + 1) * tn])
        nisa.tensor_copy(dst=res[:, j * tn:(j + 1) * tn], src=ps)
    wide = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.psum)  # NeuronCore-v4's nc_matmul takes N up to 4096
    nisa.nc_matmul(dst=wide, stationary=at, moving=bt)
    nisa.dma_copy(dst=out, src=res)
    return out


def test_trn3_tile_size_gemm_moving_fmax_is_the_tiling_constant():
    a = np.ones((32, 16), np.float32)
    b = np.arange(32 * 1024, dtype=np.float32).reshape(32, 1024) / 1024
    np.testing.assert_allclose(nki.simulate(_tiled_by_moving_fmax)(a, b), a.T @ b, rtol=1e-5)


@nki.jit
def _buffers(x):
    assert x.buffer == nl.hbm and x.buffer == nl.shared_hbm  # an input, asserted either way by AWS's kernels
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    assert out.buffer == nl.shared_hbm and out.buffer != nl.hbm and nl.hbm != nl.shared_hbm
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    assert t.buffer == nl.sbuf and t.buffer != nl.hbm and t.buffer != nl.psum
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_kernel_inputs_are_in_hbm_and_shared_hbm():
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(nki.simulate(_buffers)(x), x)


@nki.jit(platform_target="trn3")
def _on_trn3(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=x)
    return out


def test_platform_target_wins_over_the_environment_and_the_default(monkeypatch):
    x = np.zeros((2, 2), np.float32)
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn1")
    nki.simulate(_on_trn3)(x)
    assert nki.last_result().target.name == "trn3"
    _on_trn3(x)  # called directly
    assert nki.last_result().target.name == "trn3"
    nki.simulate(_on_trn3, target="trn2")(x)  # an explicit target still wins
    assert nki.last_result().target.name == "trn2"
    nki.simulate(_on_trn3.fn)(x)  # the plain function: the environment
    assert nki.last_result().target.name == "trn1"
    monkeypatch.delenv("NEURON_PLATFORM_TARGET_OVERRIDE")
    nki.simulate(_on_trn3.fn)(x)
    assert nki.last_result().target.name == "trn2"


def test_language_constants_is_a_module():
    import nki.language.constants as constants
    from neuronxcc.nki.language.constants import sizeinbytes as b1_sizeinbytes
    from nki.language.constants import sizeinbytes

    assert constants.sizeinbytes is sizeinbytes is b1_sizeinbytes
    assert (sizeinbytes(nl.bfloat16), sizeinbytes(nl.float32), sizeinbytes(nl.float8_e4m3)) == (2, 4, 1)


@nki.jit
def _transpose_sbuf_to_sbuf(x, engine):
    out = nl.ndarray((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    r = nl.ndarray((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=nl.sbuf)
    if engine is None:
        nisa.nc_transpose(dst=r, data=t)
    else:
        nisa.nc_transpose(dst=r, data=t, engine=engine)
    nisa.dma_copy(dst=out, src=r)
    return out


def test_nc_transpose_engine_left_to_the_compiler_takes_the_tensor_engine_when_vector_cannot():
    x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    np.testing.assert_array_equal(nki.simulate(_transpose_sbuf_to_sbuf)(x, None), x.T)
    assert [r.engine for r in nki.last_result().trace.records if r.opcode == "nc_transpose"] == ["tensor"]
    small = x[:32, :16].copy()
    np.testing.assert_array_equal(nki.simulate(_transpose_sbuf_to_sbuf)(small, None), small.T)
    assert [r.engine for r in nki.last_result().trace.records if r.opcode == "nc_transpose"] == ["vector"]
    with pytest.raises(NkiValidationError, match=r"exceeds the vector engine transpose limit \[32, 32\]"):
        nki.simulate(_transpose_sbuf_to_sbuf)(x, nisa.vector_engine)
    with pytest.raises(NkiValidationError, match="the Tensor engine writes PSUM"):
        nki.simulate(_transpose_sbuf_to_sbuf)(x, nisa.tensor_engine)


@nki.jit
def _barrier_on_a_tile(x, cores):
    """Each core writes its half of out, then a barrier on an SBUF token (as AWS's library writes it)."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    half = x.shape[0] // nl.num_programs()
    pid = nl.program_id(0)
    t = nl.ndarray((half, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[pid * half:(pid + 1) * half, :])
    nisa.dma_copy(dst=out[pid * half:(pid + 1) * half, :], src=t)
    nisa.core_barrier(t, cores)
    return out


def test_core_barrier_takes_an_sbuf_token_and_a_single_core():
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    np.testing.assert_array_equal(nki.simulate(_barrier_on_a_tile[2], target="trn2")(x, (0, 1)), x)
    np.testing.assert_array_equal(nki.simulate(_barrier_on_a_tile, target="trn2")(x, (0)), x)  # unsharded
    np.testing.assert_array_equal(nki.simulate(_barrier_on_a_tile, target="trn2")(x, (0,)), x)
    with pytest.raises(NkiValidationError, match="needs a kernel launched with LNC 2"):
        nki.simulate(_barrier_on_a_tile, target="trn2")(x, (0, 1))


@nki.jit
def _twelve_accumulators(a, b, interleaved):
    """Twelve [K, 512] fp32 PSUM tiles (24 KiB a partition, PSUM has 16 KiB) accumulated over two K steps in one
    loop nest, then evacuated in a second nest. Tile by tile (``interleaved=False``) each accumulation finishes
    in its own iteration, so the compiler evacuates it early and few are live; with the K loop outside, all
    twelve accumulate at once."""
    K, M = a.shape
    n = 12
    out = nl.ndarray((M, n * 512), dtype=nl.float32, buffer=nl.shared_hbm)
    at = nl.ndarray((K, M), dtype=a.dtype, buffer=nl.sbuf)
    bt = nl.ndarray((K, n * 512), dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=at, src=a)
    nisa.dma_copy(dst=bt, src=b)
    ps = [nl.ndarray((M, 512), dtype=nl.float32, buffer=nl.psum) for _ in range(n)]
    steps = [(i, k) for k in range(2) for i in range(n)] if interleaved else [(i, k) for i in range(n) for k in range(2)]
    for i, k in steps:
        nisa.nc_matmul(dst=ps[i], stationary=at[k * (K // 2):(k + 1) * (K // 2), :],
                       moving=bt[k * (K // 2):(k + 1) * (K // 2), i * 512:(i + 1) * 512])
    res = nl.ndarray((M, n * 512), dtype=nl.float32, buffer=nl.sbuf)
    for i in range(n):
        nisa.tensor_copy(dst=res[:, i * 512:(i + 1) * 512], src=ps[i])
    nisa.dma_copy(dst=out, src=res)
    return out


def test_psum_capacity_by_dependency_driven_live_ranges():
    a = np.ones((32, 16), np.float32)
    b = np.arange(32 * 12 * 512, dtype=np.float32).reshape(32, 12 * 512) / 4096
    np.testing.assert_allclose(nki.simulate(_twelve_accumulators, target="trn2")(a, b, False), a.T @ b, rtol=1e-5)
    assert nki.last_result().trace.peak_psum_bytes <= 2 * 2048
    with pytest.raises(NkiValidationError, match=r"need 24576 bytes per partition of PSUM") as e:
        nki.simulate(_twelve_accumulators, target="trn2")(a, b, True)
    assert e.value.rule == "psum-capacity"


def _new_parameters(x, pred):
    """The instruction forms issue 31 made legal, in one kernel, for the record/replay round trip."""
    out = nl.ndarray((x.shape[1], x.shape[0]), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    p = nl.ndarray(pred.shape, dtype=pred.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=p, src=pred)
    s = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.select_reduce(dst=s, predicate=p, on_true=t, on_false=0.0)
    c = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=c, src=s, dtype=nl.float32)
    r = nl.ndarray((x.shape[1], x.shape[0]), dtype=nl.float32, buffer=nl.sbuf)
    nisa.nc_transpose(dst=r, data=c)
    nisa.core_barrier(r, (0,))
    nisa.dma_copy(dst=out, src=r)
    return out


def test_new_parameters_record_and_replay():
    from nkieval.sim.program import ArgSpec, Program, record_program, replay_program
    from nkieval.sim.runner import run_kernel

    x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    pred = (x % 3 == 0)
    eager = run_kernel(_new_parameters, [x, pred], {}, target="trn2")
    np.testing.assert_array_equal(eager.outputs, np.where(pred, x, 0.0).T)
    rec = record_program(_new_parameters, [ArgSpec(x.shape, "float32"), ArgSpec(pred.shape, "bool")], {},
                         target="trn2")
    replay = replay_program(Program.from_json(rec.program.to_json()), [x, pred], {}, target="trn2")
    np.testing.assert_array_equal(replay.outputs, eager.outputs)
    assert [(r.opcode, r.engine) for r in replay.trace.records] == [(r.opcode, r.engine) for r in eager.trace.records]
