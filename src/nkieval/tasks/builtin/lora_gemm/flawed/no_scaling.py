"""Flawed: the low-rank product is added without the alpha / R scaling."""

import nki
import nki.isa as nisa
import nki.language as nl

NT = 512


@nki.jit
def lora_gemm(x_t, w, lora_a, lora_b, scaling=2.0):
    d, n = x_t.shape
    _, f = w.shape
    r = lora_a.shape[1]
    out = nl.ndarray((n, f), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    nk = (d + p - 1) // p
    wt, at = [], []
    for kk in range(nk):
        k0 = kk * p
        kw = min(p, d - k0)
        t = nl.ndarray((p, f), dtype=w.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[0:kw], src=w[k0:k0 + kw])
        wt.append(t)
        a = nl.ndarray((p, r), dtype=lora_a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a[0:kw], src=lora_a[k0:k0 + kw])
        at.append(a)
    b16 = nl.ndarray((p, f), dtype=lora_b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=b16[0:r], src=lora_b)
    b32 = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=b32[0:r], src=b16[0:r])
    for tb in range((n + p - 1) // p):
        t0 = tb * p
        tw = min(p, n - t0)
        xk = []
        for kk in range(nk):
            k0 = kk * p
            kw = min(p, d - k0)
            xt = nl.ndarray((p, p), dtype=x_t.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=xt[0:kw, 0:tw], src=x_t[k0:k0 + kw, t0:t0 + tw])
            xk.append(xt)
        low_ps = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.psum)
        for kk in range(nk):
            kw = min(p, d - kk * p)
            nisa.nc_matmul(dst=low_ps[0:r, 0:tw], stationary=at[kk][0:kw, 0:r], moving=xk[kk][0:kw, 0:tw])
        low = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=low[0:r, 0:tw], src=low_ps[0:r, 0:tw])
        for j in range((f + NT - 1) // NT):
            c0 = j * NT
            cw = min(NT, f - c0)
            acc = nl.ndarray((p, NT), dtype=nl.float32, buffer=nl.psum)
            for kk in range(nk):
                kw = min(p, d - kk * p)
                nisa.nc_matmul(dst=acc[0:tw, 0:cw], stationary=xk[kk][0:kw, 0:tw], moving=wt[kk][0:kw, c0:c0 + cw])
            nisa.nc_matmul(dst=acc[0:tw, 0:cw], stationary=low[0:r, 0:tw], moving=b32[0:r, c0:c0 + cw])
            res = nl.ndarray((p, NT), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res[0:tw, 0:cw], src=acc[0:tw, 0:cw])
            nisa.dma_copy(dst=out[t0:t0 + tw, c0:c0 + cw], src=res[0:tw, 0:cw])
    return out
