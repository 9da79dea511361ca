"""GpSimd instructions (iota, affine_select, tensor_partition_reduce) against NumPy expectations."""

import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from isa_testlib import last_trace, rand, sbuf, simulate


def _affine(p, pattern, offset, cm):
    free = np.zeros([n for _, n in pattern], np.int64)
    for k, (s, n) in enumerate(pattern):
        shape = [1] * len(pattern)
        shape[k] = n
        free = free + np.arange(n).reshape(shape) * s
    return offset + np.arange(p)[:, None] * cm + free.reshape(1, -1)


IOTA = [
    ("row", [[1, 64]], 0, 0, nl.int32),
    ("channel", [[0, 8]], 5, 3, nl.int32),
    ("2d_float", [[16, 4], [1, 16]], -7, 64, nl.float32),
    ("neg_step_bf16", [[-2, 32]], 100, 1, nl.bfloat16),
]


@pytest.mark.parametrize("name,pattern,offset,cm,dtype", IOTA, ids=[c[0] for c in IOTA])
def test_iota(name, pattern, offset, cm, dtype):
    free = int(np.prod([n for _, n in pattern]))

    def body(_x):
        d = sbuf((32, free), dtype)
        nisa.iota(dst=d, pattern=pattern, offset=offset, channel_multiplier=cm)
        return d
    out = simulate(body, np.zeros((1, 1), np.float32))
    np.testing.assert_array_equal(out.astype(np.float64), _affine(32, pattern, offset, cm).astype(out.dtype))
    assert last_trace().records[-2].engine == "gpsimd"


CMP = [("ge_causal", nl.greater_equal), ("equal_diag", nl.equal), ("less", nl.less)]


@pytest.mark.parametrize("name,cmp", CMP, ids=[c[0] for c in CMP])
def test_affine_select_masks(name, cmp):
    s = rand((64, 64), 1)

    def body(x):
        d = sbuf(x.shape)
        # row p keeps column j where p - j (cmp) 0: a causal mask for greater_equal
        nisa.affine_select(dst=d, pattern=[[-1, 64]], channel_multiplier=1, on_true_tile=x,
                           on_false_value=-9984.0, cmp_op=cmp)
        return d
    aff = _affine(64, [[-1, 64]], 0, 1)
    keep = {"ge_causal": aff >= 0, "equal_diag": aff == 0, "less": aff < 0}[name]
    np.testing.assert_array_equal(simulate(body, s), np.where(keep, s, np.float32(-9984.0)))


def test_affine_select_offset():
    s = rand((16, 16), 2)

    def body(x):
        d = sbuf(x.shape)
        nisa.affine_select(dst=d, pattern=[[-1, 16]], channel_multiplier=1, on_true_tile=x, on_false_value=0.0,
                           cmp_op=nl.greater_equal, offset=4)
        return d
    np.testing.assert_array_equal(simulate(body, s), np.where(_affine(16, [[-1, 16]], 4, 1) >= 0, s, 0))


PARTITION_REDUCE = [
    ("add", nl.add, lambda x: x.sum(0, keepdims=True), np.float32),
    ("max", nl.maximum, lambda x: x.max(0, keepdims=True), np.float32),
    ("mean", np.mean, lambda x: x.mean(0, keepdims=True), np.float32),
    ("or", nl.bitwise_or, lambda x: np.bitwise_or.reduce(x, 0, keepdims=True), np.int32),
]


@pytest.mark.parametrize("name,op,ref,dtype", PARTITION_REDUCE, ids=[c[0] for c in PARTITION_REDUCE])
def test_tensor_partition_reduce(name, op, ref, dtype):
    x = rand((128, 24), 3) if dtype is np.float32 else \
        np.random.default_rng(4).integers(0, 2**30, (128, 24)).astype(np.int32)

    def body(t):
        d = sbuf((1, 24), t.dtype)
        nisa.tensor_partition_reduce(dst=d, op=op, data=t)
        return d
    np.testing.assert_allclose(simulate(body, x), ref(x), rtol=1e-5)
