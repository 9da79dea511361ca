"""Baseline: standard (non-flash) attention per query block over the whole key range.

For each 128-query block: the full [128, S] score row block (all key blocks, including those
above the diagonal) is computed with K^T reloaded block by block, masked with one affine_select
over the whole row, then max / subtract / exp / sum / divide as separate instructions; P V over
all key blocks with V re-read from HBM. Correct for every shape, but the work and the SBUF
footprint grow with S and nothing is skipped.
"""

import math

import nki
import nki.isa as nisa
import nki.language as nl

KB = 512
MASKED = -3.0e4


@nki.jit
def flash_attention_fwd(q_t, k_t, v):
    d, s = q_t.shape
    out = nl.ndarray((s, d), dtype=nl.float32, buffer=nl.shared_hbm)
    lse = nl.ndarray((s,), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    scale = 1.0 / math.sqrt(d)
    for i in range((s + p - 1) // p):
        i0 = i * p
        iw = min(p, s - i0)
        qb = nl.ndarray((d, p), dtype=q_t.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=qb[:, 0:iw], src=q_t[:, i0:i0 + iw])
        sc = nl.ndarray((p, s), dtype=nl.float32, buffer=nl.sbuf)
        for c in range((s + KB - 1) // KB):
            c0 = c * KB
            cw = min(KB, s - c0)
            kb = nl.ndarray((d, KB), dtype=k_t.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=kb[:, 0:cw], src=k_t[:, c0:c0 + cw])
            ps = nl.ndarray((p, KB), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=ps[0:iw, 0:cw], stationary=qb[:, 0:iw], moving=kb[:, 0:cw])
            nisa.tensor_copy(dst=sc[0:iw, c0:c0 + cw], src=ps[0:iw, 0:cw])
        nisa.tensor_scalar(dst=sc[0:iw], data=sc[0:iw], op0=nl.multiply, operand0=scale)
        nisa.affine_select(dst=sc[0:iw], pattern=[[-1, s]], channel_multiplier=1, on_true_tile=sc[0:iw],
                           on_false_value=MASKED, cmp_op=nl.greater_equal, offset=i0)
        mx = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=mx[0:iw], op=nl.maximum, data=sc[0:iw], axis=1)
        nisa.tensor_scalar(dst=sc[0:iw], data=sc[0:iw], op0=nl.subtract, operand0=mx[0:iw])
        nisa.activation(dst=sc[0:iw], op=nl.exp, data=sc[0:iw])
        tot = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=tot[0:iw], op=nl.add, data=sc[0:iw], axis=1)
        inv = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv[0:iw], data=tot[0:iw])
        nisa.tensor_scalar(dst=sc[0:iw], data=sc[0:iw], op0=nl.multiply, operand0=inv[0:iw])
        acc = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.psum)
        for j in range((s + p - 1) // p):
            j0 = j * p
            jw = min(p, s - j0)
            tp = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_transpose(dst=tp[0:jw, 0:iw], data=sc[0:iw, j0:j0 + jw])
            pt = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=pt[0:jw, 0:iw], src=tp[0:jw, 0:iw])
            vb = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=vb[0:jw], src=v[j0:j0 + jw])
            nisa.nc_matmul(dst=acc[0:iw, 0:d], stationary=pt[0:jw, 0:iw], moving=vb[0:jw, 0:d])
        o = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=o[0:iw], src=acc[0:iw, 0:d])
        nisa.dma_copy(dst=out[i0:i0 + iw], src=o[0:iw])
        lt = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=lt[0:iw], op=nl.log, data=tot[0:iw])
        nisa.tensor_tensor(dst=lt[0:iw], data1=lt[0:iw], data2=mx[0:iw], op=nl.add)
        nisa.dma_copy(dst=lse[i0:i0 + iw].reshape((iw, 1)), src=lt[0:iw])
    return out, lse
