"""Oracles of elementwise ops: the activations (with their exact-result conditions and confusable
twins), binary arithmetic and fp8 quantisation."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .opspec import (
    OPS,
    OracleBlock,
    Prepared,
    _f64,
    grid_exponent,
)
from .recipe import PrecisionRecipe

# --------------------------------------------------------------------------- elementwise


def _vec(fn: Callable[[float], float]) -> Callable[[np.ndarray], np.ndarray]:
    """Vectorise a math-module function; evaluate each distinct value once (bf16/fp8
    inputs have at most 65,536 distinct values)."""
    ufunc = np.frompyfunc(fn, 1, 1)

    def apply(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        if x.size > 4096:
            uniq, inv = np.unique(x, return_inverse=True)
            if uniq.size < x.size // 4:
                return ufunc(uniq).astype(np.float64)[inv].reshape(x.shape)
        return ufunc(x).astype(np.float64)

    return apply


def _safe(fn: Callable[[float], float]) -> Callable[[float], float]:
    def g(v: float) -> float:
        if math.isnan(v):
            return math.nan
        return fn(v)

    return g


_erf = _vec(_safe(math.erf))
_erfc = _vec(_safe(lambda v: math.erfc(v) if not math.isinf(v) else (0.0 if v > 0 else 2.0)))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        ex = np.exp(-np.abs(x))
        return np.where(x >= 0, 1.0 / (1.0 + ex), ex / (1.0 + ex))


def _gelu(x: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return x * 0.5 * _erfc(-x / math.sqrt(2.0))


_GT_C = math.sqrt(2.0 / math.pi)


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    # 0.5x(1 + tanh(z)) == x·sigmoid(2z): the sigmoid form keeps relative accuracy in the tail
    with np.errstate(invalid="ignore", over="ignore"):
        z = _GT_C * (x + 0.044715 * x**3)
        return np.where(np.isinf(x), np.where(x > 0, x, -0.0), x * _sigmoid(2.0 * z))


def _gelu_sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.where(np.isinf(x), np.where(x > 0, x, -0.0), x * _sigmoid(1.702 * x))


@dataclass(frozen=True)
class Activation:
    """One elementwise function: float64 value, its condition ``|x·f'(x)|``, the magnitude of
    its intermediates (``S_e``), how many fp32 roundings a straightforward implementation
    makes (``n_ops``), whether it is a transcendental (gets the implementation's budget),
    and its magnitude near zeros (``zero_scale``) for polynomial approximations."""

    f: Callable[[np.ndarray], np.ndarray]
    cond: Callable[[np.ndarray, np.ndarray], np.ndarray]
    inter: Callable[[np.ndarray, np.ndarray], np.ndarray]
    n_ops: int
    transcendental: bool
    exact: bool = False
    zero_scale: float = 0.0
    confusables: tuple[str, ...] = ()


def _absy(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.abs(y)


def _absx(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.abs(x)


def _zero(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.zeros_like(y)


def _errfree(f):
    def g(x):
        with np.errstate(all="ignore"):
            return f(x)

    return g


def _silu_cond(x, y):
    s = _sigmoid(x)
    return np.abs(x * (s + x * s * (1 - s)))


def _gelu_cond(x, y):
    phi = np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
    return np.abs(x * (0.5 * _erfc(-x / math.sqrt(2.0)) + x * phi))


def _gelu_tanh_cond(x, y):
    z = _GT_C * (x + 0.044715 * x**3)
    s = _sigmoid(2 * z)
    dz = _GT_C * (1 + 3 * 0.044715 * x * x)
    return np.abs(x * (s + x * 2 * s * (1 - s) * dz))


ACTIVATIONS: dict[str, Activation] = {
    "exp": Activation(_errfree(np.exp), lambda x, y: np.abs(x * y), _absy, 1, True, confusables=("exp2",)),
    "exp2": Activation(_errfree(np.exp2), lambda x, y: np.abs(x * y) * math.log(2), _absy, 1, True,
                       confusables=("exp",)),
    "log": Activation(_errfree(np.log), lambda x, y: np.ones_like(y), _absy, 1, True, zero_scale=1.0),
    "sqrt": Activation(_errfree(np.sqrt), lambda x, y: 0.5 * np.abs(y), _absy, 1, True,
                       confusables=("rsqrt",)),
    "rsqrt": Activation(_errfree(lambda x: 1.0 / np.sqrt(x)), lambda x, y: 0.5 * np.abs(y), _absy, 2, True,
                        confusables=("sqrt", "reciprocal")),
    "reciprocal": Activation(_errfree(lambda x: 1.0 / x), lambda x, y: np.abs(y), _absy, 1, True),
    "tanh": Activation(_errfree(np.tanh), lambda x, y: np.abs(x * (1 - y * y)), _absy, 1, True,
                       confusables=("sigmoid",)),
    "sigmoid": Activation(_errfree(_sigmoid), lambda x, y: np.abs(x * y * (1 - y)), _absy, 3, True,
                          confusables=("tanh", "silu")),
    "silu": Activation(_errfree(lambda x: x * _sigmoid(x)), _silu_cond, _absy, 4, True,
                       confusables=("sigmoid", "gelu", "gelu_tanh")),
    "softplus": Activation(_errfree(lambda x: np.logaddexp(0.0, x)), lambda x, y: np.abs(x * _sigmoid(x)),
                           _absy, 3, True),
    "gelu": Activation(_errfree(_gelu), _gelu_cond, _absx, 4, True,
                       confusables=("gelu_tanh", "gelu_sigmoid", "silu")),
    "gelu_tanh": Activation(_errfree(_gelu_tanh), _gelu_tanh_cond, _absx, 7, True,
                            confusables=("gelu", "gelu_sigmoid", "silu")),
    "gelu_sigmoid": Activation(_errfree(_gelu_sigmoid), lambda x, y: np.abs(x) * (np.abs(y / np.where(x == 0, 1, x)) + 1.702 * np.abs(x) / 4), _absx, 4, True,
                               confusables=("gelu", "gelu_tanh")),
    "erf": Activation(_errfree(_erf), lambda x, y: np.abs(x) * 2 / math.sqrt(math.pi) * np.exp(-x * x),
                      _absy, 1, True),
    "sin": Activation(_errfree(np.sin), lambda x, y: np.abs(x * np.cos(x)), _absy, 1, True, zero_scale=1.0,
                      confusables=("cos",)),
    "cos": Activation(_errfree(np.cos), lambda x, y: np.abs(x * np.sin(x)), _absy, 1, True, zero_scale=1.0,
                      confusables=("sin",)),
    "square": Activation(_errfree(np.square), lambda x, y: 2 * np.abs(y), _absy, 1, False),
    "relu": Activation(_errfree(lambda x: np.where(np.isnan(x), x, np.maximum(x, 0.0))), _zero, _zero, 0, False,
                       exact=True),
    "abs": Activation(_errfree(np.abs), _zero, _zero, 0, False, exact=True),
    "neg": Activation(_errfree(np.negative), _zero, _zero, 0, False, exact=True),
    "copy": Activation(_errfree(lambda x: x.copy()), _zero, _zero, 0, False, exact=True),
}
_ACT_ALIASES = {
    "gelu_apprx_tanh": "gelu_tanh", "gelu_approx_tanh": "gelu_tanh", "gelu_apprx_sigmoid": "gelu_sigmoid",
    "swish": "silu", "identity": "copy", "erf_gelu": "gelu", "logistic": "sigmoid",
}


def _flat(x: np.ndarray) -> np.ndarray:
    return np.asarray(x).reshape(-1)


def _prepare_unary(name: str):
    act = ACTIVATIONS[name]

    def prepare(inputs: list[np.ndarray], params: dict[str, Any], recipe: PrecisionRecipe) -> Prepared:
        x = np.asarray(inputs[0])
        xf_all = _flat(x)

        def evaluate(r0: int, r1: int) -> OracleBlock:
            xf = _f64(xf_all[r0:r1])
            y = act.f(xf)
            with np.errstate(all="ignore"):
                cond = act.cond(xf, y)
                inter = act.inter(xf, y)
            return OracleBlock(y=y, k=1, aux={"x": xf, "cond": cond, "inter": inter})

        return Prepared(
            spec=OPS[name], out_shape=x.shape, row_len=1, n_rows=int(xf_all.size), work_per_row=1,
            evaluate=evaluate, inputs=[x], params=params, k=1, facts={"activation": name},
        )

    return prepare


_BINARY = {
    "add": (np.add, lambda a, b, y: np.abs(a) + np.abs(b), False),
    "sub": (np.subtract, lambda a, b, y: np.abs(a) + np.abs(b), False),
    "mul": (np.multiply, lambda a, b, y: np.abs(y), False),
    "div": (np.divide, lambda a, b, y: np.abs(y), False),
    "maximum": (np.maximum, lambda a, b, y: np.zeros_like(y), True),
    "minimum": (np.minimum, lambda a, b, y: np.zeros_like(y), True),
}


def _prepare_binary(name: str):
    fn, inter, exact = _BINARY[name]

    def prepare(inputs: list[np.ndarray], params: dict[str, Any], recipe: PrecisionRecipe) -> Prepared:
        a, b = np.asarray(inputs[0]), np.asarray(inputs[1])
        shape = np.broadcast_shapes(a.shape, b.shape)
        af = _flat(np.broadcast_to(a, shape)) if a.shape != shape else _flat(a)
        bf = _flat(np.broadcast_to(b, shape)) if b.shape != shape else _flat(b)

        def evaluate(r0: int, r1: int) -> OracleBlock:
            x1, x2 = _f64(af[r0:r1]), _f64(bf[r0:r1])
            with np.errstate(all="ignore"):
                y = fn(x1, x2)
                return OracleBlock(y=y, k=1, aux={"inter": inter(x1, x2, y), "exact": exact})

        g = None
        ga, gb = grid_exponent(a), grid_exponent(b)
        if ga is not None and gb is not None:
            g = ga + gb if name == "mul" else min(ga, gb)
        return Prepared(
            spec=OPS[name], out_shape=tuple(shape), row_len=1, n_rows=int(math.prod(shape)), work_per_row=1,
            evaluate=evaluate, inputs=[a, b], params=params, k=1, facts={"grid": g if name in ("add", "sub", "mul") else None},
        )

    return prepare


# --------------------------------------------------------------------------- fp8 quantisation


def _prepare_quant(kind: str):
    def prepare(inputs: list[np.ndarray], params: dict[str, Any], recipe: PrecisionRecipe) -> Prepared:
        x = np.asarray(inputs[0])
        scale = inputs[1] if len(inputs) > 1 else params.get("scale")
        if scale is None:
            scale = recipe.scales[0] if recipe.scales else 1.0
        s = np.broadcast_to(_f64(scale), x.shape) if np.ndim(scale) else float(scale)
        xs = _flat(x)
        ss = _flat(s) if isinstance(s, np.ndarray) else None
        divide = bool(params.get("divide", True))

        def evaluate(r0: int, r1: int) -> OracleBlock:
            xf = _f64(xs[r0:r1])
            sc = float(s) if ss is None else ss[r0:r1]  # type: ignore[arg-type]
            with np.errstate(all="ignore"):
                if kind == "quantize":
                    y = xf / sc if divide else xf * sc
                else:
                    y = xf * sc
            return OracleBlock(y=y, k=1, aux={"x": xf, "scale": sc})

        return Prepared(
            spec=OPS[kind], out_shape=x.shape, row_len=1, n_rows=int(xs.size), work_per_row=1,
            evaluate=evaluate, inputs=[x], params={**params, "divide": divide}, k=1,
            facts={"scale": float(s) if ss is None else "per-element", "divide": divide},
        )

    return prepare
