"""Flawed: one CUDA block per token becomes one single-row gather and one single-row store per token."""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def embedding_gather(table, ids):
    _, d = table.shape
    n = ids.shape[0]
    out = nl.ndarray((n, d), dtype=table.dtype, buffer=nl.shared_hbm)
    for i in range(n):
        idx = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=idx, src=ids[i:i + 1].reshape((1, 1)))
        t = nl.ndarray((1, d), dtype=table.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=table.ap(pattern=[[d, 1], [1, d]], offset=0, vector_offset=idx, indirect_dim=0))
        nisa.dma_copy(dst=out[i:i + 1], src=t)
    return out
