"""Issue 31: Beta-1 (`neuronxcc.nki`) code that public repositories run, rejected or mis-simulated by nkieval.

Our own minimal kernels, one per defect (no public code is copied here).
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np
import pytest

from nkieval.sim.errors import NkiValidationError


def _running_sum(x, start=None):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    src = nl.load(x)
    acc = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    first = nl.load(start) if start else None  # an HBM argument is truthy: "was it given?"
    cmd = nisa.reduce_cmd.load_reduce if start else nisa.reduce_cmd.reset_reduce
    nisa.tensor_scalar_cumulative(src=src, dst=acc, op0=nl.multiply, op1=nl.add, imm0=2.0, imm1=first,
                                  reduce_cmd=cmd)
    nl.store(out, acc)
    return out


def test_tensor_scalar_cumulative_in_beta1_namespace():
    x = np.arange(24, dtype=np.float32).reshape(3, 8)
    got = nki.jit(_running_sum, mode="simulation")(x)
    np.testing.assert_allclose(got, np.cumsum(2 * x, axis=1))
    start = np.array([[1.0], [-1.0], [5.0]], np.float32)
    got = nki.jit(_running_sum, mode="simulation")(x, start)
    np.testing.assert_allclose(got, np.cumsum(2 * x, axis=1) + start)


def _bf16_activation(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    y = nisa.activation(op=nl.copy, data=nl.load(x), scale=3.0, dtype=nl.bfloat16)
    nl.store(out, y)
    return out


def test_beta1_default_keeps_bf16_results_in_fp32_as_the_beta1_simulator(monkeypatch):
    x = (np.arange(128 * 8, dtype=np.float32).reshape(128, 8) + 0.1) / 7
    monkeypatch.delenv("NKI_PRECISE_FP", raising=False)
    np.testing.assert_allclose(nki.jit(_bf16_activation, mode="simulation")(x), 3 * x, rtol=1e-6)
    monkeypatch.setenv("NKI_PRECISE_FP", "1")  # the hardware's rounding on request
    got = nki.jit(_bf16_activation, mode="simulation")(x)
    np.testing.assert_array_equal(got, (3 * x).astype(nl.bfloat16.storage).astype(np.float32))
    assert not np.allclose(got, 3 * x, rtol=1e-6)
    # the trace counts a bf16 tile's real bytes in either mode
    monkeypatch.setenv("NKI_PRECISE_FP", "0")
    nki.jit(_bf16_activation, mode="simulation")(x)
    (act,) = [r for r in nki.last_result().trace.records if r.opcode == "activation"]
    dst = next(o for o in act.operands if "w" in o.mode)
    assert (dst.dtype, dst.nbytes) == ("bfloat16", 128 * 8 * 2)


def _masked_copy(x, how):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    ip, jf = nl.mgrid[0:x.shape[0], 0:x.shape[1]]
    t = nl.zeros(x.shape, dtype=nl.float32)
    if how == "and":
        t[ip, jf] = nl.load(x[ip, jf], mask=(ip < 4 and jf < 3))
    elif how == "or":
        t[ip, jf] = nl.load(x[ip, jf], mask=(ip < 4 or jf < 3))
    else:
        if ip < 4:  # control flow on an index grid stays an error
            t[ip, jf] = nl.load(x[ip, jf])
    nl.store(out, t)
    return out


def test_python_and_or_between_masks_join_them():
    x = np.ones((8, 6), np.float32)
    ip, jf = np.mgrid[0:8, 0:6]
    got = nki.jit(_masked_copy, mode="simulation")(x, "and")
    np.testing.assert_array_equal(got, ((ip < 4) & (jf < 3)).astype(np.float32))
    got = nki.jit(_masked_copy, mode="simulation")(x, "or")
    np.testing.assert_array_equal(got, ((ip < 4) | (jf < 3)).astype(np.float32))
    with pytest.raises(NkiValidationError, match=r"Control-flow depending on nl\.arange"):
        nki.jit(_masked_copy, mode="simulation")(x, "if")


def _return_the_tile(x):
    t = nl.load(x)
    return nl.multiply(t, 2.0)  # an SBUF tile, returned as the Beta-1 simulator allowed


def test_beta1_kernel_may_return_an_sbuf_tile():
    x = np.arange(24, dtype=np.float32).reshape(3, 8)
    np.testing.assert_array_equal(nki.jit(_return_the_tile, mode="simulation")(x), 2 * x)


def _bank_of(bank_map, idx, pdim_size, fdim_size):  # a leading parameter bound by functools.partial
    return bank_map[idx[0]], 0, 0


def _two_products(a, b):
    import functools

    import neuronxcc.nki.compiler as ncc

    out = nl.ndarray((2, a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    alloc = ncc.psum.alloc(functools.partial(_bank_of, bank_map=(5, 2)))
    ps = nl.ndarray((2, nl.par_dim(a.shape[1]), b.shape[1]), dtype=nl.float32, buffer=alloc)
    for i in nl.affine_range(2):
        ps[i] = nisa.nc_matmul(nl.load(a) * float(i + 1), nl.load(b))
        nl.store(out[i], nl.copy(ps[i]))
    return out


def test_direct_allocation_function_called_with_documented_keywords():
    a = np.arange(64 * 32, dtype=np.float32).reshape(64, 32) / 1000
    b = np.ones((64, 16), np.float32)
    got = nki.jit(_two_products, mode="simulation")(a, b)
    np.testing.assert_allclose(got, np.stack([a.T @ b, 2 * a.T @ b]), rtol=1e-5)


def _ragged_rows(x, use_dma):
    """A fixed [128, 64] tile over an x with fewer rows: the slice runs past x, the mask keeps its rows."""
    out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    t = nl.zeros((128, 64), dtype=nl.float32)
    if use_dma:
        nisa.dma_copy(dst=t, src=x[0:128, 0:64], mask=(i_p < x.shape[0]))
    else:
        t[...] = nl.load(x[0:128, nl.ds(0, 64)], mask=(i_p < x.shape[0]))
    nl.store(out[0:128, 0:64], t)
    return out


@pytest.mark.parametrize("use_dma", [False, True])
def test_masks_cut_slices_that_run_past_the_tensor(use_dma):
    x = np.arange(40 * 64, dtype=np.float32).reshape(40, 64)
    got = nki.jit(_ragged_rows, mode="simulation")(x, use_dma)
    np.testing.assert_array_equal(got[:40], x)
    np.testing.assert_array_equal(got[40:], 0)


def _unmasked_past_end(x):
    out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load(x[0:128, 0:64]))
    return out


def test_slices_past_the_tensor_without_a_mask_stay_out_of_bounds():
    with pytest.raises(NkiValidationError, match=r"Out-of-bound access for tensor `x` on dimension 0"):
        nki.jit(_unmasked_past_end, mode="simulation")(np.zeros((40, 64), np.float32))


def _gather_scatter_middle_dim(x, idx):
    """Rows of the middle dimension chosen by an index tile: x[b, idx_tile, i_f] loaded, then stored back
    at the same positions of the output (the rest of it zero)."""
    B, S, D = x.shape
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    i_s, i_f = nl.mgrid[0:S, 0:D]
    zero = nl.zeros((S, D), dtype=x.dtype)
    it = nl.load(idx)
    i_d = nl.arange(D)[None, :]
    for b in nl.affine_range(B):
        nl.store(out[b, i_s, i_f], zero)
        t = nl.load(x[b, it, i_d])
        nl.store(out[b, it, i_d], nl.multiply(t, 2.0))
    return out


def test_indirect_index_on_a_non_first_hbm_dimension():
    x = np.arange(2 * 16 * 8, dtype=np.float32).reshape(2, 16, 8)
    idx = np.array([[3], [15], [0], [7]], np.int32)
    got = nki.jit(_gather_scatter_middle_dim, mode="simulation")(x, idx)
    want = np.zeros_like(x)
    want[:, idx[:, 0], :] = 2 * x[:, idx[:, 0], :]
    np.testing.assert_array_equal(got, want)
    with pytest.raises(IndexError, match="index 16 at row 1"):  # past the indexed dimension, inside the storage
        nki.jit(_gather_scatter_middle_dim, mode="simulation")(x, np.array([[3], [16]], np.int32))


def _column_max(x):
    out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    m = nl.full((128, 64), -np.inf, dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(x.shape[0] // 128):
        m[...] = nl.loop_reduce(nl.load(x[i * 128:(i + 1) * 128, :]), op=np.max, loop_indices=[i])
    nl.store(out, m)
    return out


def test_loop_reduce_takes_numpy_reductions():
    x = np.random.default_rng(3).standard_normal((384, 64)).astype(np.float32)
    got = nki.jit(_column_max, mode="simulation")(x)
    np.testing.assert_array_equal(got, x.reshape(3, 128, 64).max(axis=0))


def _quarter(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.divide(nl.load(x), 4.0))
    return out


def test_divide_is_not_simulator_only_in_beta1():
    """Beta-1 compiled nl.divide (kernels with it ran on trn1); the current API's flag does not apply."""
    import warnings

    import nki as current_nki
    import nki.isa as cur_isa
    import nki.language as cur_nl

    from nkieval.sim.errors import NkiSimulatorWarning

    x = np.ones((4, 8), np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NkiSimulatorWarning)
        np.testing.assert_array_equal(nki.jit(_quarter, mode="simulation")(x), x / 4)

    @current_nki.jit
    def cur(x):
        out = cur_nl.ndarray(x.shape, dtype=x.dtype, buffer=cur_nl.shared_hbm)
        t = cur_nl.ndarray(x.shape, dtype=x.dtype, buffer=cur_nl.sbuf)
        cur_isa.dma_copy(dst=t, src=x)
        cur_isa.tensor_scalar(dst=t, data=t, op0=cur_nl.divide, operand0=4.0)
        cur_isa.dma_copy(dst=out, src=t)
        return out

    with pytest.warns(NkiSimulatorWarning, match="nl.divide is not a hardware instruction"):
        current_nki.simulate(cur)(x)


