"""Scalar-engine activation instructions against NumPy expectations from the documented semantics."""

import math

import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from isa_testlib import rand, sbuf, simulate

from nkieval.sim.errors import NkiValidationError

X = rand((128, 48), 1)
COL = rand((128, 1), 2)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


ACTIVATIONS = [
    ("exp", nl.exp, np.exp, 1e-6),
    ("tanh", nl.tanh, np.tanh, 1e-6),
    ("sigmoid", nl.sigmoid, _sigmoid, 1e-6),
    ("relu", nl.relu, lambda x: np.maximum(x, 0), 0),
    ("silu", nl.silu, lambda x: x * _sigmoid(x), 1e-6),
    ("gelu", nl.gelu, lambda x: 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2))), 1e-5),
    ("square", nl.square, np.square, 1e-6),
    ("copy", nl.copy, lambda x: x, 0),
]


@pytest.mark.parametrize("name,op,ref,rtol", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activation_functions(name, op, ref, rtol):
    def body(x):
        d = sbuf(x.shape)
        nisa.activation(dst=d, op=op, data=x)
        return d
    np.testing.assert_allclose(simulate(body, X), ref(X.astype(np.float64)), rtol=rtol, atol=1e-7)


@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_activation_scale_and_vector_bias(target):
    def body(x, b):
        d = sbuf(x.shape)
        nisa.activation(dst=d, op=nl.exp, data=x, bias=b, scale=0.5)
        return d
    np.testing.assert_allclose(simulate(body, X, COL, target=target), np.exp(X * 0.5 + COL), rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float16, "bfloat16"])
def test_activation_bias_in_a_float_format(dtype):
    def body(x, b):
        bias = sbuf(b.shape, nl.bfloat16 if dtype == "bfloat16" else nl.float16)
        nisa.tensor_copy(dst=bias, src=b)
        d = sbuf(x.shape)
        nisa.activation(dst=d, op=nl.exp, data=x, bias=bias)
        return d
    want = np.exp(X + COL.astype(np.float16 if dtype != "bfloat16" else np.float32))
    np.testing.assert_allclose(simulate(body, X, COL), want, rtol=1e-2)


@pytest.mark.parametrize("dtype", [nl.int8, nl.int32, nl.uint8])
def test_activation_bias_of_an_integer_type_is_refused(dtype):
    """NKI's activation-bias-invalid-type: the bias vector is float32, float16 or bfloat16."""
    def body(x, b):
        bias = sbuf(b.shape, dtype)
        nisa.memset(dst=bias, value=1)
        d = sbuf(x.shape)
        nisa.activation(dst=d, op=nl.exp, data=x, bias=bias)
        return d
    with pytest.raises(NkiValidationError, match="bias must be float32, float16 or bfloat16") as ei:
        simulate(body, X, COL)
    assert ei.value.rule == "dtype"


def test_activation_vector_scale_and_scalar_bias_on_trn2():
    def body(x, s):
        d = sbuf(x.shape)
        nisa.activation(dst=d, op=nl.copy, data=x, bias=1.0, scale=s)
        return d
    np.testing.assert_allclose(simulate(body, X, COL), X * COL + 1.0, rtol=1e-6)


def test_activation_reduce_registers_persist_across_instructions():
    a, b = rand((64, 32), 3), rand((64, 16), 4)

    def body(x, y):
        dx, dy, r = sbuf(x.shape), sbuf(y.shape), sbuf((64, 1))
        nisa.activation(dst=dx, op=nl.exp, data=x, reduce_op=nl.add, reduce_cmd=nisa.reduce_cmd.reset_reduce)
        nisa.activation(dst=dy, op=nl.exp, data=y, reduce_op=nl.add, reduce_cmd=nisa.reduce_cmd.reduce,
                        reduce_res=r)
        return r
    r = simulate(body, a, b)
    np.testing.assert_allclose(r[:, 0], np.exp(a).sum(1) + np.exp(b).sum(1), rtol=1e-5)


def test_activation_reset_then_idle_readout_is_zero():
    def body(x):
        d, r = sbuf(x.shape), sbuf((128, 1))
        nisa.activation(dst=d, op=nl.exp, data=x, reduce_cmd=nisa.reduce_cmd.reset_reduce)
        nisa.activation(dst=d, op=nl.exp, data=x, reduce_cmd=nisa.reduce_cmd.reset, reduce_res=r)
        return r
    assert (simulate(body, X) == 0).all()


def test_activation_reduce():
    def body(x):
        d, r = sbuf(x.shape), sbuf((128, 1))
        nisa.activation_reduce(dst=d, op=nl.square, data=x, reduce_op=nl.add, reduce_res=r, scale=2.0)
        return d, r
    d, r = simulate(body, X)
    np.testing.assert_allclose(d, (2 * X) ** 2, rtol=1e-6)
    np.testing.assert_allclose(r[:, 0], ((2 * X) ** 2).sum(1), rtol=1e-5)


def test_activation_out_of_range_input_warns():
    big = np.full((4, 4), 10.0, np.float32)

    def body(x):
        d = sbuf(x.shape)
        nisa.activation(dst=d, op=nl.sin, data=x)
        return d
    with pytest.warns(UserWarning, match="outside the documented valid range"):
        simulate(body, big)
