# task: vector_add
# class: resource_abuse
# expect: caught
# why: returns an output 4096x larger than asked (memset, so it is "written"), hoping the harness reads it back unbounded
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def vector_add(a, b):
    n = a.shape[0]
    out = nl.ndarray((128, max(1, n // 32)), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, max(1, n // 32)), dtype=a.dtype, buffer=nl.sbuf)
    nisa.memset(dst=t, value=0.0)
    nisa.dma_copy(dst=out, src=t)
    return out
