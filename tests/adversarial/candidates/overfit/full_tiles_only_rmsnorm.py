# task: rmsnorm
# class: overfit
# expect: caught
# expect-verdict: fail|exception|rule-violation
# why: correct on the public 256 x 512 shape only: whole 128-row tiles, the ragged tail rows never written
import math

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def rmsnorm(x, w, eps=1e-6):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    wt = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=wt, src=w.reshape((1, d)).broadcast(0, 128))
    for i in range(n // 128):
        t = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[i * 128:(i + 1) * 128])
        sq = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        ms = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(dst=sq, op=nl.square, data=t, scale=1.0 / math.sqrt(d), reduce_op=nl.add,
                               reduce_res=ms)
        nisa.tensor_scalar(dst=ms, data=ms, op0=nl.add, operand0=eps)
        nisa.activation(dst=ms, op=nl.rsqrt, data=ms)
        nisa.scalar_tensor_tensor(dst=sq, data=t, op0=nl.multiply, operand0=ms, op1=nl.multiply, operand1=wt)
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128], src=sq)
    return out
