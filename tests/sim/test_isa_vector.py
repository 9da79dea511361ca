"""Vector-engine instructions against NumPy expectations written from their documented semantics."""

import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from isa_testlib import BF16, last_trace, psum, rand, sbuf, simulate

A = rand((128, 64), 1)
B = rand((128, 64), 2)
POS = np.abs(rand((128, 64), 3)) + 0.5
COL = rand((128, 1), 4)
I32 = np.random.default_rng(5).integers(-2**31, 2**31 - 1, (64, 16), dtype=np.int64).astype(np.int32)
J32 = np.random.default_rng(6).integers(-2**31, 2**31 - 1, (64, 16), dtype=np.int64).astype(np.int32)


def _tt(op, dtype=nl.float32):
    def body(a, b):
        d = sbuf(a.shape, dtype)
        nisa.tensor_tensor(dst=d, data1=a, data2=b, op=op)
        return d
    return body


TENSOR_TENSOR = [
    ("add", nl.add, A, B, lambda a, b: a + b),
    ("subtract", nl.subtract, A, B, lambda a, b: a - b),
    ("multiply", nl.multiply, A, B, lambda a, b: a * b),
    ("maximum", nl.maximum, A, B, np.maximum),
    ("minimum", nl.minimum, A, B, np.minimum),
    ("greater", nl.greater, A, B, lambda a, b: (a > b).astype(np.float32)),
    ("power", nl.power, POS, B, lambda a, b: np.power(a, b)),
]


@pytest.mark.parametrize("name,op,a,b,ref", TENSOR_TENSOR, ids=[c[0] for c in TENSOR_TENSOR])
def test_tensor_tensor_float(name, op, a, b, ref):
    out = simulate(_tt(op), a, b)
    np.testing.assert_allclose(out, ref(a, b), rtol=1e-6)
    assert last_trace().records[-2].engine == ("gpsimd" if name == "power" else "vector")


def test_tensor_tensor_bf16_output_rounds_once():
    out = simulate(_tt(nl.add, nl.bfloat16), A, B)
    np.testing.assert_array_equal(out, (A + B).astype(BF16))


def test_tensor_tensor_int32_exact_on_gpsimd():
    out = simulate(_tt(nl.add, nl.int32), I32, J32)
    np.testing.assert_array_equal(out, (I32.astype(np.int64) + J32).astype(np.uint32).view(np.int32))
    assert last_trace().records[-2].engine == "gpsimd"


def test_tensor_tensor_bitvec_is_bit_exact():
    out = simulate(_tt(nl.bitwise_xor, nl.int32), I32, J32)
    np.testing.assert_array_equal(out, I32 ^ J32)


TENSOR_SCALAR = [
    ("mul_add", dict(op0=nl.multiply, operand0=2.0, op1=nl.add, operand1=-1.5), lambda x, c: x * 2 - 1.5),
    ("sub_reversed", dict(op0=nl.subtract, operand0=3.0, reverse0=True), lambda x, c: 3.0 - x),
    ("vector_operand", dict(op0=nl.multiply, operand0="col"), lambda x, c: x * c),
    ("max_then_min", dict(op0=nl.maximum, operand0=-0.5, op1=nl.minimum, operand1=0.5),
     lambda x, c: np.clip(x, -0.5, 0.5)),
]


@pytest.mark.parametrize("name,kw,ref", TENSOR_SCALAR, ids=[c[0] for c in TENSOR_SCALAR])
def test_tensor_scalar(name, kw, ref):
    def body(x, c):
        d = sbuf(x.shape)
        args = {k: (c if v == "col" else v) for k, v in kw.items()}
        nisa.tensor_scalar(dst=d, data=x, **args)
        return d
    np.testing.assert_allclose(simulate(body, A, COL), ref(A, COL), rtol=1e-6)


def test_tensor_scalar_bitvec_shift():
    def body(x):
        d = sbuf(x.shape, nl.int32)
        nisa.tensor_scalar(dst=d, data=x, op0=nl.bitwise_and, operand0=0xFF, op1=nl.left_shift, operand1=4)
        return d
    np.testing.assert_array_equal(simulate(body, I32), (I32 & 0xFF) << 4)


