"""Baseline: one query head at a time; K^T fetched with a transposing DMA; scores on a single row.

For every query head the kv-head slice of the cache is re-read (G times per group), K^T comes
from an element-strided DMA, and the [1, S] softmax and the P @ V products run on one partition.
Correct for every shape.
"""

import math

import nki
import nki.isa as nisa
import nki.language as nl

TS = 512


@nki.jit
def gqa_decode_attention(q, k_cache, v_cache):
    b, hq, d = q.shape
    _, s, hkv, _ = k_cache.shape
    g = hq // hkv
    out = nl.ndarray((b, hq, d), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    scale = 1.0 / math.sqrt(d)
    for bi in range(b):
        for hh in range(hq):
            h = hh // g
            qt = nl.ndarray((p, 1), dtype=q.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=qt[0:d], src=q[bi, hh:hh + 1, :].permute((1, 0)))
            sc = nl.ndarray((1, s), dtype=nl.float32, buffer=nl.sbuf)
            for c in range((s + TS - 1) // TS):
                c0 = c * TS
                cw = min(TS, s - c0)
                kt = nl.ndarray((p, TS), dtype=k_cache.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=kt[0:d, 0:cw], src=k_cache[bi, c0:c0 + cw, h, :].permute((1, 0)))
                ps = nl.ndarray((1, TS), dtype=nl.float32, buffer=nl.psum)
                nisa.nc_matmul(dst=ps[0:1, 0:cw], stationary=qt[0:d, 0:1], moving=kt[0:d, 0:cw])
                nisa.tensor_scalar(dst=sc[0:1, c0:c0 + cw], data=ps[0:1, 0:cw], op0=nl.multiply, operand0=scale)
            mx = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_reduce(dst=mx, op=nl.maximum, data=sc, axis=1)
            nisa.tensor_scalar(dst=sc, data=sc, op0=nl.subtract, operand0=mx)
            nisa.activation(dst=sc, op=nl.exp, data=sc)
            tot = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_reduce(dst=tot, op=nl.add, data=sc, axis=1)
            nisa.reciprocal(dst=tot, data=tot)
            nisa.tensor_scalar(dst=sc, data=sc, op0=nl.multiply, operand0=tot)
            acc = nl.ndarray((1, d), dtype=nl.float32, buffer=nl.psum)
            for j in range((s + p - 1) // p):
                j0 = j * p
                jw = min(p, s - j0)
                pp = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.psum)
                nisa.nc_transpose(dst=pp[0:jw], data=sc[0:1, j0:j0 + jw])
                pt = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_copy(dst=pt[0:jw], src=pp[0:jw])
                vb = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
                nisa.dma_copy(dst=vb[0:jw], src=v_cache[bi, j0:j0 + jw, h, :])
                nisa.nc_matmul(dst=acc[0:1, 0:d], stationary=pt[0:jw, 0:1], moving=vb[0:jw, 0:d])
            o = nl.ndarray((1, d), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=o, src=acc[0:1, 0:d])
            nisa.dma_copy(dst=out[bi, hh:hh + 1, :], src=o)
    return out
