"""Flawed: one CUDA block per token becomes one single-partition tile per token."""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def rope(x, cos, sin):
    t, h, d = x.shape
    half = d // 2
    out = nl.ndarray((t, h, d), dtype=nl.float32, buffer=nl.shared_hbm)
    for tok in range(t):
        xt = nl.ndarray((1, h, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x[tok:tok + 1])
        c = nl.ndarray((1, 1, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=c[:, 0, :], src=cos[tok:tok + 1])
        s = nl.ndarray((1, 1, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s[:, 0, :], src=sin[tok:tok + 1])
        rot = nl.ndarray((1, h, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=rot[:, :, 0:half], data1=xt[:, :, half:d], data2=s[:, :, 0:half].broadcast(1, h),
                           op=nl.multiply)
        nisa.tensor_tensor(dst=rot[:, :, half:d], data1=xt[:, :, 0:half], data2=s[:, :, half:d].broadcast(1, h),
                           op=nl.multiply)
        o = nl.ndarray((1, h, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=o, data1=xt, data2=c.broadcast(1, h), op=nl.multiply)
        nisa.tensor_tensor(dst=o, data1=o, data2=rot, op=nl.add)
        nisa.dma_copy(dst=out[tok:tok + 1], src=o)
    return out
