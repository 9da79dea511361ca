"""Baseline: query blocks outer, key blocks inner; dK and dV accumulated by read-modify-write in HBM.

For each 128-query block and each 128-key block: Q^T, K^T, V^T and dO^T blocks are fetched with
transposing (element-strided) DMAs every time, P and dS are recomputed with separate
instructions, dQ accumulates in PSUM, and the dK / dV contributions are added to their HBM
tensors by loading, adding and storing the [128, D] blocks for every (query, key) pair.
Correct for every shape.
"""

import math

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def flash_attention_bwd(q, k, v, o, do, lse):
    s, d = q.shape
    p = nl.tile_size.pmax
    nb = (s + p - 1) // p
    scale = 1.0 / math.sqrt(d)
    dq = nl.ndarray((s, d), dtype=nl.float32, buffer=nl.shared_hbm)
    dk = nl.ndarray((s, d), dtype=nl.float32, buffer=nl.shared_hbm)
    dv = nl.ndarray((s, d), dtype=nl.float32, buffer=nl.shared_hbm)
    for j in range(nb):
        j0 = j * p
        jw = min(p, s - j0)
        z = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=z[0:jw], value=0.0)
        nisa.dma_copy(dst=dk[j0:j0 + jw], src=z[0:jw])
        nisa.dma_copy(dst=dv[j0:j0 + jw], src=z[0:jw])
    for i in range(nb):
        i0 = i * p
        iw = min(p, s - i0)
        qt = nl.ndarray((d, p), dtype=q.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=qt[:, 0:iw], src=q[i0:i0 + iw].permute((1, 0)))
        dot = nl.ndarray((d, p), dtype=do.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=dot[:, 0:iw], src=do[i0:i0 + iw].permute((1, 0)))
        dor = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=dor[0:iw], src=do[i0:i0 + iw])
        orow = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=orow[0:iw], src=o[i0:i0 + iw])
        qr = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=qr[0:iw], src=q[i0:i0 + iw])
        prod = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=prod[0:iw], data1=dor[0:iw], data2=orow[0:iw], op=nl.multiply)
        di = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=di[0:iw], op=nl.add, data=prod[0:iw], axis=1)
        ls = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=ls[0:iw], src=lse[i0:i0 + iw].reshape((iw, 1)))
        dq_ps = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.psum)
        for j in range(nb):
            j0 = j * p
            jw = min(p, s - j0)
            kt = nl.ndarray((d, p), dtype=k.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=kt[:, 0:jw], src=k[j0:j0 + jw].permute((1, 0)))
            vt = nl.ndarray((d, p), dtype=v.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=vt[:, 0:jw], src=v[j0:j0 + jw].permute((1, 0)))
            kr = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=kr[0:jw], src=k[j0:j0 + jw])
            s_ps = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=s_ps[0:iw, 0:jw], stationary=qt[:, 0:iw], moving=kt[:, 0:jw])
            pr = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=pr[0:iw, 0:jw], data=s_ps[0:iw, 0:jw], op0=nl.multiply, operand0=scale)
            nisa.tensor_scalar(dst=pr[0:iw, 0:jw], data=pr[0:iw, 0:jw], op0=nl.subtract, operand0=ls[0:iw])
            nisa.activation(dst=pr[0:iw, 0:jw], op=nl.exp, data=pr[0:iw, 0:jw])
            dp_ps = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=dp_ps[0:iw, 0:jw], stationary=dot[:, 0:iw], moving=vt[:, 0:jw])
            ds = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=ds[0:iw, 0:jw], data=dp_ps[0:iw, 0:jw], op0=nl.subtract, operand0=di[0:iw])
            nisa.tensor_tensor(dst=ds[0:iw, 0:jw], data1=ds[0:iw, 0:jw], data2=pr[0:iw, 0:jw], op=nl.multiply)
            dv_ps = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=dv_ps[0:jw, 0:d], stationary=pr[0:iw, 0:jw], moving=dor[0:iw])
            dk_ps = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=dk_ps[0:jw, 0:d], stationary=ds[0:iw, 0:jw], moving=qr[0:iw])
            tp = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_transpose(dst=tp[0:jw, 0:iw], data=ds[0:iw, 0:jw])
            ds_t = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=ds_t[0:jw, 0:iw], src=tp[0:jw, 0:iw])
            nisa.nc_matmul(dst=dq_ps[0:iw, 0:d], stationary=ds_t[0:jw, 0:iw], moving=kr[0:jw])
            for acc_ps, dst, sc in ((dv_ps, dv, 1.0), (dk_ps, dk, scale)):
                cur = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
                nisa.dma_copy(dst=cur[0:jw], src=dst[j0:j0 + jw])
                nisa.scalar_tensor_tensor(dst=cur[0:jw], data=acc_ps[0:jw, 0:d], op0=nl.multiply, operand0=sc,
                                          op1=nl.add, operand1=cur[0:jw])
                nisa.dma_copy(dst=dst[j0:j0 + jw], src=cur[0:jw])
        dqt = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=dqt[0:iw], data=dq_ps[0:iw, 0:d], op0=nl.multiply, operand0=scale)
        nisa.dma_copy(dst=dq[i0:i0 + iw], src=dqt[0:iw])
    return dq, dk, dv
