"""Baseline: the textbook tiled loop nest; a^T tiles come from a permuted (column-major) DMA.

For every [128, 512] block of c and every 128-deep K slice, the a block is read from HBM
already transposed by a strided DMA and the b block is reloaded; the K products accumulate in
PSUM. Correct for every shape, but a is re-read N/512 times, b M/128 times, and the transposing
DMA moves 4-byte elements.
"""

import nki
import nki.isa as nisa
import nki.language as nl

NT = 512


@nki.jit
def gemm_fp32(a, b):
    m, k = a.shape
    _, n = b.shape
    c = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
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
                lhs = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.sbuf)
                nisa.dma_copy(dst=lhs[0:kw, 0:mw], src=a[m0:m0 + mw, k0:k0 + kw].permute((1, 0)))
                rhs = nl.ndarray((p, NT), dtype=nl.float32, buffer=nl.sbuf)
                nisa.dma_copy(dst=rhs[0:kw, 0:nw], src=b[k0:k0 + kw, n0:n0 + nw])
                nisa.nc_matmul(dst=acc[0:mw, 0:nw], stationary=lhs[0:kw, 0:mw], moving=rhs[0:kw, 0:nw])
            res = nl.ndarray((p, NT), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res[0:mw, 0:nw], src=acc[0:mw, 0:nw])
            nisa.dma_copy(dst=c[m0:m0 + mw, n0:n0 + nw], src=res[0:mw, 0:nw])
    return c
