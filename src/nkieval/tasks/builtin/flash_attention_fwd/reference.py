"""Reference for flash_attention_fwd: float64 causal attention and its log-sum-exp."""

import hashlib
import math
import threading
from collections import OrderedDict

import numpy as np

KEY_BLOCK = 512   # keys per online-softmax step (one fp32 PSUM bank of scores)


def _scores(q_t, k_t):
    qd, kd = (np.asarray(a, dtype=np.float64) for a in (q_t, k_t))
    d, s = qd.shape
    sc = qd.T @ kd / math.sqrt(d)
    return np.where(np.tril(np.ones((s, s), dtype=bool)), sc, -np.inf)


#: query rows per block of the float64 attention: only the keys up to a block's last query are computed
QUERY_BLOCK = 512
#: the last few (inputs digest -> (out, lse)) results: the numerics standard evaluates the oracle of `out`
#: and of `lse` on the same (perturbed) inputs, so each evaluation serves both
_MEMO: OrderedDict[bytes, tuple[np.ndarray, np.ndarray]] = OrderedDict()
_MEMO_ENTRIES = 24
_MEMO_LOCK = threading.Lock()


def _attn(q_t, k_t, v):
    arrs = [np.ascontiguousarray(a, dtype=np.float64) for a in (q_t, k_t, v)]
    h = hashlib.blake2b(digest_size=20)
    for a in arrs:
        h.update(repr(a.shape).encode())
        h.update(a.data)
    key = h.digest()
    with _MEMO_LOCK:  # the review judges cases on several threads
        hit = _MEMO.get(key)
        if hit is not None:
            _MEMO.move_to_end(key)
    if hit is None:
        hit = _causal_attention(*arrs)
        with _MEMO_LOCK:
            _MEMO[key] = hit
            while len(_MEMO) > _MEMO_ENTRIES:
                _MEMO.popitem(last=False)
    return hit[0].copy(), hit[1].copy()


def _causal_attention(qd, kd, vd):
    """float64 causal attention and log-sum-exp, one block of queries at a time over the keys it sees (the
    keys above the block's last query are never computed: half the work of the full score matrix)."""
    d, s = qd.shape
    out = np.empty((s, vd.shape[1]))
    lse = np.empty(s)
    for r0 in range(0, s, QUERY_BLOCK):
        r1 = min(s, r0 + QUERY_BLOCK)
        sc = qd[:, r0:r1].T @ kd[:, :r1] / math.sqrt(d)
        sc[np.arange(r1 - r0)[:, None] + r0 < np.arange(r1)[None, :]] = -np.inf
        m = sc.max(axis=1, keepdims=True)
        np.exp(sc - m, out=sc)
        tot = sc.sum(axis=1, keepdims=True)
        out[r0:r1] = (sc @ vd[:r1]) / tot
        lse[r0:r1] = (m + np.log(tot))[:, 0]
    return out, lse


def oracle(q_t, k_t, v):
    return _attn(q_t, k_t, v)[0]


def oracle_lse(q_t, k_t, v):
    """float64 log-sum-exp of each query's causal scores (the review judges each output with its own oracle)."""
    return _attn(q_t, k_t, v)[1]


def _no_rescale(q_t, k_t, v):
    """Online softmax over KEY_BLOCK-key blocks in which each block's exponentials use the running max
    after that block, and the earlier sum and output are never rescaled when that max grows: the output
    and the log-sum-exp (final running max + log of the unrescaled sum)."""
    sc = _scores(q_t, k_t)
    e = np.empty_like(sc)
    m = np.full((sc.shape[0], 1), -np.inf)
    for c0 in range(0, sc.shape[1], KEY_BLOCK):
        blk = sc[:, c0:c0 + KEY_BLOCK]
        m = np.maximum(m, blk.max(axis=1, keepdims=True))  # the running max after this block
        e[:, c0:c0 + KEY_BLOCK] = np.exp(blk - m)          # earlier blocks keep their smaller max
    tot = e.sum(axis=1, keepdims=True)
    return (e / tot) @ np.asarray(v, dtype=np.float64), (m + np.log(tot))[:, 0]


def no_rescale_oracle(q_t, k_t, v):
    return _no_rescale(q_t, k_t, v)[0]


def no_rescale_oracle_lse(q_t, k_t, v):
    return _no_rescale(q_t, k_t, v)[1]


# Known wrong formulas: the review's numerics diagnosis names one when it reproduces `out` (or, through
# "outputs", the lse the same flaw changes).
VARIANTS = {
    "no_rescale": {
        "cause": "online softmax that never rescales the running output and sum when the running max grows",
        "action": "multiply the running sum and output by exp(m_old - m_new) before adding a block whose max "
                  "is larger",
        "fn": no_rescale_oracle,
        "outputs": {"lse": no_rescale_oracle_lse},
    },
}


def reference(q_t, k_t, v):
    o, lse = _attn(q_t, k_t, v)
    return o.astype(np.float32), lse.astype(np.float32)
