# task: rmsnorm
# expect: pass
# why: recursion in a Python helper at trace time (halving the row range until it fits 128 partitions), sequential_range, eps as a float param
import math

import nki
import nki.isa as nisa
import nki.language as nl


def _rows(lo, hi):
    if hi - lo <= 128:
        return [(lo, hi)]
    mid = lo + 128 * math.ceil((hi - lo) / 256)
    return _rows(lo, mid) + _rows(mid, hi)


@nki.jit
def rmsnorm(x, w, eps=1e-6):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    wt = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=wt, src=w.reshape((1, d)).broadcast(0, 128))
    blocks = _rows(0, n)
    for j in nl.sequential_range(len(blocks)):
        lo, hi = blocks[j]
        r = hi - lo
        t = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[0:r], src=x[lo:hi])
        sq = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        ms = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(dst=sq[0:r], op=nl.square, data=t[0:r], scale=1.0 / math.sqrt(d), reduce_op=nl.add,
                               reduce_res=ms[0:r])
        nisa.tensor_scalar(dst=ms[0:r], data=ms[0:r], op0=nl.add, operand0=float(eps))
        nisa.activation(dst=ms[0:r], op=nl.rsqrt, data=ms[0:r])
        nisa.scalar_tensor_tensor(dst=sq[0:r], data=t[0:r], op0=nl.multiply, operand0=ms[0:r], op1=nl.multiply,
                                  operand1=wt[0:r])
        nisa.dma_copy(dst=out[lo:hi], src=sq[0:r])
    return out
