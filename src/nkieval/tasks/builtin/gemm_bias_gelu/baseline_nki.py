"""Baseline: 128 x 512 output tiles, K accumulated in PSUM, the x strip loaded once per M tile but
w's tiles and the bias re-read from HBM for every M tile; bias add and GELU per output tile."""

import math

import nki
import nki.isa as nisa
import nki.language as nl

TN = 512


@nki.jit
def gemm_bias_gelu(x_t, w, bias):
    k, m = x_t.shape
    _, n = w.shape
    p = nl.tile_size.pmax
    kt = math.ceil(k / p)
    out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    for mi in nl.affine_range(math.ceil(m / p)):
        m0 = mi * p
        mm = min(p, m - m0)
        x_sb = nl.ndarray((p, kt, p), dtype=x_t.dtype, buffer=nl.sbuf)
        for ki in nl.affine_range(kt):
            k0 = ki * p
            kk = min(p, k - k0)
            nisa.dma_copy(dst=x_sb[0:kk, ki, 0:mm], src=x_t[k0:k0 + kk, m0:m0 + mm])
        for ni in nl.affine_range(math.ceil(n / TN)):
            n0 = ni * TN
            cw = min(TN, n - n0)
            acc = nl.ndarray((p, TN), dtype=nl.float32, buffer=nl.psum)
            for ki in nl.affine_range(kt):
                k0 = ki * p
                kk = min(p, k - k0)
                rhs = nl.ndarray((p, TN), dtype=w.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=rhs[0:kk, 0:cw], src=w[k0:k0 + kk, n0:n0 + cw])
                nisa.nc_matmul(dst=acc[0:mm, 0:cw], stationary=x_sb[0:kk, ki, 0:mm], moving=rhs[0:kk, 0:cw])
            b_all = nl.broadcast_to(nl.load(bias[n0:n0 + cw].reshape((1, cw))), (p, cw))
            res = nl.ndarray((p, TN), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res[0:mm, 0:cw], src=acc[0:mm, 0:cw])
            nisa.tensor_tensor(dst=res[0:mm, 0:cw], data1=res[0:mm, 0:cw], data2=b_all[0:mm], op=nl.add)
            nisa.activation(dst=res[0:mm, 0:cw], op=nl.gelu, data=res[0:mm, 0:cw])
            nisa.dma_copy(dst=out[m0:m0 + mm, n0:n0 + cw], src=res[0:mm, 0:cw])
    return out
