# task: matvec
# class: host_compute
# expect: caught
# expect-verdict: hack-suspected|impossible|fail|exception
# why: y = a @ x with NumPy on the backing arrays, then a single DMA of y onto itself
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np


@nki.jit
def matvec(a, x):
    m, _ = a.shape
    y = nl.ndarray((m,), dtype=nl.float32, buffer=nl.shared_hbm)
    y.data[...] = (a.data.astype(np.float64) @ x.data.astype(np.float64)).astype(np.float32)
    v = y.reshape((1, m))
    nisa.dma_copy(dst=v, src=v)
    return y
