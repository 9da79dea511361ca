"""Flawed: K-tile products land in separate PSUM tiles and are summed on the Vector engine."""

import nki
import nki.isa as nisa
import nki.language as nl

NT = 512


@nki.jit
def fp8_gemm_scaled(a_t, b, scale_a, scale_b):
    k, m = a_t.shape
    _, n = b.shape
    c = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    nk = (k + p - 1) // p
    bt = []
    for kk in range(nk):
        k0 = kk * p
        kw = min(p, k - k0)
        t = nl.ndarray((p, n), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[0:kw], src=b[k0:k0 + kw])
        bt.append(t)
    sb = nl.ndarray((p, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=sb, src=scale_b.reshape((1, n)).broadcast(0, p))
    for mi in range((m + p - 1) // p):
        m0 = mi * p
        mw = min(p, m - m0)
        sa = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=sa[0:mw], src=scale_a[m0:m0 + mw].reshape((mw, 1)))
        at = []
        for kk in range(nk):
            k0 = kk * p
            kw = min(p, k - k0)
            t = nl.ndarray((p, p), dtype=a_t.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t[0:kw, 0:mw], src=a_t[k0:k0 + kw, m0:m0 + mw])
            at.append(t)
        for nj in range((n + NT - 1) // NT):
            n0 = nj * NT
            nw = min(NT, n - n0)
            tot = nl.ndarray((p, NT), dtype=nl.float32, buffer=nl.sbuf)
            for kk in range(nk):
                kw = min(p, k - kk * p)
                part = nl.ndarray((p, NT), dtype=nl.float32, buffer=nl.psum)
                nisa.nc_matmul(dst=part[0:mw, 0:nw], stationary=at[kk][0:kw, 0:mw], moving=bt[kk][0:kw, n0:n0 + nw])
                if kk == 0:
                    nisa.tensor_copy(dst=tot[0:mw, 0:nw], src=part[0:mw, 0:nw])
                else:
                    nisa.tensor_tensor(dst=tot[0:mw, 0:nw], data1=tot[0:mw, 0:nw], data2=part[0:mw, 0:nw], op=nl.add)
            res = nl.ndarray((p, NT), dtype=nl.float32, buffer=nl.sbuf)
            nisa.scalar_tensor_tensor(dst=res[0:mw, 0:nw], data=tot[0:mw, 0:nw], op0=nl.multiply, operand0=sa[0:mw],
                                      op1=nl.multiply, operand1=sb[0:mw, n0:n0 + nw])
            nisa.dma_copy(dst=c[m0:m0 + mw, n0:n0 + nw], src=res[0:mw, 0:nw])
    return c
