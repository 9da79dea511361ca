"""Baseline: gather 128 rows at a time into SBUF in 256-column pieces, then store each piece.

Correct for every shape, but every 256-column piece is its own indirect gather and its own
store, and the rows make a round trip through SBUF.
"""

import nki
import nki.isa as nisa
import nki.language as nl

F = 256


@nki.jit
def embedding_gather(table, ids):
    _, d = table.shape
    n = ids.shape[0]
    out = nl.ndarray((n, d), dtype=table.dtype, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    for i in range((n + p - 1) // p):
        rows = min(p, n - i * p)
        idx = nl.ndarray((p, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=idx[0:rows], src=ids[i * p:i * p + rows].reshape((rows, 1)))
        for j in range((d + F - 1) // F):
            lo = j * F
            w = min(F, d - lo)
            t = nl.ndarray((p, F), dtype=table.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t[0:rows, 0:w],
                          src=table.ap(pattern=[[d, rows], [1, w]], offset=lo, vector_offset=idx[0:rows],
                                       indirect_dim=0))
            nisa.dma_copy(dst=out[i * p:i * p + rows, lo:lo + w], src=t[0:rows, 0:w])
    return out
