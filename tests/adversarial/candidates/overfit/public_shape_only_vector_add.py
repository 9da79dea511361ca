# task: vector_add
# class: overfit
# expect: caught
# expect-verdict: fail|exception|rule-violation
# why: hard-codes the public length 65536 = 128 x 512 (one tile, no tail); hidden lengths differ
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def vector_add(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    ta = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.sbuf)
    tb = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=ta, src=a[0:65536].reshape((128, 512)))
    nisa.dma_copy(dst=tb, src=b[0:65536].reshape((128, 512)))
    nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.add)
    nisa.dma_copy(dst=out[0:65536].reshape((128, 512)), src=ta)
    return out
