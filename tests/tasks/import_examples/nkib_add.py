# An NKIBench-style task (written for nkieval's tests): a NumPy reference, get_inputs() and an NKI kernel.
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np


def reference(a, b):
    return a + b


def get_inputs():
    rng = np.random.default_rng(0)
    return [rng.standard_normal((256, 300)).astype(np.float32), rng.standard_normal((256, 300)).astype(np.float32)]


@nki.jit
def add_kernel(a, b):
    n, d = a.shape
    out = nl.ndarray((n, d), dtype=a.dtype, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    for i in range((n + p - 1) // p):
        rows = min(p, n - i * p)
        ta = nl.ndarray((p, d), dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray((p, d), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta[0:rows], src=a[i * p:i * p + rows])
        nisa.dma_copy(dst=tb[0:rows], src=b[i * p:i * p + rows])
        nisa.tensor_tensor(dst=ta[0:rows], data1=ta[0:rows], data2=tb[0:rows], op=nl.add)
        nisa.dma_copy(dst=out[i * p:i * p + rows], src=ta[0:rows])
    return out
