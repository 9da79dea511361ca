"""Flawed: correct, but moves data in [128, 8] tiles: 32-byte DMAs per partition, 16x the instructions."""

import nki
import nki.isa as nisa
import nki.language as nl

W = 8


@nki.jit
def vector_add(a, b):
    n = a.shape[0]
    out = nl.ndarray((n,), dtype=a.dtype, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    m = n // p
    if m > 0:
        a2 = a[0:m * p].reshape((p, m))
        b2 = b[0:m * p].reshape((p, m))
        o2 = out[0:m * p].reshape((p, m))
        for j in range((m + W - 1) // W):
            lo = j * W
            w = min(W, m - lo)
            ta = nl.ndarray((p, W), dtype=a.dtype, buffer=nl.sbuf)
            tb = nl.ndarray((p, W), dtype=b.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=ta[:, 0:w], src=a2[:, lo:lo + w])
            nisa.dma_copy(dst=tb[:, 0:w], src=b2[:, lo:lo + w])
            nisa.tensor_tensor(dst=ta[:, 0:w], data1=ta[:, 0:w], data2=tb[:, 0:w], op=nl.add)
            nisa.dma_copy(dst=o2[:, lo:lo + w], src=ta[:, 0:w])
    r = n - m * p
    if r > 0:
        ta = nl.ndarray((1, r), dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray((1, r), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a[m * p:n].reshape((1, r)))
        nisa.dma_copy(dst=tb, src=b[m * p:n].reshape((1, r)))
        nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.add)
        nisa.dma_copy(dst=out[m * p:n].reshape((1, r)), src=ta)
    return out
