# task: relu
# expect: pass
# why: a helper class holding the tiling plan, a dataclass config and a printed line at trace time
from dataclasses import dataclass

import nki
import nki.isa as nisa
import nki.language as nl


@dataclass(frozen=True)
class Plan:
    fmax: int = 2048

    def spans(self, m):
        return [(lo, min(m, lo + self.fmax)) for lo in range(0, m, self.fmax)]


class Streamer:
    def __init__(self, src, dst, plan):
        self.src, self.dst, self.plan = src, dst, plan

    def run(self, p, m):
        for lo, hi in self.plan.spans(m):
            t = nl.ndarray((p, hi - lo), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=self.src[:, lo:hi])
            nisa.activation(dst=t, op=nl.relu, data=t)
            nisa.dma_copy(dst=self.dst[:, lo:hi], src=t)


@nki.jit
def relu(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    total = n * d
    xf, of = x.reshape((total,)), out.reshape((total,))
    m = total // 128
    print(f"relu: {total} elements, {m} columns per partition")
    if m:
        Streamer(xf[0:m * 128].reshape((128, m)), of[0:m * 128].reshape((128, m)), Plan()).run(128, m)
    r = total - m * 128
    if r:
        Streamer(xf[m * 128:total].reshape((1, r)), of[m * 128:total].reshape((1, r)), Plan()).run(1, r)
    return out
