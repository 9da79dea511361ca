"""Flawed: every expert's w1 and w2 are reloaded from HBM (and w2 re-widened) for every token block."""

import nki
import nki.isa as nisa
import nki.language as nl

NT = 512


@nki.jit
def moe_expert_block(x_t, router_w, w1, w2):
    d, t = x_t.shape
    e = router_w.shape[1]
    h = w1.shape[2]
    out = nl.ndarray((t, d), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    nk = (d + p - 1) // p
    nh = (h + p - 1) // p
    nb = (d + NT - 1) // NT
    rw = []
    for kk in range(nk):
        k0 = kk * p
        kw = min(p, d - k0)
        r = nl.ndarray((p, e), dtype=router_w.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=r[0:kw], src=router_w[k0:k0 + kw])
        rw.append(r)
    for tb in range((t + p - 1) // p):
        t0 = tb * p
        tw = min(p, t - t0)
        w1s, w2s = [], []
        for ex in range(e):
            a_tiles, b_tiles = [], []
            for kk in range(nk):
                k0 = kk * p
                kw = min(p, d - k0)
                a = nl.ndarray((p, h), dtype=w1.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=a[0:kw], src=w1[ex, k0:k0 + kw, :])
                a_tiles.append(a)
            for hh in range(nh):
                h0 = hh * p
                hw = min(p, h - h0)
                b16 = nl.ndarray((p, d), dtype=w2.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=b16[0:hw], src=w2[ex, h0:h0 + hw, :])
                b32 = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_copy(dst=b32[0:hw], src=b16[0:hw])
                b_tiles.append(b32)
            w1s.append(a_tiles)
            w2s.append(b_tiles)
        xk = []
        for kk in range(nk):
            k0 = kk * p
            kw = min(p, d - k0)
            xt = nl.ndarray((p, p), dtype=x_t.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=xt[0:kw, 0:tw], src=x_t[k0:k0 + kw, t0:t0 + tw])
            xk.append(xt)
        lg_ps = nl.ndarray((p, e), dtype=nl.float32, buffer=nl.psum)
        for kk in range(nk):
            kw = min(p, d - kk * p)
            nisa.nc_matmul(dst=lg_ps[0:tw, 0:e], stationary=xk[kk][0:kw, 0:tw], moving=rw[kk][0:kw, 0:e])
        lg = nl.ndarray((p, e), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=lg[0:tw], src=lg_ps[0:tw, 0:e])
        top = nl.ndarray((p, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.max8(dst=top[0:tw], src=lg[0:tw])
        neg1 = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=neg1[0:tw], data=top[0:tw, 0:1], op0=nl.multiply, operand0=-1.0)
        norm = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=norm[0:tw], op=nl.exp, data=top[0:tw, 1:2], bias=neg1[0:tw])
        nisa.tensor_scalar(dst=norm[0:tw], data=norm[0:tw], op0=nl.add, operand0=1.0)
        nisa.reciprocal(dst=norm[0:tw], data=norm[0:tw])
        sel = nl.ndarray((p, e), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=sel[0:tw], data=lg[0:tw], op0=nl.greater_equal, operand0=top[0:tw, 1:2],
                           op1=nl.multiply, operand1=norm[0:tw])
        gate = nl.ndarray((p, e), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=gate[0:tw], op=nl.exp, data=lg[0:tw], bias=neg1[0:tw])
        nisa.tensor_tensor(dst=gate[0:tw], data1=gate[0:tw], data2=sel[0:tw], op=nl.multiply)
        res = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=res[0:tw], value=0.0)
        for ex in range(e):
            acc = [nl.ndarray((p, NT), dtype=nl.float32, buffer=nl.psum) for _ in range(nb)]
            for hh in range(nh):
                h0 = hh * p
                hw = min(p, h - h0)
                h_ps = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.psum)
                for kk in range(nk):
                    kw = min(p, d - kk * p)
                    nisa.nc_matmul(dst=h_ps[0:hw, 0:tw], stationary=w1s[ex][kk][0:kw, h0:h0 + hw],
                                   moving=xk[kk][0:kw, 0:tw])
                act = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.sbuf)
                nisa.activation(dst=act[0:hw, 0:tw], op=nl.silu, data=h_ps[0:hw, 0:tw])
                for j in range(nb):
                    c0 = j * NT
                    cw = min(NT, d - c0)
                    nisa.nc_matmul(dst=acc[j][0:tw, 0:cw], stationary=act[0:hw, 0:tw],
                                   moving=w2s[ex][hh][0:hw, c0:c0 + cw])
            for j in range(nb):
                c0 = j * NT
                cw = min(NT, d - c0)
                nisa.scalar_tensor_tensor(dst=res[0:tw, c0:c0 + cw], data=acc[j][0:tw, 0:cw], op0=nl.multiply,
                                          operand0=gate[0:tw, ex:ex + 1], op1=nl.add, operand1=res[0:tw, c0:c0 + cw])
        nisa.dma_copy(dst=out[t0:t0 + tw], src=res[0:tw])
    return out
