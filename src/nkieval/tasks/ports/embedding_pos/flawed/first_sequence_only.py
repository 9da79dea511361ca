"""Flawed port: only b = 0 is computed."""

import math

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def embedding_pos(idx, wte, wpe):
    b_sz, t_sz = idx.shape
    _, c = wte.shape
    out = nl.ndarray((b_sz, t_sz, c), dtype=nl.float32, buffer=nl.shared_hbm)
    flat_idx = idx.reshape((b_sz * t_sz,))
    p = nl.tile_size.pmax
    scale = math.sqrt(c)
    for b in range(1):
        for j in range(math.ceil(t_sz / p)):
            t0 = j * p
            rows = min(p, t_sz - t0)
            ids = nl.ndarray((p, 1), dtype=nl.int32, buffer=nl.sbuf)
            r0 = b * t_sz + t0
            nisa.dma_copy(dst=ids[0:rows], src=flat_idx[r0:r0 + rows].reshape((rows, 1)))
            emb = nl.ndarray((p, c), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=emb[0:rows],
                          src=wte.ap(pattern=[[c, rows], [1, c]], offset=0, vector_offset=ids[0:rows], indirect_dim=0))
            pos = nl.ndarray((p, c), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=pos[0:rows], src=wpe[t0:t0 + rows])
            nisa.scalar_tensor_tensor(dst=emb[0:rows], data=emb[0:rows], op0=nl.multiply, operand0=scale,
                                      op1=nl.add, operand1=pos[0:rows])
            nisa.dma_copy(dst=out[b, t0:t0 + rows], src=emb[0:rows])
    return out
