"""Flawed: loads both operand tiles from HBM inside the innermost K loop, for every output tile."""

import math

import nki
import nki.isa as nisa
import nki.language as nl

TN = 512


@nki.jit
def gemm_bf16(a_t, b):
    k, m = a_t.shape
    _, n = b.shape
    p = nl.tile_size.pmax
    c = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    for mi in nl.affine_range(math.ceil(m / p)):
        m0 = mi * p
        mm = min(p, m - m0)
        for ni in nl.affine_range(math.ceil(n / TN)):
            n0 = ni * TN
            cw = min(TN, n - n0)
            acc = nl.ndarray((p, TN), dtype=nl.float32, buffer=nl.psum)
            for ki in nl.affine_range(math.ceil(k / p)):
                k0 = ki * p
                kk = min(p, k - k0)
                lhs = nl.ndarray((p, p), dtype=a_t.dtype, buffer=nl.sbuf)
                rhs = nl.ndarray((p, TN), dtype=b.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=lhs[0:kk, 0:mm], src=a_t[k0:k0 + kk, m0:m0 + mm])
                nisa.dma_copy(dst=rhs[0:kk, 0:cw], src=b[k0:k0 + kk, n0:n0 + cw])
                nisa.nc_matmul(dst=acc[0:mm, 0:cw], stationary=lhs[0:kk, 0:mm], moving=rhs[0:kk, 0:cw])
            res = nl.ndarray((p, TN), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res[0:mm, 0:cw], src=acc[0:mm, 0:cw])
            nisa.dma_copy(dst=c[m0:m0 + mm, n0:n0 + cw], src=res[0:mm, 0:cw])
    return c
