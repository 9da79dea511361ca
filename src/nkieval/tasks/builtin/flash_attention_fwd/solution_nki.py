"""Expert solution: flash attention on the NeuronCore: K^T and V resident, online softmax per query block.

q_t and k_t arrive K-major ([D, S]), exactly the Tensor engine's operand layout, and stay in SBUF
(one DMA each); V is widened to fp32 once ([128, S/128, D]). For each 128-query block the key
blocks of 512 up to the diagonal stream through:
* scores: one matmul into a PSUM bank, evacuated with the 1/sqrt(D) scale fused (Scalar engine);
  the diagonal block gets the causal mask with one affine_select;
* online softmax on [128, 1] statistics: block max, m_new, correction exp(m - m_new), and one
  activation_reduce giving exp(s - m_new) with its row sum; l = l * corr + rowsum;
* P V: four PE transposes of 128 x 128 probability blocks and four fp32 matmuls into one PSUM
  tile; the running accumulator is updated as acc * corr + PV by one scalar_tensor_tensor.
Blocks above the diagonal are never touched; out = acc / l and lse = m + log(l) at the end.
"""

import math

import nki
import nki.isa as nisa
import nki.language as nl

KB = 512
MASKED = -3.0e4


@nki.jit
def flash_attention_fwd(q_t, k_t, v):
    d, s = q_t.shape
    out = nl.ndarray((s, d), dtype=nl.float32, buffer=nl.shared_hbm)
    lse = nl.ndarray((s,), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    nsb = (s + p - 1) // p
    scale = 1.0 / math.sqrt(d)
    q_sb = nl.ndarray((d, s), dtype=q_t.dtype, buffer=nl.sbuf)
    k_sb = nl.ndarray((d, s), dtype=k_t.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=q_sb, src=q_t)
    nisa.dma_copy(dst=k_sb, src=k_t)
    v32 = nl.ndarray((p, nsb, d), dtype=nl.float32, buffer=nl.sbuf)
    for j in range(nsb):
        j0 = j * p
        jw = min(p, s - j0)
        vb = nl.ndarray((p, d), dtype=v.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=vb[0:jw], src=v[j0:j0 + jw])
        nisa.tensor_copy(dst=v32[0:jw, j, :], src=vb[0:jw])
    for i in range(nsb):
        i0 = i * p
        iw = min(p, s - i0)
        kend = i0 + iw
        m = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        lsum = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        acc = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        for c in range((kend + KB - 1) // KB):
            c0 = c * KB
            cw = min(KB, kend - c0)
            ps = nl.ndarray((p, KB), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=ps[0:iw, 0:cw], stationary=q_sb[:, i0:i0 + iw], moving=k_sb[:, c0:c0 + cw])
            sc = nl.ndarray((p, KB), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=sc[0:iw, 0:cw], op=nl.copy, data=ps[0:iw, 0:cw], scale=scale)
            if c0 + cw > i0:  # this block reaches the diagonal: keep key c0 + x for query i0 + y when i0 + y >= c0 + x
                nisa.affine_select(dst=sc[0:iw, 0:cw], pattern=[[-1, cw]], channel_multiplier=1,
                                   on_true_tile=sc[0:iw, 0:cw], on_false_value=MASKED, cmp_op=nl.greater_equal,
                                   offset=i0 - c0)
            bm = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_reduce(dst=bm[0:iw], op=nl.maximum, data=sc[0:iw, 0:cw], axis=1)
            neg = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
            rs = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
            corr = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
            if c == 0:
                nisa.tensor_copy(dst=m[0:iw], src=bm[0:iw])
            else:
                m_new = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_tensor(dst=m_new[0:iw], data1=m[0:iw], data2=bm[0:iw], op=nl.maximum)
                nisa.tensor_scalar(dst=neg[0:iw], data=m_new[0:iw], op0=nl.multiply, operand0=-1.0)
                nisa.activation(dst=corr[0:iw], op=nl.exp, data=m[0:iw], bias=neg[0:iw])
                nisa.tensor_copy(dst=m[0:iw], src=m_new[0:iw])
            nisa.tensor_scalar(dst=neg[0:iw], data=m[0:iw], op0=nl.multiply, operand0=-1.0)
            nisa.activation_reduce(dst=sc[0:iw, 0:cw], op=nl.exp, data=sc[0:iw, 0:cw], bias=neg[0:iw],
                                   reduce_op=nl.add, reduce_res=rs[0:iw])
            pv = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.psum)
            for jj in range((cw + p - 1) // p):
                j0 = jj * p
                jw = min(p, cw - j0)
                tp = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.psum)
                nisa.nc_transpose(dst=tp[0:jw, 0:iw], data=sc[0:iw, j0:j0 + jw])
                pt = nl.ndarray((p, p), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_copy(dst=pt[0:jw, 0:iw], src=tp[0:jw, 0:iw])
                nisa.nc_matmul(dst=pv[0:iw, 0:d], stationary=pt[0:jw, 0:iw], moving=v32[0:jw, (c0 + j0) // p, :])
            if c == 0:
                nisa.tensor_copy(dst=lsum[0:iw], src=rs[0:iw])
                nisa.tensor_copy(dst=acc[0:iw], src=pv[0:iw, 0:d])
            else:
                nisa.scalar_tensor_tensor(dst=lsum[0:iw], data=lsum[0:iw], op0=nl.multiply, operand0=corr[0:iw],
                                          op1=nl.add, operand1=rs[0:iw])
                nisa.scalar_tensor_tensor(dst=acc[0:iw], data=acc[0:iw], op0=nl.multiply, operand0=corr[0:iw],
                                          op1=nl.add, operand1=pv[0:iw, 0:d])
        inv = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv[0:iw], data=lsum[0:iw])
        o = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=o[0:iw], data=acc[0:iw], op0=nl.multiply, operand0=inv[0:iw])
        nisa.dma_copy(dst=out[i0:i0 + iw], src=o[0:iw])
        lt = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=lt[0:iw], op=nl.log, data=lsum[0:iw])
        nisa.tensor_tensor(dst=lt[0:iw], data1=lt[0:iw], data2=m[0:iw], op=nl.add)
        nisa.dma_copy(dst=lse[i0:i0 + iw].reshape((iw, 1)), src=lt[0:iw])
    return out, lse
