"""Baseline: per (sequence, head), every page fetched again with its own dynamic DMA; K^T by strided DMA.

For each head the page ids are re-read and each page's [PG, D] K^T slice comes through a
transposing (element-strided) dynamic DMA, V likewise per head; the softmax is unfused. Correct
for every shape, but each page crosses HBM H times.
"""

import math

import nki
import nki.isa as nisa
import nki.language as nl

TS = 512


@nki.jit
def paged_attention_decode(q, k_pages, v_pages, block_table):
    b, h, d = q.shape
    _, pg, _, _ = k_pages.shape
    mp = block_table.shape[1]
    s = mp * pg
    out = nl.ndarray((b, h, d), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    scale = 1.0 / math.sqrt(d)
    hd = h * d
    for bi in range(b):
        for hh in range(h):
            q_t = nl.ndarray((p, 1), dtype=q.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=q_t[0:d], src=q[bi, hh:hh + 1, :].permute((1, 0)))
            k_t = nl.ndarray((p, s), dtype=k_pages.dtype, buffer=nl.sbuf)
            vs = []
            for j in range(mp):
                pid = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
                nisa.dma_copy(dst=pid, src=block_table[bi:bi + 1, j:j + 1])
                nisa.dma_copy(dst=k_t[0:d, j * pg:(j + 1) * pg],
                              src=k_pages.ap(pattern=[[1, d], [hd, pg]], offset=hh * d, scalar_offset=pid,
                                             indirect_dim=0))
                vt = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
                nisa.dma_copy(dst=vt[0:pg], src=v_pages.ap(pattern=[[hd, pg], [1, d]], offset=hh * d,
                                                            scalar_offset=pid, indirect_dim=0))
                vs.append(vt)
            sc = nl.ndarray((1, s), dtype=nl.float32, buffer=nl.sbuf)
            for c in range((s + TS - 1) // TS):
                c0 = c * TS
                cw = min(TS, s - c0)
                ps = nl.ndarray((1, TS), dtype=nl.float32, buffer=nl.psum)
                nisa.nc_matmul(dst=ps[0:1, 0:cw], stationary=q_t[0:d, 0:1], moving=k_t[0:d, c0:c0 + cw])
                nisa.tensor_copy(dst=sc[0:1, c0:c0 + cw], src=ps[0:1, 0:cw])
            nisa.tensor_scalar(dst=sc, data=sc, op0=nl.multiply, operand0=scale)
            mx = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_reduce(dst=mx, op=nl.maximum, data=sc, axis=1)
            nisa.tensor_scalar(dst=sc, data=sc, op0=nl.subtract, operand0=mx)
            nisa.activation(dst=sc, op=nl.exp, data=sc)
            tot = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_reduce(dst=tot, op=nl.add, data=sc, axis=1)
            nisa.reciprocal(dst=tot, data=tot)
            nisa.tensor_scalar(dst=sc, data=sc, op0=nl.multiply, operand0=tot)
            acc = nl.ndarray((1, d), dtype=nl.float32, buffer=nl.psum)
            for j in range(mp):
                pp = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.psum)
                nisa.nc_transpose(dst=pp[0:pg], data=sc[0:1, j * pg:(j + 1) * pg])
                pt = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_copy(dst=pt[0:pg], src=pp[0:pg])
                nisa.nc_matmul(dst=acc[0:1, 0:d], stationary=pt[0:pg, 0:1], moving=vs[j][0:pg, 0:d])
            o = nl.ndarray((1, d), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=o, src=acc[0:1, 0:d])
            nisa.dma_copy(dst=out[bi, hh:hh + 1, :], src=o)
    return out