@pytest.mark.parametrize("src_dt,dst_dt", [(np.float32, nl.bfloat16), (np.float32, nl.int32), (np.int32, nl.int32)])
def test_tensor_copy(src_dt, dst_dt):
    x = (A * 1000).astype(src_dt) if src_dt is np.float32 else I32

    def body(t):
        d = sbuf(t.shape, dst_dt)
        nisa.tensor_copy(dst=d, src=t)
        return d
    out = simulate(body, x)
    if dst_dt is nl.int32 and src_dt is np.float32:
        np.testing.assert_array_equal(out, np.rint(x).astype(np.int32))  # RNE
    elif dst_dt is nl.bfloat16:
        np.testing.assert_array_equal(out, x.astype(BF16))
    else:
        np.testing.assert_array_equal(out, x)  # same dtype: bit-exact even above 2**24


def test_memset_and_reciprocal():
    def body(x):
        m = sbuf((128, 8), nl.int16)
        nisa.memset(dst=m, value=7)
        r = sbuf(x.shape)
        nisa.reciprocal(dst=r, data=x)
        return m, r
    m, r = simulate(body, POS)
    np.testing.assert_array_equal(m, np.full((128, 8), 7, np.int16))
    np.testing.assert_allclose(r, 1 / POS, rtol=1e-6)


REDUCE = [
    ("add_last", nl.add, 2, False, lambda x: x.sum(axis=2)),
    ("max_both", nl.maximum, (1, 2), False, lambda x: x.max(axis=(1, 2))[:, None]),
    ("min_negate", nl.minimum, [2], True, lambda x: -x.min(axis=2)),
    ("mult", nl.multiply, -1, False, lambda x: x.prod(axis=2)),
]


@pytest.mark.parametrize("name,op,axis,negate,ref", REDUCE, ids=[c[0] for c in REDUCE])
def test_tensor_reduce(name, op, axis, negate, ref):
    x = rand((32, 4, 8), 7)
    expect = ref(x)

    def body(t):
        d = sbuf(expect.shape)
        nisa.tensor_reduce(dst=d, op=op, data=t, axis=axis, negate=negate)
        return d
    np.testing.assert_allclose(simulate(body, x), expect, rtol=1e-5)


def test_scalar_tensor_tensor():
    def body(x, c, y):
        d = sbuf(x.shape)
        nisa.scalar_tensor_tensor(dst=d, data=x, op0=nl.subtract, operand0=c, op1=nl.multiply, operand1=y)
        return d
    np.testing.assert_allclose(simulate(body, A, COL, B), (A - COL) * B, rtol=1e-6)


def test_scalar_tensor_tensor_reversed():
    def body(x, y):
        d = sbuf(x.shape)
        nisa.scalar_tensor_tensor(dst=d, data=x, op0=nl.multiply, operand0=2.0, op1=nl.subtract, operand1=y,
                                  reverse1=True)
        return d
    np.testing.assert_allclose(simulate(body, A, B), B - 2 * A, rtol=1e-6)


def _scan_ref(d0, d1, init, op0, op1):
    r = np.empty_like(d0)
    carry = np.broadcast_to(np.float32(init), (d0.shape[0],)).astype(np.float32)
    for i in range(d0.shape[1]):
        carry = op1(op0(d0[:, i], carry), d1[:, i]).astype(np.float32)
        r[:, i] = carry
    return r


