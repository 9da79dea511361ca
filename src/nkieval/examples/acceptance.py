"""The acceptance kernel set (issue 2), written by us in the current ``nki`` API.

Each kernel has a NumPy reference and an input maker; :data:`CASES` lists them so other parts
of nkieval (performance model, review pipeline, benchmarks) can run the same set. Shapes are
chosen so that every kernel exercises its interesting path: ragged tails (sizes that are not
multiples of 128), PSUM accumulation over several K tiles, chunked scans and statistics.

Importing this module needs the ``nki`` shim (``nkieval.frontends.install()``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

from nkieval.examples.kernels import (
    matmul_bf16,
    matmul_ref,
    row_softmax,
    row_softmax_ref,
    tiled_add,
    tiled_add_ref,
)

P = 128  # partitions per tile


# -- softmax / normalisation (nl.* wrappers) ---------------------------------------------------------------
@nki.jit
def softmax_nl(x):
    """Row softmax of x [N, F] with the nl.* API, 128 rows per tile, ragged last tile."""
    n, f = x.shape
    out = nl.ndarray((n, f), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(math.ceil(n / P)):
        r0, rows = i * P, min(P, n - i * P)
        t = nl.load(x[r0:r0 + rows])
        nl.store(out[r0:r0 + rows], nl.softmax(t, axis=1))
    return out


def softmax_ref(x):
    return row_softmax_ref(x)


@nki.jit
def rms_norm_nl(x, w):
    """y = x / sqrt(mean(x², row) + 1e-6) * w for x [N, F], w [F]; the weight row is broadcast
    across partitions once, outside the row loop."""
    n, f = x.shape
    out = nl.ndarray((n, f), dtype=x.dtype, buffer=nl.shared_hbm)
    w_row = nl.load(w.reshape((1, f)))
    w_all = nl.broadcast_to(w_row, (P, f))
    for i in nl.affine_range(math.ceil(n / P)):
        r0, rows = i * P, min(P, n - i * P)
        t = nl.load(x[r0:r0 + rows])
        nl.store(out[r0:r0 + rows], nl.rms_norm(t, w_all[0:rows], axis=1, epsilon=1e-6))
    return out


def rms_norm_ref(x, w):
    xf = x.astype(np.float64)
    return (xf / np.sqrt((xf * xf).mean(axis=1, keepdims=True) + 1e-6) * w.astype(np.float64)).astype(x.dtype)


@nki.jit
def layer_norm(x, gamma, beta):
    """LayerNorm over rows of x [N, F] with bn_stats (≤ 512 elements per call) and bn_aggr.

    Per 128-row tile: bn_stats on each 512-column chunk, bn_aggr to (mean, var), then one
    tensor_scalar (x - mean) * rstd and two tensor_tensor ops for gamma and beta."""
    n, f = x.shape
    eps = 1e-5
    fmax = nl.tile_size.bn_stats_fmax
    nchunks = math.ceil(f / fmax)
    out = nl.ndarray((n, f), dtype=x.dtype, buffer=nl.shared_hbm)
    g = nl.broadcast_to(nl.load(gamma.reshape((1, f))), (P, f))
    b = nl.broadcast_to(nl.load(beta.reshape((1, f))), (P, f))
    for i in nl.affine_range(math.ceil(n / P)):
        r0, rows = i * P, min(P, n - i * P)
        t = nl.ndarray((P, f), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[0:rows], src=x[r0:r0 + rows])
        stats = nl.ndarray((P, nchunks * 6), dtype=nl.float32, buffer=nl.sbuf)
        for c in nl.affine_range(nchunks):
            c0, cols = c * fmax, min(fmax, f - c * fmax)
            nisa.bn_stats(dst=stats[0:rows, c * 6:(c + 1) * 6], data=t[0:rows, c0:c0 + cols])
        mv = nl.ndarray((P, 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.bn_aggr(dst=mv[0:rows], data=stats[0:rows])
        rstd = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=rstd[0:rows], data=mv[0:rows, 1:2], op0=nl.add, operand0=eps)
        nisa.activation(dst=rstd[0:rows], op=nl.rsqrt, data=rstd[0:rows])
        y = nl.ndarray((P, f), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=y[0:rows], data=t[0:rows], op0=nl.subtract, operand0=mv[0:rows, 0:1],
                           op1=nl.multiply, operand1=rstd[0:rows])
        nisa.tensor_tensor(dst=y[0:rows], data1=y[0:rows], data2=g[0:rows], op=nl.multiply)
        res = nl.ndarray((P, f), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=res[0:rows], data1=y[0:rows], data2=b[0:rows], op=nl.add)
        nisa.dma_copy(dst=out[r0:r0 + rows], src=res[0:rows])
    return out


def layer_norm_ref(x, gamma, beta):
    xf = x.astype(np.float64)
    mu = xf.mean(axis=1, keepdims=True)
    var = xf.var(axis=1, keepdims=True)
    return ((xf - mu) / np.sqrt(var + 1e-5) * gamma + beta).astype(x.dtype)


# -- Tensor engine ---------------------------------------------------------------------------------------------
@nki.jit
def matmul_bf16_resident(a_t, b):
    """c[M, N] = a_t.T @ b (bf16 in, fp32 out) keeping both operands resident in SBUF.

    Each operand is loaded once, as [128, K/128, cols] tiles (K on partitions), so the inner
    loop is only matmuls: K/128 accumulating nc_matmul per 128×512 output tile, then one
    PSUM→SBUF copy and one store. Needs 2·(K/128)·cols·2 bytes per partition of SBUF."""
    k, m = a_t.shape
    _, n = b.shape
    kt = k // P
    tn = 512
    out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    a_sb = nl.ndarray((P, kt, m), dtype=a_t.dtype, buffer=nl.sbuf)
    b_sb = nl.ndarray((P, kt, n), dtype=b.dtype, buffer=nl.sbuf)
    for ki in nl.affine_range(kt):
        nisa.dma_copy(dst=a_sb[:, ki, :], src=a_t[ki * P:(ki + 1) * P, :])
        nisa.dma_copy(dst=b_sb[:, ki, :], src=b[ki * P:(ki + 1) * P, :])
    for mi in nl.affine_range(m // P):
        for ni in nl.affine_range(n // tn):
            acc = nl.ndarray((P, tn), dtype=nl.float32, buffer=nl.psum)
            for ki in nl.affine_range(kt):
                nisa.nc_matmul(dst=acc, stationary=a_sb[:, ki, mi * P:(mi + 1) * P],
                               moving=b_sb[:, ki, ni * tn:(ni + 1) * tn])
            res = nl.ndarray((P, tn), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res, src=acc)
            nisa.dma_copy(dst=out[mi * P:(mi + 1) * P, ni * tn:(ni + 1) * tn], src=res)
    return out


@nki.jit
def transpose_tensor_engine(x):
    """out = x.T for x [N, M], in 128×128 blocks transposed on the Tensor engine (SBUF→PSUM),
    ragged edges included."""
    n, m = x.shape
    out = nl.ndarray((m, n), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(math.ceil(n / P)):
        r0, rows = i * P, min(P, n - i * P)
        for j in nl.affine_range(math.ceil(m / P)):
            c0, cols = j * P, min(P, m - j * P)
            t = nl.ndarray((P, P), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t[0:rows, 0:cols], src=x[r0:r0 + rows, c0:c0 + cols])
            pt = nl.ndarray((P, P), dtype=x.dtype, buffer=nl.psum)
            nisa.nc_transpose(dst=pt[0:cols, 0:rows], data=t[0:rows, 0:cols], engine=nisa.engine.tensor)
            st = nl.ndarray((P, P), dtype=x.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=st[0:cols, 0:rows], src=pt[0:cols, 0:rows])
            nisa.dma_copy(dst=out[c0:c0 + cols, r0:r0 + rows], src=st[0:cols, 0:rows])
    return out


def transpose_ref(x):
    return np.ascontiguousarray(x.T)


# -- GpSimd / Vector special instructions ------------------------------------------------------------------
MASK_VALUE = -30000.0  # representable in bf16/fp16; large enough to vanish under exp


@nki.jit
def causal_mask(scores):
    """Keep scores[i, j] where j <= i, else MASK_VALUE, via affine_select: the affine value
    (row0 + p) - j is compared with 0 (greater_equal) for each 128-row tile."""
    s, t = scores.shape
    out = nl.ndarray((s, t), dtype=scores.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(math.ceil(s / P)):
        r0, rows = i * P, min(P, s - i * P)
        x = nl.load(scores[r0:r0 + rows])
        y = nl.ndarray((rows, t), dtype=scores.dtype, buffer=nl.sbuf)
        nisa.affine_select(dst=y, pattern=[[-1, t]], channel_multiplier=1, on_true_tile=x,
                           on_false_value=MASK_VALUE, cmp_op=nl.greater_equal, offset=r0)
        nl.store(out[r0:r0 + rows], y)
    return out


def causal_mask_ref(scores):
    s, t = scores.shape
    keep = np.arange(t)[None, :] <= np.arange(s)[:, None]
    return np.where(keep, scores, np.asarray(MASK_VALUE, dtype=scores.dtype)).astype(scores.dtype)


@nki.jit
def cumsum(x):
    """Running sum along each row of x [N, F] with tensor_tensor_scan (r = 1·r + x), in
    512-column chunks whose carry is the previous chunk's last column."""
    n, f = x.shape
    chunk = 512
    out = nl.ndarray((n, f), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(math.ceil(n / P)):
        r0, rows = i * P, min(P, n - i * P)
        ones = nl.ndarray((rows, chunk), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=ones, value=1.0)
        carry = nl.zeros((rows, 1), dtype=nl.float32, buffer=nl.sbuf)
        for c in nl.sequential_range(math.ceil(f / chunk)):
            c0, cols = c * chunk, min(chunk, f - c * chunk)
            t = nl.load(x[r0:r0 + rows, c0:c0 + cols])
            r = nl.ndarray((rows, cols), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor_scan(dst=r, data0=ones[:, 0:cols], data1=t, initial=carry, op0=nl.multiply,
                                    op1=nl.add)
            nisa.tensor_copy(dst=carry, src=r[:, cols - 1:cols])
            nl.store(out[r0:r0 + rows, c0:c0 + cols], nl.copy(r, dtype=x.dtype))
    return out


def cumsum_ref(x):
    return np.cumsum(x.astype(np.float64), axis=1).astype(x.dtype)


# -- DMA ------------------------------------------------------------------------------------------------------
@nki.jit
def gather_rows(table, idx):
    """out[i, :] = table[idx[i], :] with an indirect DMA: the row offsets come from an SBUF
    [rows, 1] int32 index tile through ``.ap(vector_offset=...)``."""
    _v, d = table.shape
    (n,) = idx.shape
    out = nl.ndarray((n, d), dtype=table.dtype, buffer=nl.shared_hbm)
    idx2 = idx.reshape((n, 1))
    for i in nl.affine_range(math.ceil(n / P)):
        r0, rows = i * P, min(P, n - i * P)
        ids = nl.load(idx2[r0:r0 + rows])
        t = nl.ndarray((rows, d), dtype=table.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=table.ap(pattern=[[d, rows], [1, d]], offset=0, vector_offset=ids, indirect_dim=0))
        nl.store(out[r0:r0 + rows], t)
    return out


def gather_rows_ref(table, idx):
    return table[idx]


# -- LNC 2 ------------------------------------------------------------------------------------------------------
@nki.jit
def scale_add_lnc(a, b):
    """out = 2·a + b, rows split between the logical NeuronCore's programs (launch as
    ``scale_add_lnc[2]``): program p handles row tiles p, p + num_programs, …"""
    n, f = a.shape
    out = nl.ndarray((n, f), dtype=a.dtype, buffer=nl.shared_hbm)
    pid = nl.program_id(0)
    nprog = nl.num_programs()
    for i in nl.affine_range(math.ceil(n / P)):
        if i % nprog != pid:
            continue
        r0, rows = i * P, min(P, n - i * P)
        ta = nl.load(a[r0:r0 + rows])
        tb = nl.load(b[r0:r0 + rows])
        res = nl.ndarray((rows, f), dtype=a.dtype, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(dst=res, data=ta, op0=nl.multiply, operand0=2.0, op1=nl.add, operand1=tb)
        nl.store(out[r0:r0 + rows], res)
    return out


def scale_add_ref(a, b):
    return (2.0 * a.astype(np.float32) + b.astype(np.float32)).astype(a.dtype)


# -- the registry -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    """One acceptance kernel: how to make inputs, the reference, and the allowed error.

    ``rtol``/``atol`` apply to the comparison in fp64 of the simulator's output with
    ``reference(*inputs)``; ``lnc`` is the launch degree (``kernel[lnc]``)."""

    name: str
    kernel: Any
    make_inputs: Callable[[np.random.Generator], tuple[np.ndarray, ...]]
    reference: Callable[..., np.ndarray]
    rtol: float = 0.0
    atol: float = 0.0
    lnc: int = 1
    instructions: tuple[str, ...] = field(default=())  # opcodes the trace must contain


def _bf16(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.standard_normal(shape).astype(ml_dtypes.bfloat16)


def _f32(rng: np.random.Generator, shape: tuple[int, ...], scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


CASES: tuple[Case, ...] = (
    Case("tiled_add", tiled_add, lambda r: (_f32(r, (300, 200)), _f32(r, (300, 200))), tiled_add_ref,
         instructions=("tensor_tensor",)),
    Case("softmax", softmax_nl, lambda r: (_f32(r, (200, 1000), 4.0),), softmax_ref, rtol=1e-5, atol=1e-9,
         instructions=("activation_reduce", "reciprocal")),
    Case("softmax_isa", row_softmax, lambda r: (_f32(r, (200, 1000), 4.0),), row_softmax_ref, rtol=1e-5, atol=1e-9),
    Case("rms_norm", rms_norm_nl, lambda r: (_f32(r, (300, 256)), _f32(r, (256,))), rms_norm_ref, rtol=1e-5,
         atol=1e-6, instructions=("activation_reduce",)),
    Case("layer_norm", layer_norm, lambda r: (_f32(r, (200, 1100), 3.0), _f32(r, (1100,)), _f32(r, (1100,))),
         layer_norm_ref, rtol=1e-4, atol=1e-5, instructions=("bn_stats", "bn_aggr")),
    Case("matmul_bf16", matmul_bf16, lambda r: (_bf16(r, (512, 256)), _bf16(r, (512, 1024))), matmul_ref,
         rtol=1e-5, atol=1e-4, instructions=("nc_matmul",)),
    Case("matmul_bf16_resident", matmul_bf16_resident, lambda r: (_bf16(r, (512, 256)), _bf16(r, (512, 1024))),
         matmul_ref, rtol=1e-5, atol=1e-4, instructions=("nc_matmul",)),
    Case("transpose", transpose_tensor_engine, lambda r: (_f32(r, (300, 200)),), transpose_ref,
         instructions=("nc_transpose",)),
    Case("causal_mask", causal_mask, lambda r: (_f32(r, (300, 300)),), causal_mask_ref,
         instructions=("affine_select",)),
    Case("cumsum", cumsum, lambda r: (_f32(r, (130, 1200)),), cumsum_ref, rtol=1e-5, atol=1e-4,
         instructions=("tensor_tensor_scan",)),
    Case("gather", gather_rows,
         lambda r: (_f32(r, (1000, 64)), r.integers(0, 1000, 300).astype(np.int32)), gather_rows_ref,
         instructions=("dma_copy",)),
    Case("lnc2_scale_add", scale_add_lnc, lambda r: (_f32(r, (600, 96)), _f32(r, (600, 96))), scale_add_ref,
         rtol=1e-6, lnc=2, instructions=("scalar_tensor_tensor",)),
)

BY_NAME: dict[str, Case] = {c.name: c for c in CASES}


def run_case(case: Case, seed: int = 0, target: str | None = None) -> tuple[np.ndarray, np.ndarray, Any]:
    """Run one case on the simulator: (output, reference, RunResult)."""
    rng = np.random.default_rng(seed)
    inputs = case.make_inputs(rng)
    kern = case.kernel[case.lnc] if case.lnc != 1 else case.kernel
    out = nki.simulate(kern, target=target)(*inputs)
    return out, case.reference(*inputs), nki.last_result()


__all__ = [
    "BY_NAME", "CASES", "Case", "causal_mask", "cumsum", "gather_rows", "layer_norm", "matmul_bf16_resident",
    "rms_norm_nl", "run_case", "scale_add_lnc", "softmax_nl", "transpose_tensor_engine",
]
