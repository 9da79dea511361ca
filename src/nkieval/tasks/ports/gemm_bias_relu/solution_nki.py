"""Expert port: 128-row M tiles by 512-column N tiles; every K tile of 128 accumulates into one PSUM bank
(K on the partitions of both operands, as a_t is already K-major), and the epilogue 0.5 * acc + bias
is one scalar_tensor_tensor reading PSUM, then a ReLU, before the single store: the CUDA kernel's
fused epilogue is kept.
"""

import math

import nki
import nki.isa as nisa
import nki.language as nl

TN = 512  # one PSUM bank of fp32 per partition


@nki.jit
def gemm_bias_relu(a_t, b, bias):
    k, m = a_t.shape
    _, n = b.shape
    p = nl.tile_size.pmax
    kt = math.ceil(k / p)
    c = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    for nj in nl.affine_range(math.ceil(n / TN)):
        n0 = nj * TN
        nw = min(TN, n - n0)
        b_sb = nl.ndarray((p, kt, TN), dtype=b.dtype, buffer=nl.sbuf)
        for ki in nl.affine_range(kt):
            k0 = ki * p
            kk = min(p, k - k0)
            nisa.dma_copy(dst=b_sb[0:kk, ki, 0:nw], src=b[k0:k0 + kk, n0:n0 + nw])
        bias_all = nl.broadcast_to(nl.load(bias[n0:n0 + nw].reshape((1, nw))), (p, nw))
        for mi in nl.affine_range(math.ceil(m / p)):
            m0 = mi * p
            mm = min(p, m - m0)
            a_sb = nl.ndarray((p, kt, p), dtype=a_t.dtype, buffer=nl.sbuf)
            for ki in nl.affine_range(kt):
                k0 = ki * p
                kk = min(p, k - k0)
                nisa.dma_copy(dst=a_sb[0:kk, ki, 0:mm], src=a_t[k0:k0 + kk, m0:m0 + mm])
            acc = nl.ndarray((p, TN), dtype=nl.float32, buffer=nl.psum)
            for ki in nl.affine_range(kt):
                kk = min(p, k - ki * p)
                nisa.nc_matmul(dst=acc[0:mm, 0:nw], stationary=a_sb[0:kk, ki, 0:mm], moving=b_sb[0:kk, ki, 0:nw])
            res = nl.ndarray((p, TN), dtype=nl.float32, buffer=nl.sbuf)
            nisa.scalar_tensor_tensor(dst=res[0:mm, 0:nw], data=acc[0:mm, 0:nw], op0=nl.multiply, operand0=0.5,
                                      op1=nl.add, operand1=bias_all[0:mm])
            nisa.activation(dst=res[0:mm, 0:nw], op=nl.relu, data=res[0:mm, 0:nw])
            nisa.dma_copy(dst=c[m0:m0 + mm, n0:n0 + nw], src=res[0:mm, 0:nw])
    return c
