"""Flawed: w_gate, w_up and w_down are reloaded from HBM for every 128-token block."""

import nki
import nki.isa as nisa
import nki.language as nl

NT = 512


@nki.jit
def swiglu_mlp(x_t, w_gate, w_up, w_down):
    d, n = x_t.shape
    _, h = w_gate.shape
    out = nl.ndarray((n, d), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    nk = (d + p - 1) // p
    nh = (h + p - 1) // p
    nb = (d + NT - 1) // NT
    for tb in range((n + p - 1) // p):
        t0 = tb * p
        tw = min(p, n - t0)
        wg, wu = [], []
        for kk in range(nk):
            k0 = kk * p
            kw = min(p, d - k0)
            a = nl.ndarray((p, h), dtype=w_gate.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=a[0:kw], src=w_gate[k0:k0 + kw])
            b = nl.ndarray((p, h), dtype=w_up.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=b[0:kw], src=w_up[k0:k0 + kw])
            wg.append(a)
            wu.append(b)
        wd = []
        for hh in range(nh):
            h0 = hh * p
            hw = min(p, h - h0)
            t = nl.ndarray((p, d), dtype=w_down.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t[0:hw], src=w_down[h0:h0 + hw])
            t32 = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=t32[0:hw], src=t[0:hw])
            wd.append(t32)
        xk = []
        for kk in range(nk):
            k0 = kk * p
            kw = min(p, d - k0)
            xt = nl.ndarray((p, p), dtype=x_t.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=xt[0:kw, 0:tw], src=x_t[k0:k0 + kw, t0:t0 + tw])
            xk.append(xt)
        acc = [nl.ndarray((p, NT), dtype=nl.float32, buffer=nl.psum) for _ in range(nb)]
        for hh in range(nh):
            h0 = hh * p
            hw = min(p, h - h0)
            g_ps = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.psum)
            u_ps = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.psum)
            for kk in range(nk):
                kw = min(p, d - kk * p)
                nisa.nc_matmul(dst=g_ps[0:hw, 0:tw], stationary=wg[kk][0:kw, h0:h0 + hw], moving=xk[kk][0:kw, 0:tw])
                nisa.nc_matmul(dst=u_ps[0:hw, 0:tw], stationary=wu[kk][0:kw, h0:h0 + hw], moving=xk[kk][0:kw, 0:tw])
            s = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=s[0:hw, 0:tw], op=nl.silu, data=g_ps[0:hw, 0:tw])
            act = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=act[0:hw, 0:tw], data1=s[0:hw, 0:tw], data2=u_ps[0:hw, 0:tw], op=nl.multiply)
            for j in range(nb):
                c0 = j * NT
                cw = min(NT, d - c0)
                nisa.nc_matmul(dst=acc[j][0:tw, 0:cw], stationary=act[0:hw, 0:tw], moving=wd[hh][0:hw, c0:c0 + cw])
        for j in range(nb):
            c0 = j * NT
            cw = min(NT, d - c0)
            res = nl.ndarray((p, NT), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res[0:tw, 0:cw], src=acc[j][0:tw, 0:cw])
            nisa.dma_copy(dst=out[t0:t0 + tw, c0:c0 + cw], src=res[0:tw, 0:cw])
    return out
