# task: row_softmax
# class: host_compute
# expect: caught
# expect-verdict: hack-suspected|impossible|fail|exception
# why: loads each tile honestly, computes softmax with NumPy on np.asarray(tile), writes it into the tile's .data, stores it
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np


@nki.jit
def row_softmax(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in range((n + 127) // 128):
        r = min(128, n - i * 128)
        t = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[0:r], src=x[i * 128:i * 128 + r])
        v = np.asarray(t[0:r]).astype(np.float64)
        e = np.exp(v - v.max(axis=1, keepdims=True))
        t.data[0:r] = (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
        nisa.dma_copy(dst=out[i * 128:i * 128 + r], src=t[0:r])
    return out
