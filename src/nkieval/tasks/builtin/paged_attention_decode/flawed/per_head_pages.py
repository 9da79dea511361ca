"""Flawed: every page is fetched once per head ([PG, D] slices) instead of once for all heads."""

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
        qb = nl.ndarray((p, d), dtype=q.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=qb[0:h], src=q[bi])
        for hh in range(h):
            kpg, vpg = [], []
            for j in range(mp):
                pid = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
                nisa.dma_copy(dst=pid, src=block_table[bi:bi + 1, j:j + 1])
                kt = nl.ndarray((p, d), dtype=k_pages.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=kt[0:pg], src=k_pages.ap(pattern=[[hd, pg], [1, d]], offset=hh * d, scalar_offset=pid,
                                                            indirect_dim=0))
                vt = nl.ndarray((p, d), dtype=v_pages.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=vt[0:pg], src=v_pages.ap(pattern=[[hd, pg], [1, d]], offset=hh * d, scalar_offset=pid,
                                                            indirect_dim=0))
                v32 = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_copy(dst=v32[0:pg], src=vt[0:pg])
                kpg.append(kt)
                vpg.append(v32)
            qp = nl.ndarray((p, 1), dtype=q.dtype, buffer=nl.psum)
            nisa.nc_transpose(dst=qp[0:d, 0:1], data=qb[hh:hh + 1, 0:d])
            q_t = nl.ndarray((p, 1), dtype=q.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=q_t[0:d], src=qp[0:d])
            k_t = nl.ndarray((p, s), dtype=k_pages.dtype, buffer=nl.sbuf)
            for j in range(mp):
                tp = nl.ndarray((p, p), dtype=k_pages.dtype, buffer=nl.psum)
                nisa.nc_transpose(dst=tp[0:d, 0:pg], data=kpg[j][0:pg, 0:d])
                nisa.tensor_copy(dst=k_t[0:d, j * pg:(j + 1) * pg], src=tp[0:d, 0:pg])
            sc = nl.ndarray((1, s), dtype=nl.float32, buffer=nl.sbuf)
            for c in range((s + TS - 1) // TS):
                c0 = c * TS
                cw = min(TS, s - c0)
                ps = nl.ndarray((1, TS), dtype=nl.float32, buffer=nl.psum)
                nisa.nc_matmul(dst=ps[0:1, 0:cw], stationary=q_t[0:d, 0:1], moving=k_t[0:d, c0:c0 + cw])
                nisa.activation(dst=sc[0:1, c0:c0 + cw], op=nl.copy, data=ps[0:1, 0:cw], scale=scale)
            neg = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_reduce(dst=neg, op=nl.maximum, data=sc, axis=1, negate=True)
            tot = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation_reduce(dst=sc, op=nl.exp, data=sc, bias=neg, reduce_op=nl.add, reduce_res=tot)
            inv = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.reciprocal(dst=inv, data=tot)
            acc = nl.ndarray((1, d), dtype=nl.float32, buffer=nl.psum)
            for j in range(mp):
                pp = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.psum)
                nisa.nc_transpose(dst=pp[0:pg], data=sc[0:1, j * pg:(j + 1) * pg])
                pt = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_copy(dst=pt[0:pg], src=pp[0:pg])
                nisa.nc_matmul(dst=acc[0:1, 0:d], stationary=pt[0:pg, 0:1], moving=vpg[j][0:pg, 0:d])
            o = nl.ndarray((1, d), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=o, data=acc[0:1, 0:d], op0=nl.multiply, operand0=inv)
            nisa.dma_copy(dst=out[bi, hh:hh + 1, :], src=o)
    return out