def _broadcast_accessed_column(x):
    out = nl.ndarray((2, 128, 8), dtype=x.dtype, buffer=nl.shared_hbm)
    s = nl.ndarray((2, nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)
    b = nl.ndarray((2, nl.par_dim(128), 8), dtype=nl.float32, buffer=nl.sbuf)
    ip, i_f = nl.arange(128)[:, None], nl.arange(8)[None, :]
    for g in nl.affine_range(2):
        s[g, ip, 0] = nl.load(x[g])
        b[g, ip, i_f] = s[g, ip, 0].broadcast_to((128, 8))  # an indexed access, broadcast
        nl.store(out[g], b[g])
    return out


def test_an_indexed_access_broadcasts():
    x = np.arange(256, dtype=np.float32).reshape(2, 128, 1)
    np.testing.assert_array_equal(nki.jit(_broadcast_accessed_column, mode="simulation")(x),
                                  np.broadcast_to(x, (2, 128, 8)))


def _row_of_position(n_cols):
    """Flattened positions 0..127 split into (row, col) with an int32 tile divided by a Python int."""
    def kernel():
        out = nl.ndarray((128, 2), dtype=nl.int32, buffer=nl.shared_hbm)
        pos = nisa.iota(nl.arange(128)[:, None], dtype=nl.int32)
        res = nl.ndarray((128, 2), dtype=nl.int32, buffer=nl.sbuf)
        res[:, 0:1] = nl.floor(pos / n_cols, dtype=nl.int32)  # int32 quotient, then floor
        res[:, 1:2] = nl.mod(pos, n_cols, dtype=nl.int32)
        nl.store(out, res)
        return out
    return kernel


def test_int_tile_divided_by_an_int_truncates_as_the_beta1_simulator():
    """The Beta-1 simulator cast fp32 to integers as NumPy does (toward zero); NKI 0.6's release notes record
    nki.simulate's switch to the hardware's round-to-nearest-even. An int32 ``pos / 38`` is an int32 tile, so
    position 103 (2.71) is row 2 here; rounding to nearest made it row 3."""
    from nkieval.sim.options import SimOptions

    pos = np.arange(128)
    got = nki.jit(_row_of_position(38), mode="simulation")()
    np.testing.assert_array_equal(got[:, 0], pos // 38)
    np.testing.assert_array_equal(got[:, 1], pos % 38)
    # the hardware's rounding, on request (the review's runs)
    rne = nki.jit(_row_of_position(38), mode="simulation", sim_options=SimOptions(float_to_int="rne"))()
    np.testing.assert_array_equal(rne[:, 0], np.rint(pos / 38))


def _placed_past_the_partition(x):
    """A tile placed by direct allocation past the end of an SBUF partition (trn2: 229,376 bytes)."""
    import neuronxcc.nki.compiler as ncc

    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=229376 - 1024))
    t[...] = nl.load(x)
    nl.store(out, nl.multiply(t, 2.0))
    return out


