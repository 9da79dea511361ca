"""Indirect DMA transposes (a gather-transpose: ``dma_transpose`` of an ``.ap(vector_offset=...)`` source).

The documented operation (nki.isa.dma_transpose, "DMA Indirect Transpose Constraints"):
``flat_indices = indices.T.flatten()[:src.shape[0]]``, ``gathered = src[flat_indices, :]``, ``dst = gathered.T``
(4-D: the [3, 1, 2, 0] permutation). The simulator used to transpose the view's placeholder instead: zeros, with no
error, which made a paged-KV attention kernel's scores all zero.
"""

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from nkieval.sim.errors import NkiIndexError, NkiValidationError

BF16 = ml_dtypes.bfloat16
RNG = np.random.default_rng(31)


def _gather_transpose_2d(rows: int, cols: int):
    @nki.jit
    def kernel(src, idx):
        out = nl.ndarray((cols, rows), dtype=src.dtype, buffer=nl.shared_hbm)
        ix = nl.ndarray(idx.shape, dtype=idx.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ix, src=idx)
        t = nl.ndarray((cols, rows), dtype=src.dtype, buffer=nl.sbuf)
        nisa.dma_transpose(dst=t, src=src.ap(pattern=[[cols, rows], [1, cols]], vector_offset=ix, indirect_dim=0),
                           axes=(1, 0))
        nisa.dma_copy(dst=out, src=t)
        return out

    return kernel


@pytest.mark.parametrize("n_idx_cols", [1, 2])
def test_a_gather_transpose_reads_the_indexed_rows_column_by_column(n_idx_cols):
    rows, cols = 128 * n_idx_cols, 64
    src = RNG.standard_normal((1000, cols)).astype(BF16)
    idx = RNG.permutation(1000)[:rows].astype(np.uint32).reshape(n_idx_cols, 128).T.copy()  # [128, N]
    got = np.asarray(_gather_transpose_2d(rows, cols)(src, idx))
    flat = idx.T.reshape(-1)[:rows]  # (the documented column-major order of a [128, N] index tile)
    np.testing.assert_array_equal(got.view(np.uint16), src[flat].T.view(np.uint16))


def test_a_four_dimensional_gather_transpose_of_cache_blocks():
    # a paged cache [blocks, 1, block_len, d]: 128 blocks gathered by a block table and laid out [d, 1, block_len, 128]
    blocks, block_len, d = 300, 4, 32

    @nki.jit
    def kernel(cache, table):
        out = nl.ndarray((d, 1, block_len, 128), dtype=cache.dtype, buffer=nl.shared_hbm)
        ix = nl.ndarray((128, 1), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.dma_copy(dst=ix, src=table)
        t = nl.ndarray((d, 1, block_len, 128), dtype=cache.dtype, buffer=nl.sbuf)
        view = cache.reshape((blocks, 1, block_len, d)).ap(
            [[block_len * d, 128], [1, 1], [d, block_len], [1, d]], offset=0, vector_offset=ix, indirect_dim=0)
        nisa.dma_transpose(dst=t, src=view, axes=(3, 1, 2, 0), dge_mode=nisa.dge_mode.swdge)
        nisa.dma_copy(dst=out, src=t)
        return out

    cache = RNG.standard_normal((blocks, block_len * d)).astype(BF16)
    table = RNG.permutation(blocks)[:128].astype(np.uint32).reshape(128, 1)
    got = np.asarray(kernel(cache, table))
    want = cache.reshape(blocks, 1, block_len, d)[table[:, 0]].transpose(3, 1, 2, 0)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


def test_an_index_past_the_source_is_an_index_error_or_skipped():
    rows, cols = 128, 16

    def kernel_with(mode):
        @nki.jit
        def kernel(src, idx):
            out = nl.ndarray((cols, rows), dtype=src.dtype, buffer=nl.shared_hbm)
            ix = nl.ndarray((rows, 1), dtype=nl.uint32, buffer=nl.sbuf)
            nisa.dma_copy(dst=ix, src=idx)
            t = nl.ndarray((cols, rows), dtype=src.dtype, buffer=nl.sbuf)
            nisa.memset(dst=t, value=7.0)
            nisa.dma_transpose(dst=t, src=src.ap(pattern=[[cols, rows], [1, cols]], vector_offset=ix,
                                                 indirect_dim=0), axes=(1, 0), oob_mode=mode)
            nisa.dma_copy(dst=out, src=t)
            return out

        return kernel

    src = RNG.standard_normal((200, cols)).astype(BF16)
    idx = np.arange(rows, dtype=np.uint32).reshape(rows, 1)
    idx[5] = 10_000
    with pytest.raises(NkiIndexError, match="out of bounds"):
        kernel_with(nisa.oob_mode.error)(src, idx)
    got = np.asarray(kernel_with(nisa.oob_mode.skip)(src, idx)).astype(np.float32)
    keep = np.arange(rows) != 5
    np.testing.assert_array_equal(got[:, keep], src[idx[keep, 0]].T.astype(np.float32))
    np.testing.assert_array_equal(got[:, 5], np.full(cols, 7.0, np.float32))  # (the skipped row: dst untouched)


@pytest.mark.parametrize(("dtype", "idx_rows", "idx_dtype", "rule"), [
    (np.float32, 128, np.uint32, "dtype"),  # a 4-byte source
    (BF16, 8, np.uint32, "shape-mismatch"),  # fewer than 16 index rows
    (BF16, 128, np.int32, "shape-mismatch"),  # a signed index tile
])
def test_the_documented_constraints_of_an_indirect_transpose(dtype, idx_rows, idx_dtype, rule):
    rows, cols = 128, 16
    src = np.zeros((256, cols), dtype)
    idx = np.zeros((idx_rows, rows // idx_rows if idx_rows < 128 else 1), idx_dtype)
    with pytest.raises(NkiValidationError, match=rf"indirect dma_transpose: .*\[rule {rule}\]"):
        _gather_transpose_2d(rows, cols)(src, idx)


def test_a_compute_instruction_given_a_dma_indirect_view_is_refused_not_fed_its_placeholder():
    @nki.jit
    def kernel(x, table):
        out = nl.ndarray((128, 8), dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((128, 8), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        ix = nl.ndarray((128, 1), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.dma_copy(dst=ix, src=table)
        u = nl.ndarray((128, 8), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=u, src=t.ap([[8, 128], [1, 8]], vector_offset=ix, indirect_dim=0))
        nisa.dma_copy(dst=out, src=u)
        return out

    with pytest.raises(NkiValidationError, match=r"tensor_copy: reads an indirect view .*\[rule indexing\]"):
        kernel(np.ones((128, 8), np.float32), np.arange(128, dtype=np.uint32).reshape(128, 1))
