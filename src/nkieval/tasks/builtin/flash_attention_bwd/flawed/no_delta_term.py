"""Flawed: dS = P * dP; the Di = rowsum(dO * O) correction is never subtracted."""

import math

import nki
import nki.isa as nisa
import nki.language as nl


def _transposed(x, s, d, p):
    """x [S, D] bf16 in HBM -> [D, S] bf16 in SBUF via PE transposes of 128-row blocks."""
    xt = nl.ndarray((d, s), dtype=x.dtype, buffer=nl.sbuf)
    for j in range((s + p - 1) // p):
        j0 = j * p
        jw = min(p, s - j0)
        blk = nl.ndarray((p, d), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=blk[0:jw], src=x[j0:j0 + jw])
        tp = nl.ndarray((p, p), dtype=x.dtype, buffer=nl.psum)
        nisa.nc_transpose(dst=tp[0:d, 0:jw], data=blk[0:jw, 0:d])
        nisa.tensor_copy(dst=xt[:, j0:j0 + jw], src=tp[0:d, 0:jw])
    return xt


def _rows32(x, s, d, p):
    """x [S, D] -> fp32 SBUF row blocks [128, nb, D]."""
    nb = (s + p - 1) // p
    out = nl.ndarray((p, nb, d), dtype=nl.float32, buffer=nl.sbuf)
    for j in range(nb):
        j0 = j * p
        jw = min(p, s - j0)
        nisa.dma_copy(dst=out[0:jw, j, :], src=x[j0:j0 + jw])
    return out


@nki.jit
def flash_attention_bwd(q, k, v, o, do, lse):
    s, d = q.shape
    p = nl.tile_size.pmax
    nb = (s + p - 1) // p
    scale = 1.0 / math.sqrt(d)
    dq = nl.ndarray((s, d), dtype=nl.float32, buffer=nl.shared_hbm)
    dk = nl.ndarray((s, d), dtype=nl.float32, buffer=nl.shared_hbm)
    dv = nl.ndarray((s, d), dtype=nl.float32, buffer=nl.shared_hbm)
    q_t = _transposed(q, s, d, p)
    k_t = _transposed(k, s, d, p)
    v_t = _transposed(v, s, d, p)
    do_t = _transposed(do, s, d, p)
    q32 = _rows32(q, s, d, p)
    k32 = _rows32(k, s, d, p)
    do32 = _rows32(do, s, d, p)
    o32 = _rows32(o, s, d, p)
    di = nl.ndarray((p, nb), dtype=nl.float32, buffer=nl.sbuf)
    nlse = nl.ndarray((p, nb), dtype=nl.float32, buffer=nl.sbuf)
    dq_acc = nl.ndarray((p, nb, d), dtype=nl.float32, buffer=nl.sbuf)
    for i in range(nb):
        i0 = i * p
        iw = min(p, s - i0)
        prod = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=prod[0:iw], data1=do32[0:iw, i, :], data2=o32[0:iw, i, :], op=nl.multiply)
        nisa.tensor_reduce(dst=di[0:iw, i:i + 1], op=nl.add, data=prod[0:iw], axis=1)
        nisa.dma_copy(dst=nlse[0:iw, i:i + 1], src=lse[i0:i0 + iw].reshape((iw, 1)))
        nisa.tensor_scalar(dst=nlse[0:iw, i:i + 1], data=nlse[0:iw, i:i + 1], op0=nl.multiply, operand0=-1.0)
        nisa.memset(dst=dq_acc[0:iw, i, :], value=0.0)
    for j in range(nb):
        j0 = j * p
        jw = min(p, s - j0)
        dv_ps = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.psum)
        dk_ps = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.psum)
        for i in range(nb):
            i0 = i * p
            iw = min(p, s - i0)
            s_ps = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=s_ps[0:iw, 0:jw], stationary=q_t[:, i0:i0 + iw], moving=k_t[:, j0:j0 + jw])
            pr = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=pr[0:iw, 0:jw], op=nl.exp, data=s_ps[0:iw, 0:jw], scale=scale,
                            bias=nlse[0:iw, i:i + 1])
            nisa.nc_matmul(dst=dv_ps[0:jw, 0:d], stationary=pr[0:iw, 0:jw], moving=do32[0:iw, i, :])
            dp_ps = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=dp_ps[0:iw, 0:jw], stationary=do_t[:, i0:i0 + iw], moving=v_t[:, j0:j0 + jw])
            ds = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=ds[0:iw, 0:jw], data1=dp_ps[0:iw, 0:jw], data2=pr[0:iw, 0:jw], op=nl.multiply)
            nisa.nc_matmul(dst=dk_ps[0:jw, 0:d], stationary=ds[0:iw, 0:jw], moving=q32[0:iw, i, :])
            tp = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_transpose(dst=tp[0:jw, 0:iw], data=ds[0:iw, 0:jw])
            ds_t = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=ds_t[0:jw, 0:iw], src=tp[0:jw, 0:iw])
            dq_ps = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=dq_ps[0:iw, 0:d], stationary=ds_t[0:jw, 0:iw], moving=k32[0:jw, j, :])
            nisa.tensor_tensor(dst=dq_acc[0:iw, i, :], data1=dq_acc[0:iw, i, :], data2=dq_ps[0:iw, 0:d], op=nl.add)
        dvt = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=dvt[0:jw], src=dv_ps[0:jw, 0:d])
        nisa.dma_copy(dst=dv[j0:j0 + jw], src=dvt[0:jw])
        dkt = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=dkt[0:jw], op=nl.copy, data=dk_ps[0:jw, 0:d], scale=scale)
        nisa.dma_copy(dst=dk[j0:j0 + jw], src=dkt[0:jw])
    for i in range(nb):
        i0 = i * p
        iw = min(p, s - i0)
        dqt = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=dqt[0:iw], op=nl.copy, data=dq_acc[0:iw, i, :], scale=scale)
        nisa.dma_copy(dst=dq[i0:i0 + iw], src=dqt[0:iw])
    return dq, dk, dv
