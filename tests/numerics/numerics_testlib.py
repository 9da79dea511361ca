"""Kernels for the numerics tests: correct implementations in several orders and precisions,
and the defective variants the issue lists. They compute the way a kernel would (float32
engines, ml_dtypes casts), never by calling the oracle."""

from __future__ import annotations

import numpy as np

from nkieval.numerics.formats import round_to
from nkieval.numerics.oracle import ACTIVATIONS

DTYPES = ("fp32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "fp8_e4m3fn")
ORDERS = ("sequential", "pairwise", "chunked", "split_k", "random_permutation")
KS = (64, 128, 129, 512, 4096, 16384)


def softmax32(x: np.ndarray, *, subtract_max: bool = True, mask: np.ndarray | None = None) -> np.ndarray:
    x32 = np.asarray(x).astype(np.float32)
    if mask is not None:
        x32 = np.where(mask, x32, np.float32(-np.inf))
    with np.errstate(all="ignore"):
        m = x32.max(-1, keepdims=True) if subtract_max else np.float32(0)
        e = np.exp(x32 - m)
        return e / e.sum(-1, keepdims=True, dtype=np.float32)


def log_softmax32(x: np.ndarray) -> np.ndarray:
    x32 = np.asarray(x).astype(np.float32)
    m = x32.max(-1, keepdims=True)
    d = x32 - m
    return d - np.log(np.exp(d).sum(-1, keepdims=True, dtype=np.float32))


def layernorm32(x: np.ndarray, *, one_pass: bool = False, eps: float = 1e-5) -> np.ndarray:
    x32 = np.asarray(x).astype(np.float32)
    mu = x32.mean(-1, keepdims=True, dtype=np.float32)
    if one_pass:
        var = (x32 * x32).mean(-1, keepdims=True, dtype=np.float32) - mu * mu
    else:
        d = x32 - mu
        var = (d * d).mean(-1, keepdims=True, dtype=np.float32)
    return (x32 - mu) / np.sqrt(np.maximum(var, np.float32(0)) + np.float32(eps))


def rmsnorm32(x: np.ndarray, gamma: np.ndarray | None = None, eps: float = 1e-6) -> np.ndarray:
    x32 = np.asarray(x).astype(np.float32)
    ms = (x32 * x32).mean(-1, keepdims=True, dtype=np.float32)
    y = x32 / np.sqrt(ms + np.float32(eps))
    return y if gamma is None else y * np.asarray(gamma).astype(np.float32)


def act32(name: str, x: np.ndarray) -> np.ndarray:
    """An fp32 engine evaluating ``name``: the exact value rounded to fp32 (1/2 ulp)."""
    return round_to(ACTIVATIONS[name].f(np.asarray(x).astype(np.float64)), "fp32").astype(np.float32)


def causal_mask(n: int, shift: int = 0) -> np.ndarray:
    return np.tril(np.ones((n, n), dtype=bool), k=shift)
