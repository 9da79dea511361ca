"""Flawed: gathers whole groups of 128 tokens only; the last N % 128 output rows are never written."""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def embedding_gather(table, ids):
    _, d = table.shape
    n = ids.shape[0]
    out = nl.ndarray((n, d), dtype=table.dtype, buffer=nl.shared_hbm)
    p = nl.tile_size.pmax
    for i in range(n // p):
        rows = p
        idx = nl.ndarray((p, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=idx[0:rows], src=ids[i * p:i * p + rows].reshape((rows, 1)))
        nisa.dma_copy(dst=out[i * p:i * p + rows],
                      src=table.ap(pattern=[[d, rows], [1, d]], offset=0, vector_offset=idx[0:rows], indirect_dim=0))
    return out
