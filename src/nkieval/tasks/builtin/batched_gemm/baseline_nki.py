"""Baseline: per batch, a plain tiled loop nest that reloads both operand tiles for every output block.

[128, 128] output blocks, K tiles of 128 loaded for every block (a_t is re-read N/128 times and
b M/128 times per batch); accumulation in PSUM. Correct for every shape.
"""

import nki
import nki.isa as nisa
import nki.language as nl

NT = 128


@nki.jit
def batched_gemm(a_t, b):
    bsz, k, m = a_t.shape
    _, _, n = b.shape
    c = nl.ndarray((bsz, m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    for bi in range(bsz):
        for mi in range((m + p - 1) // p):
            m0 = mi * p
            mw = min(p, m - m0)
            for nj in range((n + NT - 1) // NT):
                n0 = nj * NT
                nw = min(NT, n - n0)
                acc = nl.ndarray((p, NT), dtype=nl.float32, buffer=nl.psum)
                for kk in range((k + p - 1) // p):
                    k0 = kk * p
                    kw = min(p, k - k0)
                    ta = nl.ndarray((p, p), dtype=a_t.dtype, buffer=nl.sbuf)
                    nisa.dma_copy(dst=ta[0:kw, 0:mw], src=a_t[bi, k0:k0 + kw, m0:m0 + mw])
                    tb = nl.ndarray((p, NT), dtype=b.dtype, buffer=nl.sbuf)
                    nisa.dma_copy(dst=tb[0:kw, 0:nw], src=b[bi, k0:k0 + kw, n0:n0 + nw])
                    nisa.nc_matmul(dst=acc[0:mw, 0:nw], stationary=ta[0:kw, 0:mw], moving=tb[0:kw, 0:nw])
                res = nl.ndarray((p, NT), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_copy(dst=res[0:mw, 0:nw], src=acc[0:mw, 0:nw])
                nisa.dma_copy(dst=c[bi, m0:m0 + mw, n0:n0 + nw], src=res[0:mw, 0:nw])
    return c
