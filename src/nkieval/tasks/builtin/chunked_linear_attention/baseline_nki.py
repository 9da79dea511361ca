"""Baseline: the quadratic form o = tril(Q K^T) V, 128 x 128 blocks, K^T and V re-read per query block.

For each query block i and every key block j <= i: A_ij^T = K_j Q_i^T on the PE array (K_j^T and
Q_i^T fetched with transposing DMAs), the diagonal block masked, and A_ij V_j accumulated in
PSUM. Correct for every shape, but the work grows with T^2 and every key block is re-read for
every later query block.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def chunked_linear_attention(q, k, v):
    t, dk = q.shape
    dv = v.shape[1]
    o = nl.ndarray((t, dv), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    for i in range((t + p - 1) // p):
        i0 = i * p
        iw = min(p, t - i0)
        q_t = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=q_t[0:dk, 0:iw], src=q[i0:i0 + iw].permute((1, 0)))
        o_ps = nl.ndarray((p, dv), dtype=nl.float32, buffer=nl.psum)
        for j in range(i + 1):
            j0 = j * p
            jw = min(p, t - j0)
            k_t = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=k_t[0:dk, 0:jw], src=k[j0:j0 + jw].permute((1, 0)))
            vj = nl.ndarray((p, dv), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=vj[0:jw], src=v[j0:j0 + jw])
            a_ps = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=a_ps[0:jw, 0:iw], stationary=k_t[0:dk, 0:jw], moving=q_t[0:dk, 0:iw])
            a_t = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=a_t[0:jw, 0:iw], src=a_ps[0:jw, 0:iw])
            if j == i:
                nisa.affine_select(dst=a_t[0:jw, 0:iw], pattern=[[1, iw]], channel_multiplier=-1,
                                   on_true_tile=a_t[0:jw, 0:iw], on_false_value=0.0, cmp_op=nl.greater_equal,
                                   offset=0)
            nisa.nc_matmul(dst=o_ps[0:iw, 0:dv], stationary=a_t[0:jw, 0:iw], moving=vj[0:jw, 0:dv])
        ot = nl.ndarray((p, dv), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=ot[0:iw], src=o_ps[0:iw, 0:dv])
        nisa.dma_copy(dst=o[i0:i0 + iw], src=ot[0:iw])
    return o
