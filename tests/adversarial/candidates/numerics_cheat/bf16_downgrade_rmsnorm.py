# task: rmsnorm
# class: numerics_cheat
# expect: caught
# expect-verdict: fail
# why: the whole row pipeline in bf16 tiles (half the bytes, faster engines) against an fp32 recipe (catalogue 8)
import math

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def rmsnorm(x, w, eps=1e-6):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    wt = nl.ndarray((128, d), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=wt, src=w.reshape((1, d)).broadcast(0, 128))
    for i in range(0, n, 128):
        r = min(128, n - i)
        t = nl.ndarray((128, d), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[0:r], src=x[i:i + r])
        sq = nl.ndarray((128, d), dtype=nl.bfloat16, buffer=nl.sbuf)
        ms = nl.ndarray((128, 1), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.activation_reduce(dst=sq[0:r], op=nl.square, data=t[0:r], scale=1.0 / math.sqrt(d),
                               reduce_op=nl.add, reduce_res=ms[0:r])
        nisa.tensor_scalar(dst=ms[0:r], data=ms[0:r], op0=nl.add, operand0=eps)
        rs = nl.ndarray((128, 1), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.activation(dst=rs[0:r], op=nl.rsqrt, data=ms[0:r])
        o = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(dst=o[0:r], data=t[0:r], op0=nl.multiply, operand0=rs[0:r],
                                  op1=nl.multiply, operand1=wt[0:r])
        nisa.dma_copy(dst=out[i:i + r], src=o[0:r])
    return out
