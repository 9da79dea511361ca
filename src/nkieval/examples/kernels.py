"""Example NKI kernels in the current ``nki`` API, each with a NumPy reference.

Importing this module needs the ``nki`` shim (``nkieval.frontends.install()``).
"""

from __future__ import annotations

import math

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np


@nki.jit
def tiled_add(a, b):
    """out = a + b for [N, F] inputs, N not necessarily a multiple of 128 (ragged last tile)."""
    n, f = a.shape
    out = nl.ndarray((n, f), dtype=a.dtype, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    for i in nl.affine_range(math.ceil(n / p)):
        rows = min(p, n - i * p)
        ta = nl.ndarray((p, f), dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray((p, f), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta[0:rows], src=a[i * p:i * p + rows])
        nisa.dma_copy(dst=tb[0:rows], src=b[i * p:i * p + rows])
        tc = nl.ndarray((p, f), dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=tc[0:rows], data1=ta[0:rows], data2=tb[0:rows], op=nl.add)
        nisa.dma_copy(dst=out[i * p:i * p + rows], src=tc[0:rows])
    return out


def tiled_add_ref(a, b):
    return (a.astype(np.float32) + b.astype(np.float32)).astype(a.dtype)


@nki.jit
def matmul_bf16(a_t, b):
    """c[M, N] = a_t.T @ b for a_t [K, M], b [K, N] in bf16; fp32 PSUM accumulation over 128-row K tiles."""
    k, m = a_t.shape
    _, n = b.shape
    tk, tm, tn = 128, 128, 512
    out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    for mi in nl.affine_range(m // tm):
        for ni in nl.affine_range(n // tn):
            acc = nl.ndarray((tm, tn), dtype=nl.float32, buffer=nl.psum)
            for ki in nl.affine_range(k // tk):
                lhs = nl.ndarray((tk, tm), dtype=a_t.dtype, buffer=nl.sbuf)
                rhs = nl.ndarray((tk, tn), dtype=b.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=lhs, src=a_t[ki * tk:(ki + 1) * tk, mi * tm:(mi + 1) * tm])
                nisa.dma_copy(dst=rhs, src=b[ki * tk:(ki + 1) * tk, ni * tn:(ni + 1) * tn])
                nisa.nc_matmul(dst=acc, stationary=lhs, moving=rhs)
            res = nl.ndarray((tm, tn), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res, src=acc)
            nisa.dma_copy(dst=out[mi * tm:(mi + 1) * tm, ni * tn:(ni + 1) * tn], src=res)
    return out


def matmul_ref(a_t, b):
    return a_t.astype(np.float32).T @ b.astype(np.float32)


@nki.jit
def row_softmax(x):
    """Numerically stable softmax over the last axis of x [N, F] (N ≤ 128 per tile, ragged tail)."""
    n, f = x.shape
    out = nl.ndarray((n, f), dtype=x.dtype, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    for i in nl.affine_range(math.ceil(n / p)):
        rows = min(p, n - i * p)
        t = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[0:rows], src=x[i * p:i * p + rows])
        neg_max = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=neg_max[0:rows], op=nl.maximum, data=t[0:rows], axis=1, negate=True)
        e = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.sbuf)
        total = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(dst=e[0:rows], op=nl.exp, data=t[0:rows], bias=neg_max[0:rows],
                               reduce_op=nl.add, reduce_res=total[0:rows])
        inv = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv[0:rows], data=total[0:rows])
        y = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=y[0:rows], data=e[0:rows], op0=nl.multiply, operand0=inv[0:rows])
        nisa.dma_copy(dst=out[i * p:i * p + rows], src=y[0:rows])
    return out


def row_softmax_ref(x):
    xf = x.astype(np.float64)
    e = np.exp(xf - xf.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)).astype(x.dtype)
