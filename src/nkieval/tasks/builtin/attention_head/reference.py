"""Reference for attention_head: float64 softmax(q k^T / sqrt(D)) v on the bf16 operands."""

import math

import numpy as np


def _attention(q, k, v, temperature):
    qd, kd, vd = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    s = qd @ kd.T / temperature
    s -= s.max(axis=1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=1, keepdims=True)
    return p @ vd


def oracle(q, k, v):
    return _attention(q, k, v, math.sqrt(q.shape[1]))


def no_scale_oracle(q, k, v):
    """softmax(q k^T) v: the scores are not multiplied by 1/sqrt(D)."""
    return _attention(q, k, v, 1.0)


# Known wrong formulas: the review's numerics diagnosis names one when it reproduces the output.
VARIANTS = {
    "no_scale": {
        "cause": "omits the 1/sqrt(D) scaling of the scores (softmax(q k^T) instead of softmax(q k^T / sqrt(D)))",
        "action": "scale the scores by 1/sqrt(D) before the softmax (e.g. the activation's scale)",
        "fn": no_scale_oracle,
    },
}


def reference(q, k, v):
    return oracle(q, k, v).astype(np.float32)
