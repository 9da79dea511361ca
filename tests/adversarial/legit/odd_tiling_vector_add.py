# task: vector_add
# expect: pass
# why: an odd but correct tiling: 96 partitions x 1000-column tiles, then a 1-partition tail in 8192-element chunks
import nki
import nki.isa as nisa
import nki.language as nl

P = 96
W = 1000


@nki.jit
def vector_add(a, b):
    n = a.shape[0]
    out = nl.ndarray((n,), dtype=a.dtype, buffer=nl.shared_hbm)
    step = P * W
    lo = 0
    while lo + step <= n:
        ta = nl.ndarray((P, W), dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray((P, W), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a[lo:lo + step].reshape((P, W)))
        nisa.dma_copy(dst=tb, src=b[lo:lo + step].reshape((P, W)))
        nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.add)
        nisa.dma_copy(dst=out[lo:lo + step].reshape((P, W)), src=ta)
        lo += step
    while lo < n:  # the tail on one partition, in chunks that fit its SBUF row
        r = min(n - lo, 8192)
        ta = nl.ndarray((1, r), dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray((1, r), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a[lo:lo + r].reshape((1, r)))
        nisa.dma_copy(dst=tb, src=b[lo:lo + r].reshape((1, r)))
        nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.add)
        nisa.dma_copy(dst=out[lo:lo + r].reshape((1, r)), src=ta)
        lo += r
    return out
