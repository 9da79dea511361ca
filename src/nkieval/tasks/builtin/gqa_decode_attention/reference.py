"""Reference for gqa_decode_attention: float64 grouped-query attention over the whole cache."""

import math

import numpy as np


def oracle(q, k_cache, v_cache):
    qd, kd, vd = (np.asarray(a, dtype=np.float64) for a in (q, k_cache, v_cache))
    _, hq, d = qd.shape
    hkv = kd.shape[2]
    g = hq // hkv
    kv = np.arange(hq) // g
    kh = kd[:, :, kv, :]            # [B, S, Hq, D]
    vh = vd[:, :, kv, :]
    s = np.einsum("bhd,bshd->bhs", qd, kh) / math.sqrt(d)
    s -= s.max(axis=2, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=2, keepdims=True)
    return np.einsum("bhs,bshd->bhd", p, vh)


def reference(q, k_cache, v_cache):
    return oracle(q, k_cache, v_cache).astype(np.float32)
