"""Reference for moe_expert_block: float64 router, top-2 renormalised gates, SiLU expert MLPs."""

import numpy as np


def _moe(x_t, router_w, w1, w2, renormalise=True):
    f = lambda a: np.asarray(a, dtype=np.float64)  # noqa: E731
    x = f(x_t).T
    logits = x @ f(router_w)
    order = np.argsort(-logits, axis=1, kind="stable")[:, :2]
    top = np.take_along_axis(logits, order, axis=1)
    if renormalise:   # softmax over the two selected logits
        g = np.exp(top - top[:, :1])
        g /= g.sum(axis=1, keepdims=True)
    else:             # the selected entries of the softmax over all E experts
        g = np.exp(top - top[:, :1]) / np.exp(logits - top[:, :1]).sum(axis=1, keepdims=True)
    out = np.zeros((x.shape[0], x.shape[1]))
    w1d, w2d = f(w1), f(w2)
    for e in range(w1d.shape[0]):
        weight = (g * (order == e)).sum(axis=1)
        if not weight.any():
            continue
        h = x @ w1d[e]
        with np.errstate(over="ignore"):
            a = h / (1.0 + np.exp(-h))
        out += weight[:, None] * (a @ w2d[e])
    return out


def oracle(x_t, router_w, w1, w2):
    return _moe(x_t, router_w, w1, w2)


def unnormalised_gates_oracle(x_t, router_w, w1, w2):
    """The block with each selected expert weighted by its softmax probability over all E experts."""
    return _moe(x_t, router_w, w1, w2, renormalise=False)


# Known wrong formulas: the review's numerics diagnosis names one when it reproduces the output.
VARIANTS = {
    "unnormalised_gates": {
        "cause": "weights the two selected experts by their softmax probabilities over all E experts instead of "
                 "renormalising over the top 2",
        "action": "renormalise the two selected gates to sum to 1 (a softmax over the top-2 logits)",
        "fn": unnormalised_gates_oracle,
    },
}


def reference(x_t, router_w, w1, w2):
    return oracle(x_t, router_w, w1, w2).astype(np.float32)