def test_placed_address_past_the_partition_warns_as_the_beta1_simulator_and_is_an_error_when_checked():
    """The direct-allocation guide bounds byte_addr by the partition; the Beta-1 simulator does not check it
    (nki-samples' allocated attention passes its simulation CI with Python-side addresses that grow per unrolled
    iteration), so the front end's default ("warn") warns; capacity_check="error" refuses it."""
    from nkieval.sim.errors import NkiSimulatorWarning
    from nkieval.sim.options import SimOptions

    x = np.arange(128 * 512, dtype=np.float32).reshape(128, 512)
    with pytest.warns(NkiSimulatorWarning, match=r"address range \[228352, 230400\) exceeds SBUF"):
        got = nki.jit(_placed_past_the_partition, mode="simulation")(x)
    np.testing.assert_array_equal(got, 2 * x)
    with pytest.raises(NkiValidationError, match="sbuf-capacity"):
        nki.jit(_placed_past_the_partition, mode="simulation", sim_options=SimOptions(capacity_check="error"))(x)


def _sum_and_max_by_name(x):
    """The documented ``b = nl.loop_reduce(a, ...)`` form twice in one kernel: each call updates the tile its own
    assigned name holds (found from the call's bytecode offset, remembered per offset)."""
    out = nl.ndarray((2, 128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    total = nl.zeros((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    peak = nl.full((128, 64), -np.inf, dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(x.shape[0] // 128):
        block = nl.load(x[i * 128:(i + 1) * 128, :])
        total = nl.loop_reduce(block, op=np.add, loop_indices=[i])
        peak = nl.loop_reduce(block, op=np.max, loop_indices=[i])
    nl.store(out[0], total)
    nl.store(out[1], peak)
    return out


def test_loop_reduce_by_assigned_name_updates_each_calls_own_target():
    x = np.random.default_rng(5).standard_normal((384, 64)).astype(np.float32)
    got = nki.jit(_sum_and_max_by_name, mode="simulation")(x)
    blocks = x.reshape(3, 128, 64)
    np.testing.assert_allclose(got[0], blocks.sum(axis=0), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got[1], blocks.max(axis=0))
