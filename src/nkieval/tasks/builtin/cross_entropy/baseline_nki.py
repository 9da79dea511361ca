"""Baseline: two passes over the logits (max, then sum of exp) in 2048-column chunks, label by one-hot.

Pass 1 reduces the row max; pass 2 reloads every chunk, sums exp(x - max) and extracts the label
logit with a one-hot mask (iota == label), a multiply and a sum. Correct and stable, but the
logits cross HBM twice and the label costs three full-width instructions per chunk.
"""

import nki
import nki.isa as nisa
import nki.language as nl

F = 2048


@nki.jit
def cross_entropy(logits, labels):
    n, v = logits.shape
    loss = nl.ndarray((n,), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    fw = min(F, v)
    nch = (v + F - 1) // F
    col = nl.ndarray((p, fw), dtype=nl.float32, buffer=nl.sbuf)
    nisa.iota(dst=col, pattern=[[1, fw]], offset=0, channel_multiplier=0)
    for i in range((n + p - 1) // p):
        rows = min(p, n - i * p)
        lab_i = nl.ndarray((p, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=lab_i[0:rows], src=labels[i * p:i * p + rows].reshape((rows, 1)))
        lab = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=lab[0:rows], src=lab_i[0:rows])
        mx = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=mx, value=-3.0e38)
        for c in range(nch):
            c0 = c * F
            cw = min(F, v - c0)
            t = nl.ndarray((p, fw), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t[0:rows, 0:cw], src=logits[i * p:i * p + rows, c0:c0 + cw])
            cm = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_reduce(dst=cm[0:rows], op=nl.maximum, data=t[0:rows, 0:cw], axis=1)
            nisa.tensor_tensor(dst=mx[0:rows], data1=mx[0:rows], data2=cm[0:rows], op=nl.maximum)
        neg = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=neg[0:rows], data=mx[0:rows], op0=nl.multiply, operand0=-1.0)
        s = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=s, value=0.0)
        picked = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=picked, value=0.0)
        for c in range(nch):
            c0 = c * F
            cw = min(F, v - c0)
            t = nl.ndarray((p, fw), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t[0:rows, 0:cw], src=logits[i * p:i * p + rows, c0:c0 + cw])
            e = nl.ndarray((p, fw), dtype=nl.float32, buffer=nl.sbuf)
            cs = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation_reduce(dst=e[0:rows, 0:cw], op=nl.exp, data=t[0:rows, 0:cw], bias=neg[0:rows],
                                   reduce_op=nl.add, reduce_res=cs[0:rows])
            nisa.tensor_tensor(dst=s[0:rows], data1=s[0:rows], data2=cs[0:rows], op=nl.add)
            rel = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=rel[0:rows], data=lab[0:rows], op0=nl.subtract, operand0=float(c0))
            hot = nl.ndarray((p, fw), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=hot[0:rows, 0:cw], data=col[0:rows, 0:cw], op0=nl.equal, operand0=rel[0:rows])
            nisa.tensor_tensor(dst=hot[0:rows, 0:cw], data1=hot[0:rows, 0:cw], data2=t[0:rows, 0:cw], op=nl.multiply)
            ps = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_reduce(dst=ps[0:rows], op=nl.add, data=hot[0:rows, 0:cw], axis=1)
            nisa.tensor_tensor(dst=picked[0:rows], data1=picked[0:rows], data2=ps[0:rows], op=nl.add)
        lse = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=lse[0:rows], op=nl.log, data=s[0:rows])
        nisa.tensor_tensor(dst=lse[0:rows], data1=lse[0:rows], data2=mx[0:rows], op=nl.add)
        nisa.tensor_tensor(dst=lse[0:rows], data1=lse[0:rows], data2=picked[0:rows], op=nl.subtract)
        nisa.dma_copy(dst=loss[i * p:i * p + rows].reshape((rows, 1)), src=lse[0:rows])
    return loss
