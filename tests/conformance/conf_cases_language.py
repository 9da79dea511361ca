"""Conformance table for ``nki.language`` (value-returning ``nl.*`` calls, creation, loops, programs).

Element-wise operators are generated from one table of NumPy references (documented
semantics; the activation approximations use their standard closed forms). Beta-1 rows run
the same calls through ``neuronxcc.nki`` when that front end is importable.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import nki.isa as nisa
import nki.language as nl
import numpy as np
from conf_kit import Case, Illegal, load, randint, randn, ret, tile

P, F = 32, 64
X = randn(P, F)
Y = randn(P, F)
POS = (np.abs(randn(P, F)) + 0.5).astype(np.float32)
SMALL = randn(P, F, scale=0.5)
I1 = randint(-1000, 1000, P, F)
I2 = randint(0, 8, P, F)
_erf = np.vectorize(math.erf)


def _sig(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x.astype(np.float64)))


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)))


UNARY: dict[str, tuple[Callable[[np.ndarray], np.ndarray], np.ndarray, float]] = {
    # name: (reference, input, rtol)
    "abs": (np.abs, X, 0), "negative": (np.negative, X, 0), "sign": (np.sign, X, 0), "square": (np.square, X, 1e-6),
    "exp": (np.exp, X, 1e-6), "log": (np.log, POS, 1e-6), "sqrt": (np.sqrt, POS, 1e-6),
    "rsqrt": (lambda x: 1 / np.sqrt(x), POS, 1e-6), "reciprocal": (lambda x: 1 / x, POS, 1e-6),
    "sin": (np.sin, X, 1e-5), "cos": (np.cos, X, 1e-5), "tan": (np.tan, SMALL, 1e-4),
    "arctan": (np.arctan, X, 1e-6), "tanh": (np.tanh, X, 1e-6), "ceil": (np.ceil, X * 4, 0),
    "floor": (np.floor, X * 4, 0), "trunc": (np.trunc, X * 4, 0), "relu": (lambda x: np.maximum(x, 0), X, 0),
    "sigmoid": (_sig, X, 1e-6), "silu": (lambda x: x * _sig(x), X, 1e-6),
    "silu_dx": (lambda x: _sig(x) * (1 + x * (1 - _sig(x))), X, 1e-5),
    "gelu": (_gelu, X, 1e-5),
    "gelu_dx": (lambda x: 0.5 * (1 + _erf(x / math.sqrt(2))) + x * np.exp(-x * x / 2) / math.sqrt(2 * math.pi), X,
                1e-5),
    "gelu_apprx_tanh": (lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))), X, 1e-5),
    "gelu_apprx_sigmoid": (lambda x: x * _sig(1.702 * x), X, 1e-5),
    "gelu_apprx_sigmoid_dx": (lambda x: _sig(1.702 * x) + 1.702 * x * _sig(1.702 * x) * (1 - _sig(1.702 * x)), X,
                              1e-5),
    "softplus": (lambda x: np.log1p(np.exp(x)), X, 1e-5), "mish": (lambda x: x * np.tanh(np.log1p(np.exp(x))), X, 1e-5),
    "erf": (_erf, X, 1e-6), "erf_dx": (lambda x: 2 / math.sqrt(math.pi) * np.exp(-x * x), X, 1e-6),
    "logical_not": (lambda x: (x == 0).astype(np.float32), np.round(X), 0),
    "invert": (np.invert, I1, 0),
}

BINARY: dict[str, tuple[Callable[[np.ndarray, np.ndarray], np.ndarray], np.ndarray, np.ndarray]] = {
    "add": (np.add, X, Y), "subtract": (np.subtract, X, Y), "multiply": (np.multiply, X, Y),
    "divide": (np.divide, X, POS), "maximum": (np.maximum, X, Y), "minimum": (np.minimum, X, Y),
    "power": (np.power, POS, Y), "fmod": (np.fmod, X * 5, POS), "mod": (np.mod, X * 5, POS),
    "equal": (lambda a, b: (a == b).astype(np.float32), np.round(X), np.round(Y)),
    "not_equal": (lambda a, b: (a != b).astype(np.float32), np.round(X), np.round(Y)),
    "greater": (lambda a, b: (a > b).astype(np.float32), X, Y),
    "greater_equal": (lambda a, b: (a >= b).astype(np.float32), np.round(X), np.round(Y)),
    "less": (lambda a, b: (a < b).astype(np.float32), X, Y),
    "less_equal": (lambda a, b: (a <= b).astype(np.float32), np.round(X), np.round(Y)),
    "logical_and": (lambda a, b: np.logical_and(a, b).astype(np.float32), np.round(X), np.round(Y)),
    "logical_or": (lambda a, b: np.logical_or(a, b).astype(np.float32), np.round(X), np.round(Y)),
    "logical_xor": (lambda a, b: np.logical_xor(a, b).astype(np.float32), np.round(X), np.round(Y)),
    "bitwise_and": (np.bitwise_and, I1, I2), "bitwise_or": (np.bitwise_or, I1, I2),
    "bitwise_xor": (np.bitwise_xor, I1, I2), "left_shift": (np.left_shift, I1, I2),
    "right_shift": (lambda a, b: (a.astype(np.uint32) >> b.astype(np.uint32)).astype(np.int32), np.abs(I1), I2),
    "abs_max": (lambda a, b: np.where(np.abs(a) >= np.abs(b), a, b), X, Y),
    "abs_min": (lambda a, b: np.where(np.abs(a) <= np.abs(b), a, b), X, Y),
}
_V4_ONLY = {"abs_max", "abs_min"}


def _unary_kernel(name: str) -> Callable[..., Any]:
    def kernel(x):
        return ret(getattr(nl, name)(load(x)))

    return kernel


def _binary_kernel(name: str) -> Callable[..., Any]:
    def kernel(x, y):
        return ret(getattr(nl, name)(load(x), load(y)))

    return kernel


def _ref1(fn: Callable[..., Any]) -> Callable[..., Any]:
    return lambda x: np.asarray(fn(x.astype(np.float64) if x.dtype.kind == "f" else x)).astype(
        np.float32 if x.dtype.kind == "f" else x.dtype)


CASES: list[Case] = [
    Case(f"nl.{n}", _unary_kernel(n), (x,), _ref1(fn), rtol=rt, atol=1e-6) for n, (fn, x, rt) in UNARY.items()
] + [
    Case(f"nl.{n}", _binary_kernel(n), (a, b), fn, rtol=1e-5, atol=1e-6, target="trn3" if n in _V4_ONLY else "trn2")
    for n, (fn, a, b) in BINARY.items()
]


# ---- creation, movement, programs --------------------------------------------------------------------
def k_load_store(x):
    o = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(o, nl.load(x))
    return o


def k_copy(x):
    return ret(nl.copy(load(x), dtype=nl.bfloat16))


def k_creation(x):
    z = nl.zeros((4, 8), dtype=nl.float32)
    o = nl.ones((4, 8), dtype=nl.int32)
    f = nl.full((4, 8), 3.5, dtype=nl.float32)
    zl = nl.zeros_like(f)
    e = nl.empty_like(f)
    nisa.memset(dst=e, value=1.0)
    n = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=n, value=-2.0)
    return ret(z), ret(o), ret(f), ret(zl), ret(e), ret(n)


def _creation_ref(x: np.ndarray) -> tuple[np.ndarray, ...]:
    return (np.zeros((4, 8)), np.ones((4, 8), np.int32), np.full((4, 8), 3.5), np.zeros((4, 8)), np.ones((4, 8)),
            np.full((4, 8), -2.0))


def _loop_kernel(rng: Callable[..., Any]) -> Callable[..., Any]:
    def kernel(x):
        o = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        for i in rng(x.shape[1] // 16):
            t = nl.load(x[:, nl.ds(i * 16, 16)])
            nl.store(o[:, i * 16:(i + 1) * 16], nl.multiply(t, float(i + 1)))
        return o

    return kernel


def _loop_ref(x: np.ndarray) -> np.ndarray:
    return x * np.repeat(np.arange(1, x.shape[1] // 16 + 1), 16)[None, :]


def k_programs(x):
    ids = tile((1, 3))
    nisa.memset(dst=ids[:, 0:1], value=float(nl.program_id(0)))
    nisa.memset(dst=ids[:, 1:2], value=float(nl.num_programs()))
    nisa.memset(dst=ids[:, 2:3], value=float(nl.program_ndim()))
    out = nl.ndarray((2, 3), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out[nl.program_id(0):nl.program_id(0) + 1, :], src=ids)
    return out


def k_matmul(x, y):
    return ret(nl.matmul(load(x), load(y), transpose_x=True))


def k_transpose(x):
    return ret(nl.transpose(load(x)))


def _reduce_kernel(name: str, **kw: Any) -> Callable[..., Any]:
    def kernel(x):
        return ret(getattr(nl, name)(load(x), axis=1, **kw))

    return kernel


def k_where(x, y):
    a, b = load(x), load(y)
    return ret(nl.where(nl.greater(a, b), a, b))


def k_broadcast(x):
    return ret(nl.broadcast_to(load(x[:, 0:1]), (x.shape[0], 16)))


def k_expand(x):
    t = load(x)
    return ret(nl.expand_dims(t, 2))


def k_identity(x):
    return ret(nl.copy(nl.shared_identity_matrix(16, dtype=nl.float32)))


def k_device_print(x):
    t = load(x)
    nl.device_print("conformance", t)
    return ret(t)


def k_tile_size(x):
    return (nl.tile_size.pmax, nl.tile_size.psum_bank_fmax, nl.tile_size.gemm_stationary_fmax,
            nl.tile_size.gemm_moving_fmax)


def k_buffers(x):
    t = tile((2, 2))
    return (nl.is_sbuf(t.buffer), nl.is_psum(t.buffer), nl.is_hbm(x.buffer), nl.is_on_chip(t.buffer))


def k_softmax(x):
    return ret(nl.softmax(load(x), axis=1))


def k_rms_norm(x, w):
    return ret(nl.rms_norm(load(x), load(w), axis=1))


def k_fori(x, n):
    nt = load(n)
    ub = nisa.register_alloc()
    nisa.register_load(ub, nt)
    acc = nl.zeros((1, 8), dtype=nl.float32)
    data = load(x)

    def body(i):
        row = tile((1, 8))
        nisa.dma_copy(dst=row, src=x.ap([[8, 1], [1, 8]], scalar_offset=i, indirect_dim=0))
        nisa.tensor_tensor(dst=acc, data1=acc, data2=row, op=nl.add)

    nl.fori_loop(0, ub, body)
    del data
    return ret(acc)


def k_while(x, n):
    cnt = load(n)
    one = nl.ones((1, 1), dtype=nl.int32)
    acc = nl.zeros((1, 1), dtype=nl.float32)
    r = nisa.register_alloc()
    nisa.register_load(r, cnt)

    def body(r):
        nisa.tensor_scalar(dst=acc, data=acc, op0=nl.add, operand0=2.0)
        nisa.tensor_tensor(dst=cnt, data1=cnt, data2=one, op=nl.subtract)
        nisa.register_load(r, cnt)
        return r

    nl.while_loop(r, body)
    return ret(acc)


def k_dynamic_range(x, n):
    nt = load(n)
    ub = nisa.register_alloc()
    nisa.register_load(ub, nt)
    acc = nl.zeros((1, 1), dtype=nl.float32)
    for _ in nl.dynamic_range(1, ub):
        nisa.tensor_scalar(dst=acc, data=acc, op0=nl.add, operand0=1.0)
    return ret(acc)


def k_no_reorder(x):
    with nl.no_reorder():
        a = nl.full((4, 8), 3.0, dtype=nl.float32)
        b = nl.full((4, 8), 2.0, dtype=nl.float32)
        c = nl.add(a, b)
    return ret(c)


W1 = randn(1, F)
CASES += [
    Case("nl.load", k_load_store, (X,), lambda x: x),
    Case("nl.store", k_load_store, (I1,), lambda x: x),
    Case("nl.copy", k_copy, (X,), lambda x: x.astype(np.float32).astype("bfloat16")),
    Case("nl.zeros", k_creation, (X,), _creation_ref), Case("nl.ones", k_creation, (X,), _creation_ref),
    Case("nl.full", k_creation, (X,), _creation_ref), Case("nl.zeros_like", k_creation, (X,), _creation_ref),
    Case("nl.empty_like", k_creation, (X,), _creation_ref), Case("nl.ndarray", k_creation, (X,), _creation_ref),
    Case("nl.affine_range", _loop_kernel(nl.affine_range), (X,), _loop_ref),
    Case("nl.sequential_range", _loop_kernel(nl.sequential_range), (X,), _loop_ref),
    Case("nl.static_range", _loop_kernel(nl.static_range), (X,), _loop_ref),
    Case("nl.ds", _loop_kernel(range), (X,), _loop_ref),
    Case("nl.range", _loop_kernel(nl.range), (X,), _loop_ref),
    Case("nl.program_id", k_programs, (X,), lambda x: np.array([[0, 2, 1], [1, 2, 1]], np.float32), lnc=2),
    Case("nl.num_programs", k_programs, (X,), lambda x: np.array([[0, 2, 1], [1, 2, 1]], np.float32), lnc=2),
    Case("nl.program_ndim", k_programs, (X,), lambda x: np.array([[0, 2, 1], [1, 2, 1]], np.float32), lnc=2),
    Case("nl.matmul", k_matmul, (randn(64, 32), randn(64, 48)), lambda x, y: x.T @ y, rtol=1e-5, atol=1e-5),
    Case("nl.transpose", k_transpose, (X,), lambda x: x.T),
    Case("nl.sum", _reduce_kernel("sum"), (X,), lambda x: x.sum(1, keepdims=True), rtol=1e-5, atol=1e-5),
    Case("nl.max", _reduce_kernel("max"), (X,), lambda x: x.max(1, keepdims=True)),
    Case("nl.min", _reduce_kernel("min"), (X,), lambda x: x.min(1, keepdims=True)),
    Case("nl.mean", _reduce_kernel("mean"), (X,), lambda x: x.mean(1, keepdims=True), rtol=1e-5, atol=1e-6),
    Case("nl.prod", _reduce_kernel("prod"), (POS[:, :8],), lambda x: x.prod(1, keepdims=True), rtol=1e-5),
    Case("nl.var", _reduce_kernel("var"), (X,), lambda x: x.var(1, keepdims=True), rtol=1e-4, atol=1e-5),
    Case("nl.all", _reduce_kernel("all"), (np.round(POS),), lambda x: np.all(x != 0, 1, keepdims=True)
         .astype(np.float32)),
    Case("nl.where", k_where, (X, Y), lambda x, y: np.maximum(x, y)),
    Case("nl.broadcast_to", k_broadcast, (X,), lambda x: np.repeat(x[:, :1], 16, 1)),
    Case("nl.expand_dims", k_expand, (X,), lambda x: x[:, :, None]),
    Case("nl.shared_identity_matrix", k_identity, (X,), lambda x: np.eye(16, dtype=np.float32)),
    Case("nl.device_print", k_device_print, (X,), lambda x: x),
    Case("nl.tile_size", k_tile_size, (X,), lambda x: (128, 512, 128, 512)),
    Case("nl.is_sbuf", k_buffers, (X,), lambda x: (True, False, True, True)),
    Case("nl.is_psum", k_buffers, (X,), lambda x: (True, False, True, True)),
    Case("nl.is_hbm", k_buffers, (X,), lambda x: (True, False, True, True)),
    Case("nl.is_on_chip", k_buffers, (X,), lambda x: (True, False, True, True)),
    Case("nl.softmax", k_softmax, (X,), lambda x: np.exp(x - x.max(1, keepdims=True)) /
         np.exp(x - x.max(1, keepdims=True)).sum(1, keepdims=True), rtol=1e-5, atol=1e-6),
    Case("nl.rms_norm", k_rms_norm, (X, np.repeat(W1, P, 0)),
         lambda x, w: x / np.sqrt((x * x).mean(1, keepdims=True) + 1e-6) * w, rtol=1e-4, atol=1e-5),
    Case("nl.fori_loop", k_fori, (randn(6, 8), np.array([[4]], np.int32)), lambda x, n: x[:4].sum(0, keepdims=True),
         rtol=1e-5, atol=1e-6),
    Case("nl.while_loop", k_while, (X, np.array([[5]], np.int32)), lambda x, n: np.array([[10.0]])),
    Case("nl.while_loop", k_while, (X, np.array([[0]], np.int32)), lambda x, n: np.array([[0.0]]), id="zero-trip"),
    Case("nl.dynamic_range", k_dynamic_range, (X, np.array([[7]], np.int32)), lambda x, n: np.array([[6.0]])),
    Case("nl.no_reorder", k_no_reorder, (X,), lambda x: np.full((4, 8), 5.0)),
]


# ---- Beta-1 (neuronxcc.nki) value-returning rows: run only when that front end is importable ----------
def b1_add_exp(a, b):
    import neuronxcc.nki.language as bl  # type: ignore[import-not-found]

    out = bl.ndarray(a.shape, dtype=a.dtype, buffer=bl.shared_hbm)
    bl.store(out, bl.exp(bl.add(bl.load(a), bl.load(b))))
    return out


CASES += [
    Case("nl.load", b1_add_exp, (X * 0.1, Y * 0.1), lambda a, b: np.exp(a + b), rtol=1e-5, frontend="beta1",
         id="beta1"),
    Case("nl.add", b1_add_exp, (X * 0.1, Y * 0.1), lambda a, b: np.exp(a + b), rtol=1e-5, frontend="beta1",
         id="beta1"),
    Case("nl.exp", b1_add_exp, (X * 0.1, Y * 0.1), lambda a, b: np.exp(a + b), rtol=1e-5, frontend="beta1",
         id="beta1"),
    Case("nl.store", b1_add_exp, (X * 0.1, Y * 0.1), lambda a, b: np.exp(a + b), rtol=1e-5, frontend="beta1",
         id="beta1"),
]


# ---- illegal uses -------------------------------------------------------------------------------------
def _load_sbuf(x):
    t = load(x)
    return ret(nl.load(t))


def _add_mismatch(x, y):
    return ret(nl.add(load(x), load(y)))


def _fori_step0(x):
    nl.fori_loop(0, 4, lambda i: None, step=0)
    return x


def _while_returns_int(x):
    r = nisa.register_alloc(1)
    nl.while_loop(r, lambda r: 0)
    return x


def _dynamic_step_register(x):
    s = nisa.register_alloc(1)
    for _ in nl.dynamic_range(0, 4, s):
        pass
    return x


def _induction_write(x):
    for i in nl.dynamic_range(2):
        nisa.register_move(i, 5)
    return x


def _ndarray_too_many_partitions(x):
    return ret(nl.ndarray((256, 4), dtype=nl.float32, buffer=nl.sbuf))


def _abs_max_trn2(x, y):
    return ret(nl.abs_max(load(x), load(y)))


ILLEGAL: list[Illegal] = [
    Illegal("nl.load", _load_sbuf, (X,), "buffer"),
    Illegal("nl.add", _add_mismatch, (X, randn(16, F)), "shape-mismatch"),
    Illegal("nl.ndarray", _ndarray_too_many_partitions, (X,), "partition-limit"),
    Illegal("nl.abs_max", _abs_max_trn2, (X, Y), "generation"),
    Illegal("nl.fori_loop", _fori_step0, (X,), "argument", id="step0"),
    Illegal("nl.while_loop", _while_returns_int, (X,), "argument"),
    Illegal("nl.dynamic_range", _dynamic_step_register, (X,), "argument"),
    Illegal("nl.dynamic_range", _induction_write, (X,), "argument", id="frozen-induction"),
]
