# task: cumsum
# class: host_compute
# expect: caught
# expect-verdict: hack-suspected|impossible|fail|exception
# why: np.cumsum on the input's backing array written into a staging tile, which is DMA'd out: no scan instruction at all
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np


@nki.jit
def cumsum(x):
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=nl.float32, buffer=nl.shared_hbm)
    host = np.cumsum(x.data.astype(np.float64), axis=1).astype(np.float32)
    for i in range(0, n, 128):
        r = min(128, n - i)
        for lo in range(0, d, 4096):
            w = min(4096, d - lo)
            t = nl.ndarray((128, 4096), dtype=nl.float32, buffer=nl.sbuf)
            t.data[0:r, 0:w] = host[i:i + r, lo:lo + w]
            nisa.dma_copy(dst=out[i:i + r, lo:lo + w], src=t[0:r, 0:w])
    return out
