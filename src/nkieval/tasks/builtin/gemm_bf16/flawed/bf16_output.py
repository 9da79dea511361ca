"""Flawed: accumulates in fp32 PSUM, then evacuates it into a bf16 tile before the fp32 store."""

import math

import nki
import nki.isa as nisa
import nki.language as nl

TN = 512   # one PSUM bank of fp32 per partition
NB = 2048  # columns of B kept resident per block
MB = 512   # columns of A (rows of C) loaded per DMA block


@nki.jit
def gemm_bf16(a_t, b):
    k, m = a_t.shape
    _, n = b.shape
    p = nl.tile_size.pmax
    kt = math.ceil(k / p)
    c = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    for nb in nl.affine_range(math.ceil(n / NB)):
        n0 = nb * NB
        nw = min(NB, n - n0)
        b_sb = nl.ndarray((p, kt, NB), dtype=b.dtype, buffer=nl.sbuf)
        for ki in nl.affine_range(kt):
            k0 = ki * p
            kk = min(p, k - k0)
            nisa.dma_copy(dst=b_sb[0:kk, ki, 0:nw], src=b[k0:k0 + kk, n0:n0 + nw])
        for mb in nl.affine_range(math.ceil(m / MB)):
            mb0 = mb * MB
            mbw = min(MB, m - mb0)
            a_sb = nl.ndarray((p, kt, MB), dtype=a_t.dtype, buffer=nl.sbuf)
            for ki in nl.affine_range(kt):
                k0 = ki * p
                kk = min(p, k - k0)
                nisa.dma_copy(dst=a_sb[0:kk, ki, 0:mbw], src=a_t[k0:k0 + kk, mb0:mb0 + mbw])
            for mi in nl.affine_range(math.ceil(mbw / p)):
                a0 = mi * p
                m0 = mb0 + a0
                mm = min(p, mbw - a0)
                res16 = nl.ndarray((p, NB), dtype=nl.bfloat16, buffer=nl.sbuf)
                res = nl.ndarray((p, NB), dtype=nl.float32, buffer=nl.sbuf)
                for ni in nl.affine_range(math.ceil(nw / TN)):
                    c0 = ni * TN
                    cw = min(TN, nw - c0)
                    acc = nl.ndarray((p, TN), dtype=nl.float32, buffer=nl.psum)
                    for ki in nl.affine_range(kt):
                        kk = min(p, k - ki * p)
                        nisa.nc_matmul(dst=acc[0:mm, 0:cw], stationary=a_sb[0:kk, ki, a0:a0 + mm],
                                       moving=b_sb[0:kk, ki, c0:c0 + cw])
                    nisa.tensor_copy(dst=res16[0:mm, c0:c0 + cw], src=acc[0:mm, 0:cw])
                nisa.tensor_copy(dst=res[0:mm, 0:nw], src=res16[0:mm, 0:nw])
                nisa.dma_copy(dst=c[m0:m0 + mm, n0:n0 + nw], src=res[0:mm, 0:nw])
    return c
