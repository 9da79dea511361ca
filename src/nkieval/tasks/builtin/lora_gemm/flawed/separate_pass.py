"""Flawed: base GEMM to HBM first, then a second read-modify-write pass over out adds the LoRA term."""

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
    tmp = nl.ndarray((n, r), dtype=nl.float32, buffer=nl.hbm)
    p = nl.tile_size.pmax
    for tb in range((n + p - 1) // p):
        t0 = tb * p
        tw = min(p, n - t0)
        for j in range((f + NT - 1) // NT):
            c0 = j * NT
            cw = min(NT, f - c0)
            acc = nl.ndarray((p, NT), dtype=nl.float32, buffer=nl.psum)
            for kk in range((d + p - 1) // p):
                k0 = kk * p
                kw = min(p, d - k0)
                xt = nl.ndarray((p, p), dtype=x_t.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=xt[0:kw, 0:tw], src=x_t[k0:k0 + kw, t0:t0 + tw])
                wk = nl.ndarray((p, NT), dtype=w.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=wk[0:kw, 0:cw], src=w[k0:k0 + kw, c0:c0 + cw])
                nisa.nc_matmul(dst=acc[0:tw, 0:cw], stationary=xt[0:kw, 0:tw], moving=wk[0:kw, 0:cw])
            res = nl.ndarray((p, NT), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res[0:tw, 0:cw], src=acc[0:tw, 0:cw])
            nisa.dma_copy(dst=out[t0:t0 + tw, c0:c0 + cw], src=res[0:tw, 0:cw])
        low = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.psum)
        for kk in range((d + p - 1) // p):
            k0 = kk * p
            kw = min(p, d - k0)
            xt = nl.ndarray((p, p), dtype=x_t.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=xt[0:kw, 0:tw], src=x_t[k0:k0 + kw, t0:t0 + tw])
            ak = nl.ndarray((p, p), dtype=lora_a.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=ak[0:kw, 0:r], src=lora_a[k0:k0 + kw])
            nisa.nc_matmul(dst=low[0:tw, 0:r], stationary=xt[0:kw, 0:tw], moving=ak[0:kw, 0:r])
        ls = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=ls[0:tw, 0:r], data=low[0:tw, 0:r], op0=nl.multiply, operand0=scaling)
        nisa.dma_copy(dst=tmp[t0:t0 + tw], src=ls[0:tw, 0:r])
    for tb in range((n + p - 1) // p):
        t0 = tb * p
        tw = min(p, n - t0)
        lt = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=lt[0:r, 0:tw], src=tmp[t0:t0 + tw].permute((1, 0)))
        for j in range((f + NT - 1) // NT):
            c0 = j * NT
            cw = min(NT, f - c0)
            bk = nl.ndarray((p, NT), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=bk[0:r, 0:cw], src=lora_b[:, c0:c0 + cw])
            ps = nl.ndarray((p, NT), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=ps[0:tw, 0:cw], stationary=lt[0:r, 0:tw], moving=bk[0:r, 0:cw])
            cur = nl.ndarray((p, NT), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=cur[0:tw, 0:cw], src=out[t0:t0 + tw, c0:c0 + cw])
            nisa.tensor_tensor(dst=cur[0:tw, 0:cw], data1=cur[0:tw, 0:cw], data2=ps[0:tw, 0:cw], op=nl.add)
            nisa.dma_copy(dst=out[t0:t0 + tw, c0:c0 + cw], src=cur[0:tw, 0:cw])
    return out
