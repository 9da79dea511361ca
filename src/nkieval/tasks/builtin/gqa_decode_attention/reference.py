"""Reference for gqa_decode_attention: float64 grouped-query attention over the whole cache."""

import math

import numpy as np


def _attention(q, k_cache, v_cache, kv):
    """Query head h attends with key/value head kv[h]."""
    qd, kd, vd = (np.asarray(a, dtype=np.float64) for a in (q, k_cache, v_cache))
    d = qd.shape[2]
    kh = kd[:, :, kv, :]            # [B, S, Hq, D]
    vh = vd[:, :, kv, :]
    s = np.einsum("bhd,bshd->bhs", qd, kh) / math.sqrt(d)
    s -= s.max(axis=2, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=2, keepdims=True)
    return np.einsum("bhs,bshd->bhd", p, vh)


def oracle(q, k_cache, v_cache):
    hq, hkv = np.shape(q)[1], np.shape(k_cache)[2]
    return _attention(q, k_cache, v_cache, np.arange(hq) // (hq // hkv))


def interleaved_heads_oracle(q, k_cache, v_cache):
    """Query head h attends with key/value head h % Hkv (interleaved) instead of h // (Hq / Hkv)."""
    hq, hkv = np.shape(q)[1], np.shape(k_cache)[2]
    return _attention(q, k_cache, v_cache, np.arange(hq) % hkv)


# Known wrong formulas: the review's numerics diagnosis names one when it reproduces the output.
VARIANTS = {
    "interleaved_heads": {
        "cause": "maps query head h to key/value head h % Hkv (interleaved) instead of h // (Hq / Hkv)",
        "action": "give each key/value head a contiguous group of Hq / Hkv query heads: kv head = h // (Hq / Hkv)",
        "fn": interleaved_heads_oracle,
    },
}


def reference(q, k_cache, v_cache):
    return oracle(q, k_cache, v_cache).astype(np.float32)
