"""Baseline: the decode step run one sequence at a time (the CUDA kernels' row-per-block structure).

Each sequence does its own RMSNorm, projections, RoPE, attention and out-projection, so every
weight matrix is re-read from HBM B times and every projection matmul has a single stationary
row. Correct for every shape; the same on-chip dataflow as the expert otherwise.
"""

import math

import nki
import nki.isa as nisa
import nki.language as nl

NT = 512


def _widen(w, rows, cols, p):
    tiles = []
    for kk in range((rows + p - 1) // p):
        k0 = kk * p
        kw = min(p, rows - k0)
        t16 = nl.ndarray((p, cols), dtype=w.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t16[0:kw], src=w[k0:k0 + kw])
        t32 = nl.ndarray((p, cols), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=t32[0:kw], src=t16[0:kw])
        tiles.append(t32)
    return tiles


def _project(h_t, w_tiles, rows, cols, b, p, dst):
    """dst[0:b, :] = h @ W with h^T tiles [128, b] (stationary) and W tiles [128, cols] (moving)."""
    for j in range((cols + NT - 1) // NT):
        c0 = j * NT
        cw = min(NT, cols - c0)
        ps = nl.ndarray((p, NT), dtype=nl.float32, buffer=nl.psum)
        for kk in range(len(w_tiles)):
            kw = min(p, rows - kk * p)
            nisa.nc_matmul(dst=ps[0:b, 0:cw], stationary=h_t[kk][0:kw, 0:b], moving=w_tiles[kk][0:kw, c0:c0 + cw])
        nisa.tensor_copy(dst=dst[0:b, c0:c0 + cw], src=ps[0:b, 0:cw])


def _rope(z, c, s, b, h, dh, p):
    half = dh // 2
    z3 = z[0:b].reshape((b, h, dh))
    rot = nl.ndarray((p, h, dh), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=rot[0:b, :, 0:half], data1=z3[:, :, half:dh], data2=s[0:b, :, 0:half].broadcast(1, h),
                       op=nl.multiply)
    nisa.tensor_tensor(dst=rot[0:b, :, half:dh], data1=z3[:, :, 0:half], data2=s[0:b, :, half:dh].broadcast(1, h),
                       op=nl.multiply)
    nisa.tensor_tensor(dst=z3, data1=z3, data2=c[0:b].broadcast(1, h), op=nl.multiply)
    nisa.tensor_tensor(dst=z3, data1=z3, data2=rot[0:b], op=nl.add)


def _step(x, gamma, wq, wk, wv, cos, sin, k_cache, v_cache, wo, eps, out):
    b, dm = x.shape
    hd = wq.shape[1]
    _, s, h, dh = k_cache.shape
    p = nl.tile_size.pmax
    scale = 1.0 / math.sqrt(dh)
    wq32 = _widen(wq, dm, hd, p)
    wk32 = _widen(wk, dm, hd, p)
    wv32 = _widen(wv, dm, hd, p)
    wo32 = _widen(wo, hd, dm, p)
    # RMSNorm
    xt = nl.ndarray((p, dm), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=xt[0:b], src=x)
    sq = nl.ndarray((p, dm), dtype=nl.float32, buffer=nl.sbuf)
    ss = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation_reduce(dst=sq[0:b], op=nl.square, data=xt[0:b], reduce_op=nl.add, reduce_res=ss[0:b])
    nisa.tensor_scalar(dst=ss[0:b], data=ss[0:b], op0=nl.multiply, operand0=1.0 / dm, op1=nl.add, operand1=eps)
    nisa.activation(dst=ss[0:b], op=nl.rsqrt, data=ss[0:b])
    g = nl.ndarray((p, dm), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=g[0:b], src=gamma.reshape((1, dm)).broadcast(0, b))
    hn = nl.ndarray((p, dm), dtype=nl.float32, buffer=nl.sbuf)
    nisa.scalar_tensor_tensor(dst=hn[0:b], data=xt[0:b], op0=nl.multiply, operand0=ss[0:b], op1=nl.multiply,
                              operand1=g[0:b])
    h_t = []
    for kk in range((dm + p - 1) // p):
        k0 = kk * p
        kw = min(p, dm - k0)
        tp = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_transpose(dst=tp[0:kw, 0:b], data=hn[0:b, k0:k0 + kw])
        ts = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=ts[0:kw, 0:b], src=tp[0:kw, 0:b])
        h_t.append(ts)
    q_sb = nl.ndarray((p, hd), dtype=nl.float32, buffer=nl.sbuf)
    k_sb = nl.ndarray((p, hd), dtype=nl.float32, buffer=nl.sbuf)
    v_sb = nl.ndarray((p, hd), dtype=nl.float32, buffer=nl.sbuf)
    _project(h_t, wq32, dm, hd, b, p, q_sb)
    _project(h_t, wk32, dm, hd, b, p, k_sb)
    _project(h_t, wv32, dm, hd, b, p, v_sb)
    c = nl.ndarray((p, 1, dh), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=c[0:b, 0, :], src=cos)
    sn = nl.ndarray((p, 1, dh), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=sn[0:b, 0, :], src=sin)
    _rope(q_sb, c, sn, b, h, dh, p)
    _rope(k_sb, c, sn, b, h, dh, p)
    # attention
    nt = s + 1
    nblk = (nt + p - 1) // p
    attn_t = [nl.ndarray((p, p), dtype=nl.float32, buffer=nl.sbuf) for _ in range((hd + p - 1) // p)]
    for hh in range(h):
        qp = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_transpose(dst=qp[0:dh, 0:b], data=q_sb[0:b, hh * dh:(hh + 1) * dh])
        q_t = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=q_t[0:dh, 0:b], src=qp[0:dh, 0:b])
        for bi in range(b):
            k_t = nl.ndarray((p, nt), dtype=nl.float32, buffer=nl.sbuf)
            vbl = []
            for j in range(nblk):
                j0 = j * p
                jw = min(p, nt - j0)
                cached = min(jw, max(0, s - j0))
                kb = nl.ndarray((p, dh), dtype=nl.float32, buffer=nl.sbuf)
                vb = nl.ndarray((p, dh), dtype=nl.float32, buffer=nl.sbuf)
                if cached > 0:
                    nisa.dma_copy(dst=kb[0:cached], src=k_cache[bi, j0:j0 + cached, hh, :])
                    nisa.dma_copy(dst=vb[0:cached], src=v_cache[bi, j0:j0 + cached, hh, :])
                if cached < jw:  # the new token's row (position s)
                    nisa.dma_copy(dst=kb[cached:cached + 1], src=k_sb[bi:bi + 1, hh * dh:(hh + 1) * dh])
                    nisa.dma_copy(dst=vb[cached:cached + 1], src=v_sb[bi:bi + 1, hh * dh:(hh + 1) * dh])
                tp = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.psum)
                nisa.nc_transpose(dst=tp[0:dh, 0:jw], data=kb[0:jw, 0:dh])
                nisa.tensor_copy(dst=k_t[0:dh, j0:j0 + jw], src=tp[0:dh, 0:jw])
                vbl.append(vb)
            sc = nl.ndarray((1, nt), dtype=nl.float32, buffer=nl.sbuf)
            for cc in range((nt + NT - 1) // NT):
                c0 = cc * NT
                cw = min(NT, nt - c0)
                ps = nl.ndarray((1, NT), dtype=nl.float32, buffer=nl.psum)
                nisa.nc_matmul(dst=ps[0:1, 0:cw], stationary=q_t[0:dh, bi:bi + 1], moving=k_t[0:dh, c0:c0 + cw])
                nisa.activation(dst=sc[0:1, c0:c0 + cw], op=nl.copy, data=ps[0:1, 0:cw], scale=scale)
            neg = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_reduce(dst=neg, op=nl.maximum, data=sc, axis=1, negate=True)
            tot = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation_reduce(dst=sc, op=nl.exp, data=sc, bias=neg, reduce_op=nl.add, reduce_res=tot)
            nisa.reciprocal(dst=tot, data=tot)
            nisa.tensor_scalar(dst=sc, data=sc, op0=nl.multiply, operand0=tot)
            ov = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.psum)
            for j in range(nblk):
                j0 = j * p
                jw = min(p, nt - j0)
                pp = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.psum)
                nisa.nc_transpose(dst=pp[0:jw], data=sc[0:1, j0:j0 + jw])
                pt = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_copy(dst=pt[0:jw], src=pp[0:jw])
                nisa.nc_matmul(dst=ov[0:dh, 0:1], stationary=vbl[j][0:jw, 0:dh], moving=pt[0:jw, 0:1])
            r0 = hh * dh
            nisa.tensor_copy(dst=attn_t[r0 // p][r0 % p:r0 % p + dh, bi:bi + 1], src=ov[0:dh, 0:1])
    # out = x + attn @ wo
    res = nl.ndarray((p, dm), dtype=nl.float32, buffer=nl.sbuf)
    _project(attn_t, wo32, hd, dm, b, p, res)
    nisa.tensor_tensor(dst=res[0:b], data1=res[0:b], data2=xt[0:b], op=nl.add)
    nisa.dma_copy(dst=out, src=res[0:b])


@nki.jit
def decoder_decode_step(x, gamma, wq, wk, wv, cos, sin, k_cache, v_cache, wo, eps=1e-6):
    b, dm = x.shape
    out = nl.ndarray((b, dm), dtype=nl.float32, buffer=nl.shared_hbm)
    for bi in range(b):
        _step(x[bi:bi + 1], gamma, wq, wk, wv, cos[bi:bi + 1], sin[bi:bi + 1], k_cache[bi:bi + 1],
              v_cache[bi:bi + 1], wo, eps, out[bi:bi + 1])
    return out
