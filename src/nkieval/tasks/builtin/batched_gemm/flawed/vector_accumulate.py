"""Flawed: K-tile products land in separate PSUM tiles and are summed on the Vector engine."""

import nki
import nki.isa as nisa
import nki.language as nl

NT = 512


@nki.jit
def batched_gemm(a_t, b):
    bsz, k, m = a_t.shape
    _, _, n = b.shape
    c = nl.ndarray((bsz, m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    nk = (k + p - 1) // p
    for bi in range(bsz):
        at, bt = [], []
        for kk in range(nk):
            k0 = kk * p
            kw = min(p, k - k0)
            ta = nl.ndarray((p, m), dtype=a_t.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=ta[0:kw], src=a_t[bi, k0:k0 + kw, :])
            tb = nl.ndarray((p, n), dtype=b.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=tb[0:kw], src=b[bi, k0:k0 + kw, :])
            at.append(ta)
            bt.append(tb)
        for mi in range((m + p - 1) // p):
            m0 = mi * p
            mw = min(p, m - m0)
            for nj in range((n + NT - 1) // NT):
                n0 = nj * NT
                nw = min(NT, n - n0)
                res = nl.ndarray((p, NT), dtype=nl.float32, buffer=nl.sbuf)
                for kk in range(nk):
                    kw = min(p, k - kk * p)
                    part = nl.ndarray((p, NT), dtype=nl.float32, buffer=nl.psum)
                    nisa.nc_matmul(dst=part[0:mw, 0:nw], stationary=at[kk][0:kw, m0:m0 + mw],
                                   moving=bt[kk][0:kw, n0:n0 + nw])
                    if kk == 0:
                        nisa.tensor_copy(dst=res[0:mw, 0:nw], src=part[0:mw, 0:nw])
                    else:
                        nisa.tensor_tensor(dst=res[0:mw, 0:nw], data1=res[0:mw, 0:nw], data2=part[0:mw, 0:nw],
                                           op=nl.add)
                nisa.dma_copy(dst=c[bi, m0:m0 + mw, n0:n0 + nw], src=res[0:mw, 0:nw])
    return c
