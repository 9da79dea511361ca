"""Flawed: computes gelu(x @ w) + bias: the bias is added after the activation instead of before."""

import math

import nki
import nki.isa as nisa
import nki.language as nl

TN = 512   # one PSUM bank of fp32 per partition
NB = 2048  # columns of w kept resident per block
MB = 512   # columns of x_t loaded per DMA block


@nki.jit
def gemm_bias_gelu(x_t, w, bias):
    k, m = x_t.shape
    _, n = w.shape
    p = nl.tile_size.pmax
    kt = math.ceil(k / p)
    out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    for nb in nl.affine_range(math.ceil(n / NB)):
        n0 = nb * NB
        nw = min(NB, n - n0)
        w_sb = nl.ndarray((p, kt, NB), dtype=w.dtype, buffer=nl.sbuf)
        for ki in nl.affine_range(kt):
            k0 = ki * p
            kk = min(p, k - k0)
            nisa.dma_copy(dst=w_sb[0:kk, ki, 0:nw], src=w[k0:k0 + kk, n0:n0 + nw])
        b_all = nl.broadcast_to(nl.load(bias[n0:n0 + nw].reshape((1, nw))), (p, nw))
        for mb in nl.affine_range(math.ceil(m / MB)):
            mb0 = mb * MB
            mbw = min(MB, m - mb0)
            x_sb = nl.ndarray((p, kt, MB), dtype=x_t.dtype, buffer=nl.sbuf)
            for ki in nl.affine_range(kt):
                k0 = ki * p
                kk = min(p, k - k0)
                nisa.dma_copy(dst=x_sb[0:kk, ki, 0:mbw], src=x_t[k0:k0 + kk, mb0:mb0 + mbw])
            for mi in nl.affine_range(math.ceil(mbw / p)):
                a0 = mi * p
                m0 = mb0 + a0
                mm = min(p, mbw - a0)
                res = nl.ndarray((p, NB), dtype=nl.float32, buffer=nl.sbuf)
                for ni in nl.affine_range(math.ceil(nw / TN)):
                    c0 = ni * TN
                    cw = min(TN, nw - c0)
                    acc = nl.ndarray((p, TN), dtype=nl.float32, buffer=nl.psum)
                    for ki in nl.affine_range(kt):
                        kk = min(p, k - ki * p)
                        nisa.nc_matmul(dst=acc[0:mm, 0:cw], stationary=x_sb[0:kk, ki, a0:a0 + mm],
                                       moving=w_sb[0:kk, ki, c0:c0 + cw])
                    nisa.tensor_copy(dst=res[0:mm, c0:c0 + cw], src=acc[0:mm, 0:cw])
                nisa.activation(dst=res[0:mm, 0:nw], op=nl.gelu, data=res[0:mm, 0:nw])
                nisa.tensor_tensor(dst=res[0:mm, 0:nw], data1=res[0:mm, 0:nw], data2=b_all[0:mm, 0:nw], op=nl.add)
                nisa.dma_copy(dst=out[m0:m0 + mm, n0:n0 + nw], src=res[0:mm, 0:nw])
    return out
