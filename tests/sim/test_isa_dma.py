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


def _gather_kernel(oob):
    def kernel(data, indices):
        p, f = indices.shape[0], data.shape[1]
        idx = nl.ndarray((p, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=idx, src=indices)
        dst = nl.ndarray((p, f), dtype=data.dtype, buffer=nl.sbuf)
        nisa.memset(dst=dst, value=-7)
        nisa.dma_copy(dst=dst, src=data.ap(pattern=[[f, p], [1, f]], vector_offset=idx, indirect_dim=0),
                      oob_mode=oob)
        out = nl.ndarray((p, f), dtype=data.dtype, buffer=nl.shared_hbm)
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
