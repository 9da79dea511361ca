"""Baseline: transposed operands fetched by strided DMAs, unfused softmax, per query block.

Q^T and K^T blocks come straight from HBM through transposing (element-strided) DMAs, K and V
are re-read for every query block, and the softmax is max, subtract, exp, sum, divide as
separate instructions over the [128, Skv] scores. Correct for every shape.
"""

import math

import nki
import nki.isa as nisa
import nki.language as nl

TS = 512


@nki.jit
def attention_head(q, k, v):
    sq, d = q.shape
    skv = k.shape[0]
    out = nl.ndarray((sq, d), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    scale = 1.0 / math.sqrt(d)
    for i in range((sq + p - 1) // p):
        i0 = i * p
        iw = min(p, sq - i0)
        q_t = nl.ndarray((p, p), dtype=q.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=q_t[0:d, 0:iw], src=q[i0:i0 + iw].permute((1, 0)))
        sc = nl.ndarray((p, skv), dtype=nl.float32, buffer=nl.sbuf)
        for c in range((skv + TS - 1) // TS):
            c0 = c * TS
            cw = min(TS, skv - c0)
            kt = nl.ndarray((p, TS), dtype=k.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=kt[0:d, 0:cw], src=k[c0:c0 + cw].permute((1, 0)))
            ps = nl.ndarray((p, TS), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=ps[0:iw, 0:cw], stationary=q_t[0:d, 0:iw], moving=kt[0:d, 0:cw])
            nisa.tensor_copy(dst=sc[0:iw, c0:c0 + cw], src=ps[0:iw, 0:cw])
        nisa.tensor_scalar(dst=sc[0:iw], data=sc[0:iw], op0=nl.multiply, operand0=scale)
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
        for j in range((skv + p - 1) // p):
            j0 = j * p
            jw = min(p, skv - j0)
            pp = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_transpose(dst=pp[0:jw, 0:iw], data=sc[0:iw, j0:j0 + jw])
            pt = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=pt[0:jw, 0:iw], src=pp[0:jw, 0:iw])
            vb = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=vb[0:jw], src=v[j0:j0 + jw])
            nisa.nc_matmul(dst=acc[0:iw, 0:d], stationary=pt[0:jw, 0:iw], moving=vb[0:jw, 0:d])
        o = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=o[0:iw], src=acc[0:iw, 0:d])
        nisa.dma_copy(dst=out[i0:i0 + iw], src=o[0:iw])
    return out
