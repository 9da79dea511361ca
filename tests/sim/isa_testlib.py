"""Helpers for the ISA tests: run a one-instruction body on SBUF copies of NumPy inputs.

``simulate(body, *arrays)`` launches a kernel that DMAs every array into SBUF, calls
``body(*tiles)`` (which issues the instruction under test and returns the result tile or
tiles) and DMAs the result back to HBM, so each test states only the instruction and its
NumPy expectation.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

BF16 = ml_dtypes.bfloat16


def to_sbuf(x: Any) -> Any:
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    return t


def to_hbm(t: Any) -> Any:
    if t.buffer is nl.psum:
        s = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=s, src=t)
        t = s
    o = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=o, src=t)
    return o


def simulate(body: Any, *arrays: np.ndarray, target: str = "trn2", options: Any = None) -> Any:
    def kernel(*args):
        res = body(*[to_sbuf(a) for a in args])
        return tuple(to_hbm(r) for r in res) if isinstance(res, tuple) else to_hbm(res)

    return nki.simulate(kernel, target=target, options=options)(*arrays)


def sbuf(shape: Any, dtype: Any = nl.float32) -> Any:
    return nl.ndarray(tuple(shape), dtype=dtype, buffer=nl.sbuf)


def psum(shape: Any, dtype: Any = nl.float32) -> Any:
    return nl.ndarray(tuple(shape), dtype=dtype, buffer=nl.psum)


def rand(shape: Any, seed: int = 0, dtype: Any = np.float32, scale: float = 1.0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(dtype)


def last_trace() -> Any:
    return nki.last_result().trace
