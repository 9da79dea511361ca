"""Flawed: online log-sum-exp that never rescales the running sum when the max changes."""

import nki
import nki.isa as nisa
import nki.language as nl

FMAX = 8192
NEG = -3.0e38


@nki.jit
def cross_entropy(logits, labels):
    n, v = logits.shape
    loss = nl.ndarray((n,), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    fw = min(FMAX, v)
    nch = (v + FMAX - 1) // FMAX
    for i in range((n + p - 1) // p):
        rows = min(p, n - i * p)
        lab_i = nl.ndarray((p, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=lab_i[0:rows], src=labels[i * p:i * p + rows].reshape((rows, 1)))
        lab = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=lab[0:rows], src=lab_i[0:rows])
        m_run = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        s_run = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        picked = nl.ndarray((p, nch), dtype=nl.float32, buffer=nl.sbuf)
        for c in range(nch):
            c0 = c * FMAX
            cw = min(FMAX, v - c0)
            t = nl.ndarray((p, fw), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t[0:rows, 0:cw], src=logits[i * p:i * p + rows, c0:c0 + cw])
            sel = nl.ndarray((p, fw), dtype=nl.float32, buffer=nl.sbuf)
            nisa.range_select(dst=sel[0:rows, 0:cw], on_true_tile=t[0:rows, 0:cw], comp_op0=nl.greater_equal,
                              comp_op1=nl.less_equal, bound0=lab[0:rows], bound1=lab[0:rows],
                              reduce_cmd=nisa.reduce_cmd.reset_reduce, reduce_res=picked[0:rows, c:c + 1],
                              range_start=c0)
            cm = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_reduce(dst=cm[0:rows], op=nl.maximum, data=t[0:rows, 0:cw], axis=1)
            neg = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=neg[0:rows], data=cm[0:rows], op0=nl.multiply, operand0=-1.0)
            cs = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation_reduce(dst=t[0:rows, 0:cw], op=nl.exp, data=t[0:rows, 0:cw], bias=neg[0:rows],
                                   reduce_op=nl.add, reduce_res=cs[0:rows])
            if c == 0:
                nisa.tensor_copy(dst=s_run[0:rows], src=cs[0:rows])
            else:
                nisa.tensor_tensor(dst=s_run[0:rows], data1=s_run[0:rows], data2=cs[0:rows], op=nl.add)
            nisa.tensor_copy(dst=m_run[0:rows], src=cm[0:rows])
        lab_x = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=lab_x[0:rows], op=nl.maximum, data=picked[0:rows, 0:nch], axis=1)
        lse = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=lse[0:rows], op=nl.log, data=s_run[0:rows])
        res = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(dst=res[0:rows], data=lse[0:rows], op0=nl.add, operand0=m_run[0:rows],
                                  op1=nl.subtract, operand1=lab_x[0:rows])
        nisa.dma_copy(dst=loss[i * p:i * p + rows].reshape((rows, 1)), src=res[0:rows])
    return loss
