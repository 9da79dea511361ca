"""Flawed: the expert structure without the RMSNorm weight: gamma is never applied."""

import nki
import nki.isa as nisa
import nki.language as nl

NT = 512


@nki.jit
def rmsnorm_gemm(x, gamma, w, eps=1e-6):
    n, d = x.shape
    _, f = w.shape
    out = nl.ndarray((n, f), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    nk = (d + p - 1) // p
    wg = []
    for kk in range(nk):
        k0 = kk * p
        kw = min(p, d - k0)
        wt = nl.ndarray((p, f), dtype=w.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=wt[0:kw], src=w[k0:k0 + kw])
        wg.append(wt)
    for i in range((n + p - 1) // p):
        rows = min(p, n - i * p)
        xt = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt[0:rows], src=x[i * p:i * p + rows])
        sq = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        ss = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(dst=sq[0:rows], op=nl.square, data=xt[0:rows], reduce_op=nl.add, reduce_res=ss[0:rows])
        rstd = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=rstd[0:rows], data=ss[0:rows], op0=nl.multiply, operand0=1.0 / d, op1=nl.add,
                           operand1=eps)
        nisa.activation(dst=rstd[0:rows], op=nl.rsqrt, data=rstd[0:rows])
        xb = nl.ndarray((p, d), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.tensor_copy(dst=xb[0:rows], src=xt[0:rows])
        x_t = []
        for kk in range(nk):
            k0 = kk * p
            kw = min(p, d - k0)
            tp = nl.ndarray((p, p), dtype=nl.bfloat16, buffer=nl.psum)
            nisa.nc_transpose(dst=tp[0:kw, 0:rows], data=xb[0:rows, k0:k0 + kw])
            ts = nl.ndarray((p, p), dtype=nl.bfloat16, buffer=nl.sbuf)
            nisa.tensor_copy(dst=ts[0:kw, 0:rows], src=tp[0:kw, 0:rows])
            x_t.append(ts)
        for j in range((f + NT - 1) // NT):
            n0 = j * NT
            nw = min(NT, f - n0)
            acc = nl.ndarray((p, NT), dtype=nl.float32, buffer=nl.psum)
            for kk in range(nk):
                kw = min(p, d - kk * p)
                nisa.nc_matmul(dst=acc[0:rows, 0:nw], stationary=x_t[kk][0:kw, 0:rows], moving=wg[kk][0:kw, n0:n0 + nw])
            res = nl.ndarray((p, NT), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=res[0:rows, 0:nw], op=nl.copy, data=acc[0:rows, 0:nw], scale=rstd[0:rows])
            nisa.dma_copy(dst=out[i * p:i * p + rows, n0:n0 + nw], src=res[0:rows, 0:nw])
    return out
