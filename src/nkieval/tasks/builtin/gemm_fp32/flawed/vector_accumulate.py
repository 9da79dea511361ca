"""Flawed: every K-tile product lands in its own PSUM tile and is added to the result on the Vector engine."""

import nki
import nki.isa as nisa
import nki.language as nl

NT = 512  # one PSUM bank of fp32 per partition


@nki.jit
def gemm_fp32(a, b):
    m, k = a.shape
    _, n = b.shape
    c = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    nk = (k + p - 1) // p
    b_tiles = []
    for kk in range(nk):
        k0 = kk * p
        kw = min(p, k - k0)
        bt = nl.ndarray((p, n), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=bt[0:kw], src=b[k0:k0 + kw])
        b_tiles.append(bt)
    for mi in range((m + p - 1) // p):
        m0 = mi * p
        mw = min(p, m - m0)
        at = nl.ndarray((p, k), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=at[0:mw], src=a[m0:m0 + mw])
        a_t = []
        for kk in range(nk):
            k0 = kk * p
            kw = min(p, k - k0)
            tp = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_transpose(dst=tp[0:kw, 0:mw], data=at[0:mw, k0:k0 + kw])
            ts = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=ts[0:kw, 0:mw], src=tp[0:kw, 0:mw])
            a_t.append(ts)
        for nj in range((n + NT - 1) // NT):
            n0 = nj * NT
            nw = min(NT, n - n0)
            res = nl.ndarray((p, NT), dtype=nl.float32, buffer=nl.sbuf)
            for kk in range(nk):
                kw = min(p, k - kk * p)
                part = nl.ndarray((p, NT), dtype=nl.float32, buffer=nl.psum)
                nisa.nc_matmul(dst=part[0:mw, 0:nw], stationary=a_t[kk][0:kw, 0:mw],
                               moving=b_tiles[kk][0:kw, n0:n0 + nw])
                if kk == 0:
                    nisa.tensor_copy(dst=res[0:mw, 0:nw], src=part[0:mw, 0:nw])
                else:
                    nisa.tensor_tensor(dst=res[0:mw, 0:nw], data1=res[0:mw, 0:nw], data2=part[0:mw, 0:nw], op=nl.add)
            nisa.dma_copy(dst=c[m0:m0 + mw, n0:n0 + nw], src=res[0:mw, 0:nw])
    return c
