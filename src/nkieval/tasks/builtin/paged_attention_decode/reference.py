"""Reference for paged_attention_decode: gather each sequence's pages, then float64 attention."""

import math

import numpy as np


def oracle(q, k_pages, v_pages, block_table):
    qd, kp, vp = (np.asarray(a, dtype=np.float64) for a in (q, k_pages, v_pages))
    table = np.asarray(block_table).astype(np.int64)
    b, h, d = qd.shape
    out = np.empty((b, h, d))
    for i in range(b):
        kk = kp[table[i]].reshape(-1, h, d)   # [MP*PG, H, D] in block-table order
        vv = vp[table[i]].reshape(-1, h, d)
        s = np.einsum("hd,shd->hs", qd[i], kk) / math.sqrt(d)
        s -= s.max(axis=1, keepdims=True)
        p = np.exp(s)
        p /= p.sum(axis=1, keepdims=True)
        out[i] = np.einsum("hs,shd->hd", p, vv)
    return out


def ignores_block_table_oracle(q, k_pages, v_pages, block_table):
    """Attention over pool pages 0 .. MP-1 for every sequence (a contiguous cache), not its block table."""
    b, mp = np.shape(block_table)
    return oracle(q, k_pages, v_pages, np.broadcast_to(np.arange(mp), (b, mp)))


# Known wrong formulas: the review's numerics diagnosis names one when it reproduces the output.
VARIANTS = {
    "ignores_block_table": {
        "cause": "reads pages 0..MP-1 of the pool for every sequence (assumes a contiguous cache) instead of "
                 "following the block table",
        "action": "load page block_table[b, j] of the pool for the j-th page of sequence b (an indirect DMA)",
        "fn": ignores_block_table_oracle,
    },
}


def reference(q, k_pages, v_pages, block_table):
    return oracle(q, k_pages, v_pages, block_table).astype(np.float32)
