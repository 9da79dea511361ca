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


def reference(q, k_pages, v_pages, block_table):
    return oracle(q, k_pages, v_pages, block_table).astype(np.float32)
