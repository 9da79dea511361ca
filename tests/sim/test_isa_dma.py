"""DMA instructions (dma_copy incl. indirect gather/scatter, dma_transpose) against NumPy."""

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from isa_testlib import BF16, last_trace, rand


@pytest.mark.parametrize("dst_dtype", [nl.bfloat16, nl.int8, nl.float8_e5m2])
def test_dma_copy_casts_through_fp32(dst_dtype):
    x = rand((128, 64), 1, scale=50.0)

    def kernel(a):
        t = nl.ndarray(a.shape, dtype=dst_dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        o = nl.ndarray(a.shape, dtype=dst_dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=o, src=t)
        return o
    out = nki.simulate(kernel, target="trn2")(x)
    if dst_dtype is nl.int8:
        np.testing.assert_array_equal(out, np.clip(np.rint(x), -128, 127).astype(np.int8))
    elif dst_dtype is nl.bfloat16:
        np.testing.assert_array_equal(out, x.astype(BF16))
    else:
        m = float(ml_dtypes.finfo(ml_dtypes.float8_e5m2).max)
        np.testing.assert_array_equal(out, np.clip(x, -m, m).astype(ml_dtypes.float8_e5m2))
    assert last_trace().records[0].attrs["cast"] is True


def _gather_kernel(oob, dtype=None):
    """Rows of ``data`` gathered by an index tile (``dtype``: the destination's, if not the table's: a cast)."""
    def kernel(data, indices):
        p, f = indices.shape[0], data.shape[1]
        dt = data.dtype if dtype is None else dtype
        idx = nl.ndarray((p, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=idx, src=indices)
        dst = nl.ndarray((p, f), dtype=dt, buffer=nl.sbuf)
        nisa.memset(dst=dst, value=-7)
        nisa.dma_copy(dst=dst, src=data.ap(pattern=[[f, p], [1, f]], vector_offset=idx, indirect_dim=0),
                      oob_mode=oob)
        out = nl.ndarray((p, f), dtype=dt, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=dst)
        return out
    return kernel


def test_indirect_gather():
    data = np.random.default_rng(2).integers(-2**31, 2**31 - 1, (50, 8), dtype=np.int64).astype(np.int32)
    idx = np.array([[3], [49], [0], [3]], dtype=np.int32)
    out = nki.simulate(_gather_kernel(nisa.oob_mode.error))(data, idx)
    np.testing.assert_array_equal(out, data[idx[:, 0]])


def test_indirect_gather_oob_skip_keeps_dst_bits():
    data = np.random.default_rng(3).integers(-2**31, 2**31 - 1, (10, 8), dtype=np.int64).astype(np.int32)
    idx = np.array([[1], [10], [9]], dtype=np.int32)
    out = nki.simulate(_gather_kernel(nisa.oob_mode.skip))(data, idx)
    np.testing.assert_array_equal(out[[0, 2]], data[[1, 9]])
    np.testing.assert_array_equal(out[1], np.full(8, -7, np.int32))


def test_indirect_scatter_updates_input_in_place():
    src = rand((4, 6), 4)
    idx = np.array([[7], [0], [2], [5]], dtype=np.int32)
    table = np.zeros((8, 6), np.float32)

    def kernel(s, indices, out):
        t = nl.ndarray(s.shape, dtype=s.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=s)
        i = nl.ndarray((4, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=i, src=indices)
        nisa.dma_copy(dst=out.ap(pattern=[[6, 4], [1, 6]], vector_offset=i, indirect_dim=0), src=t)

    nki.simulate(kernel)(src, idx, table)
    expect = np.zeros((8, 6), np.float32)
    expect[idx[:, 0]] = src
    np.testing.assert_array_equal(table, expect)


@pytest.mark.parametrize("shape", [(64, 32), (4, 8, 16)])
def test_dma_transpose(shape):
    x = rand(shape, 5).astype(BF16)
    perm = {2: (1, 0), 3: (2, 1, 0)}[len(shape)]

    def kernel(a):
        t = nl.ndarray(tuple(a.shape[i] for i in perm), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_transpose(dst=t, src=a)
        o = nl.ndarray(t.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=o, src=t)
        return o
    np.testing.assert_array_equal(nki.simulate(kernel, target="trn2")(x), np.transpose(x, perm))


def test_dma_hbm_to_hbm_and_strided_slices():
    x = rand((256, 40), 6)

    def kernel(a):
        o = nl.ndarray((128, 20), dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=o, src=a[0:256:2, 0:40:2])
        return o
    np.testing.assert_array_equal(nki.simulate(kernel)(x), x[::2, ::2])


# (the row-wise gather's kernel-level cases; its unit cases are in test_gather_rows.py)
def test_gather_with_cast_and_its_trace():
    """A bf16 table gathered into fp32 (the cast path), and the DMA's trace operands (the index tile is one)."""
    rng = np.random.default_rng(5)
    data = rng.standard_normal((40, 24)).astype(ml_dtypes.bfloat16)
    idx = np.array([[39], [0], [17], [17], [2]], dtype=np.int32)
    out = nki.simulate(_gather_kernel(nisa.oob_mode.error, nl.float32))(data, idx)
    np.testing.assert_array_equal(out, data[idx[:, 0]].astype(np.float32))
    rec = [r for r in nki.last_result().trace.records if r.opcode == "dma_copy"][1]
    assert [o.role for o in rec.operands] == ["dst", "vector_offset", "src"]
    assert rec.attrs["cast"] is True and rec.attrs["indirect"] is True


def test_gather_out_of_bounds_row_still_skipped_or_raised():
    """A row past the table takes the element-offset path: skipped rows keep the destination, error mode raises."""
    data = np.arange(10 * 4, dtype=np.float32).reshape(10, 4)
    idx = np.array([[9], [10], [0]], dtype=np.int32)
    out = nki.simulate(_gather_kernel(nisa.oob_mode.skip))(data, idx)
    np.testing.assert_array_equal(out[[0, 2]], data[[9, 0]])
    np.testing.assert_array_equal(out[1], np.full(4, -7, np.float32))
    try:
        nki.simulate(_gather_kernel(nisa.oob_mode.error))(data, idx)
    except Exception as e:  # the SDK's negative tests expect IndexError with NumPy's message
        assert isinstance(e, IndexError) and "out of bounds" in str(e)
    else:
        raise AssertionError("an out-of-bounds gather row was not refused")
