"""Flawed: one channel at a time on a single partition, as the CUDA grid's y dimension suggests."""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def depthwise_conv1d(x, w, bias):
    c, length = x.shape
    _, k = w.shape
    out = nl.ndarray((c, length), dtype=nl.float32, buffer=nl.shared_hbm)
    for ch in range(c):
        wt = nl.ndarray((1, k), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=wt, src=w[ch:ch + 1])
        bt = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=bt, src=bias[ch:ch + 1].reshape((1, 1)))
        xp = nl.ndarray((1, length + k - 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=xp, value=0.0)
        nisa.dma_copy(dst=xp[:, k - 1:k - 1 + length], src=x[ch:ch + 1])
        acc = nl.ndarray((1, length), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=acc, data=xp[:, 0:length], op0=nl.multiply, operand0=wt[:, 0:1], op1=nl.add,
                           operand1=bt)
        for kk in range(1, k):
            nisa.scalar_tensor_tensor(dst=acc, data=xp[:, kk:kk + length], op0=nl.multiply, operand0=wt[:, kk:kk + 1],
                                      op1=nl.add, operand1=acc)
        nisa.dma_copy(dst=out[ch:ch + 1], src=acc)
    return out
