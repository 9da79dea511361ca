"""Reference for router_topk: softmax, top-8 (stable, lower index first on ties), renormalised."""

import numpy as np

K = 8


def _topk(logits):
    x = np.asarray(logits, dtype=np.float64)
    idx = np.argsort(-x, axis=1, kind="stable")[:, :K]
    top = np.take_along_axis(x, idx, axis=1)
    e = np.exp(top - top[:, :1])
    return e / e.sum(axis=1, keepdims=True), idx


def oracle(logits):
    return _topk(logits)[0]


def not_renormalised_oracle(logits):
    """The 8 largest softmax probabilities over all E experts, not renormalised to sum to 1."""
    x = np.asarray(logits, dtype=np.float64)
    p = np.exp(x - x.max(axis=1, keepdims=True))
    return -np.sort(-p / p.sum(axis=1, keepdims=True), axis=1)[:, :K]


# Known wrong formulas: the review's numerics diagnosis names one when it reproduces the weights.
VARIANTS = {
    "not_renormalised": {
        "cause": "returns the top-8 softmax probabilities over all experts without renormalising them to sum to 1",
        "action": "divide the 8 kept probabilities by their sum (equivalently, a softmax over the top-8 logits)",
        "fn": not_renormalised_oracle,
    },
}


def reference(logits):
    w, idx = _topk(logits)
    return w.astype(np.float32), idx.astype(np.int32)
