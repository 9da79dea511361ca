"""Baseline: dequantise-then-GEMM: operands widened to bf16 by the DMA, reloaded per output block.

For every [128, 512] output block and K tile, the a and b tiles are re-read and cast to bf16
on the way in (2 bytes per element in SBUF instead of 1), the bf16 GEMM accumulates in PSUM,
and the scales are applied in two more instructions with the scale_b row re-broadcast for
every block. Correct for every shape.
"""

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
    for mi in range((m + p - 1) // p):
        m0 = mi * p
        mw = min(p, m - m0)
        sa = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=sa[0:mw], src=scale_a[m0:m0 + mw].reshape((mw, 1)))
        for nj in range((n + NT - 1) // NT):
            n0 = nj * NT
            nw = min(NT, n - n0)
            acc = nl.ndarray((p, NT), dtype=nl.float32, buffer=nl.psum)
            for kk in range((k + p - 1) // p):
                k0 = kk * p
                kw = min(p, k - k0)
                ta = nl.ndarray((p, p), dtype=nl.bfloat16, buffer=nl.sbuf)
                nisa.dma_copy(dst=ta[0:kw, 0:mw], src=a_t[k0:k0 + kw, m0:m0 + mw])
                tb = nl.ndarray((p, NT), dtype=nl.bfloat16, buffer=nl.sbuf)
                nisa.dma_copy(dst=tb[0:kw, 0:nw], src=b[k0:k0 + kw, n0:n0 + nw])
                nisa.nc_matmul(dst=acc[0:mw, 0:nw], stationary=ta[0:kw, 0:mw], moving=tb[0:kw, 0:nw])
            sb = nl.ndarray((p, NT), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=sb[0:mw, 0:nw], src=scale_b[n0:n0 + nw].reshape((1, nw)).broadcast(0, mw))
            res = nl.ndarray((p, NT), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=res[0:mw, 0:nw], data=acc[0:mw, 0:nw], op0=nl.multiply, operand0=sa[0:mw])
            nisa.tensor_tensor(dst=res[0:mw, 0:nw], data1=res[0:mw, 0:nw], data2=sb[0:mw, 0:nw], op=nl.multiply)
            nisa.dma_copy(dst=c[m0:m0 + mw, n0:n0 + nw], src=res[0:mw, 0:nw])
    return c
