"""Flawed: query head h is served by kv head h % Hkv (interleaved groups) instead of h // G."""

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
    nsb = (s + p - 1) // p
    for bi in range(b):
        for h in range(hkv):
            k_t = nl.ndarray((p, s), dtype=k_cache.dtype, buffer=nl.sbuf)
            vs = []
            for j in range(nsb):
                j0 = j * p
                jw = min(p, s - j0)
                kb = nl.ndarray((p, d), dtype=k_cache.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=kb[0:jw], src=k_cache[bi, j0:j0 + jw, h, :])
                tp = nl.ndarray((p, p), dtype=k_cache.dtype, buffer=nl.psum)
                nisa.nc_transpose(dst=tp[0:d, 0:jw], data=kb[0:jw, 0:d])
                nisa.tensor_copy(dst=k_t[0:d, j0:j0 + jw], src=tp[0:d, 0:jw])
                vb = nl.ndarray((p, d), dtype=v_cache.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=vb[0:jw], src=v_cache[bi, j0:j0 + jw, h, :])
                vf = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_copy(dst=vf[0:jw], src=vb[0:jw])
                vs.append(vf)
            qb = nl.ndarray((p, d), dtype=q.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=qb[0:g], src=q[bi, h:hq:hkv, :])
            qp = nl.ndarray((p, p), dtype=q.dtype, buffer=nl.psum)
            nisa.nc_transpose(dst=qp[0:d, 0:g], data=qb[0:g, 0:d])
            q_t = nl.ndarray((p, p), dtype=q.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=q_t[0:d, 0:g], src=qp[0:d, 0:g])
            sc = nl.ndarray((p, s), dtype=nl.float32, buffer=nl.sbuf)
            for c in range((s + TS - 1) // TS):
                c0 = c * TS
                cw = min(TS, s - c0)
                ps = nl.ndarray((p, TS), dtype=nl.float32, buffer=nl.psum)
                nisa.nc_matmul(dst=ps[0:g, 0:cw], stationary=q_t[0:d, 0:g], moving=k_t[0:d, c0:c0 + cw])
                nisa.activation(dst=sc[0:g, c0:c0 + cw], op=nl.copy, data=ps[0:g, 0:cw], scale=scale)
            neg = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_reduce(dst=neg[0:g], op=nl.maximum, data=sc[0:g], axis=1, negate=True)
            tot = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation_reduce(dst=sc[0:g], op=nl.exp, data=sc[0:g], bias=neg[0:g], reduce_op=nl.add,
                                   reduce_res=tot[0:g])
            inv = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.reciprocal(dst=inv[0:g], data=tot[0:g])
            acc = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.psum)
            for j in range(nsb):
                j0 = j * p
                jw = min(p, s - j0)
                pp = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.psum)
                nisa.nc_transpose(dst=pp[0:jw, 0:g], data=sc[0:g, j0:j0 + jw])
                pt = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_copy(dst=pt[0:jw, 0:g], src=pp[0:jw, 0:g])
                nisa.nc_matmul(dst=acc[0:g, 0:d], stationary=pt[0:jw, 0:g], moving=vs[j][0:jw, 0:d])
            o = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=o[0:g], data=acc[0:g, 0:d], op0=nl.multiply, operand0=inv[0:g])
            nisa.dma_copy(dst=out[bi, h:hq:hkv, :], src=o[0:g])
    return out
