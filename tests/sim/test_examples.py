"""The bundled example kernels match their NumPy references."""

import ml_dtypes
import nki
import numpy as np
import pytest

from nkieval.examples import kernels as ex


@pytest.mark.parametrize("target", ["trn1", "trn2", "trn3"])
def test_tiled_add_ragged(target):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((300, 70), dtype=np.float32)
    b = rng.standard_normal((300, 70), dtype=np.float32)
    out = nki.simulate(ex.tiled_add, target=target)(a, b)
    np.testing.assert_array_equal(out, a + b)
    tr = nki.last_result().trace
    assert tr.target == target
    assert tr.opcode_counts() == {"dma_copy": 9, "tensor_tensor": 3}


def test_matmul_bf16_psum_accumulation():
    rng = np.random.default_rng(2)
    a_t = rng.standard_normal((384, 128)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((384, 512)).astype(ml_dtypes.bfloat16)
    out = ex.matmul_bf16(a_t, b)
    np.testing.assert_allclose(out, ex.matmul_ref(a_t, b), rtol=1e-5, atol=1e-4)
    mm = [r for r in nki.last_result().trace.records if r.opcode == "nc_matmul"]
    assert [r.attrs["accumulated"] for r in mm] == [False, True, True]


def test_softmax_rows():
    x = (np.random.default_rng(3).standard_normal((130, 257)) * 8).astype(np.float32)
    np.testing.assert_allclose(ex.row_softmax(x), ex.row_softmax_ref(x), rtol=2e-6, atol=1e-7)
