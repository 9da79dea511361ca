"""Expert solution: per batch, operands loaded once; K accumulated in PSUM; one store per block.

For each batch matrix, a_t ([K, M], K-major, as the PE array wants the stationary operand) and
b ([K, N]) are brought in with one DMA per 128-row K tile covering the whole M or N width, and
stay in SBUF while every [128, 512] block of c accumulates its K tiles in one PSUM bank. The
PSUM evacuation alternates between the Vector and Scalar engines so consecutive blocks overlap.
"""

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
    blk = 0
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
                acc = nl.ndarray((p, NT), dtype=nl.float32, buffer=nl.psum)
                for kk in range(nk):
                    kw = min(p, k - kk * p)
                    nisa.nc_matmul(dst=acc[0:mw, 0:nw], stationary=at[kk][0:kw, m0:m0 + mw],
                                   moving=bt[kk][0:kw, n0:n0 + nw])
                res = nl.ndarray((p, NT), dtype=nl.float32, buffer=nl.sbuf)
                if blk % 2 == 0:
                    nisa.tensor_copy(dst=res[0:mw, 0:nw], src=acc[0:mw, 0:nw])
                else:
                    nisa.activation(dst=res[0:mw, 0:nw], op=nl.copy, data=acc[0:mw, 0:nw])
                blk += 1
                nisa.dma_copy(dst=c[bi, m0:m0 + mw, n0:n0 + nw], src=res[0:mw, 0:nw])
    return c