def test_tensor_tensor_scan_cumsum():
    ones = np.ones((16, 40), np.float32)
    x = rand((16, 40), 8)

    def body(a, b):
        d = sbuf(a.shape)
        nisa.tensor_tensor_scan(dst=d, data0=a, data1=b, initial=0.0, op0=nl.multiply, op1=nl.add)
        return d
    out = simulate(body, ones, x)
    np.testing.assert_allclose(out, np.cumsum(x, axis=1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(out, _scan_ref(ones, x, 0.0, np.multiply, np.add))


def test_tensor_tensor_scan_linear_recurrence_vector_initial():
    decay = np.abs(rand((8, 32), 9)) % 1
    x = rand((8, 32), 10)
    init = rand((8, 1), 11)

    def body(a, b, c):
        d = sbuf(a.shape)
        nisa.tensor_tensor_scan(dst=d, data0=a, data1=b, initial=c, op0=nl.multiply, op1=nl.add)
        return d
    np.testing.assert_array_equal(simulate(body, decay, x, init), _scan_ref(decay, x, init[:, 0], np.multiply, np.add))


def test_bn_stats_bn_aggr_layernorm_statistics():
    x = rand((64, 1000), 12, scale=3.0) + 2.0
    chunks = [(0, 512), (512, 1000)]

    def body(t):
        st = sbuf((64, 6 * len(chunks)))
        for k, (lo, hi) in enumerate(chunks):
            nisa.bn_stats(dst=st[:, 6 * k:6 * k + 6], data=t[:, lo:hi])
        mv = sbuf((64, 2))
        nisa.bn_aggr(dst=mv, data=st)
        return st, mv
    st, mv = simulate(body, x)
    ev = x[:, 0:512][:, 0::2]
    np.testing.assert_allclose(st[:, 0:3], np.stack([np.full(64, 256.0), ev.mean(1), ev.var(1) * 256], 1), rtol=1e-4)
    np.testing.assert_allclose(mv[:, 0], x.mean(1), rtol=1e-5)
    np.testing.assert_allclose(mv[:, 1], x.var(1), rtol=1e-4)


def test_tensor_copy_predicated_tensor_and_scalar():
    pred = (np.random.default_rng(13).random((128, 64)) > 0.5).astype(np.uint8)

    def body(x, y, p):
        nisa.tensor_copy_predicated(dst=x, src=y, predicate=p)
        z = sbuf(y.shape)
        nisa.tensor_copy(dst=z, src=y)
        nisa.tensor_copy_predicated(dst=z, src=-1.0, predicate=p, reverse_pred=True)
        return x, z
    x, z = simulate(body, A, B, pred)
    np.testing.assert_array_equal(x, np.where(pred != 0, B, A))
    np.testing.assert_array_equal(z, np.where(pred == 0, -1.0, B))


def test_select_reduce_accumulates_max_across_instructions():
    p1 = (rand((32, 16), 14) > 0).astype(np.int8)
    p2 = (rand((32, 16), 15) > 0).astype(np.int8)
    x, y = rand((32, 16), 16), rand((32, 16), 17)

    def body(a, b, q1, q2):
        d1, d2, r = sbuf(a.shape), sbuf(a.shape), sbuf((32, 1))
        nisa.select_reduce(dst=d1, predicate=q1, on_true=a, on_false=-5.0, reduce_cmd=nisa.reduce_cmd.reset_reduce)
        nisa.select_reduce(dst=d2, predicate=q2, on_true=b, on_false=-5.0, reduce_cmd=nisa.reduce_cmd.reduce,
                           reduce_res=r)
        return d1, d2, r
    d1, d2, r = simulate(body, x, y, p1, p2)
    e1, e2 = np.where(p1 != 0, x, -5.0), np.where(p2 != 0, y, -5.0)
    np.testing.assert_array_equal(d1, e1)
    np.testing.assert_array_equal(d2, e2)
    np.testing.assert_array_equal(r[:, 0], np.maximum(e1.max(1), e2.max(1)))


def test_max8_and_find_index8():
    x = rand((16, 100), 18)
    x[3, 10] = x[3, 20] = 99.0  # a repeated maximum takes successive occurrences

    def body(t):
        m = sbuf((16, 8))
        nisa.max8(dst=m, src=t)
        idx = sbuf((16, 8), nl.uint32)
        nisa.nc_find_index8(dst=idx, data=t, vals=m)
        return m, idx
    m, idx = simulate(body, x)
    order = np.argsort(-x, axis=1, kind="stable")[:, :8]
    np.testing.assert_array_equal(m, np.take_along_axis(x, order, 1))
    np.testing.assert_array_equal(idx, order.astype(np.uint32))
    assert list(idx[3, :2]) == [10, 20]


def test_find_index8_missing_value_gives_all_ones():
    x = np.arange(16 * 8, dtype=np.float32).reshape(16, 8)
    v = np.full((16, 8), -1.0, np.float32)

    def body(t, w):
        idx = sbuf((16, 8), nl.uint16)
        nisa.nc_find_index8(dst=idx, data=t, vals=w)
        return idx
    assert (simulate(body, x, v) == 0xFFFF).all()


def test_vector_reads_psum():
    def body(a, b):
        s = psum(a.shape)
        nisa.tensor_copy(dst=s, src=a)
        d = sbuf(a.shape)
        nisa.tensor_tensor(dst=d, data1=s, data2=b, op=nl.add)
        return d
    np.testing.assert_array_equal(simulate(body, A, B), A + B)
