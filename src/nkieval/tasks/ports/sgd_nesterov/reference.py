"""Reference for sgd_nesterov: torch.optim.SGD's Nesterov step (dampening 0) in float64, rounded once to fp32."""

import numpy as np


def _step(param, grad, buf, lr, momentum, weight_decay):
    p, g0, b0 = (np.asarray(a, dtype=np.float64) for a in (param, grad, buf))
    g = g0 + weight_decay * p
    b = momentum * b0 + g
    return p - lr * (g + momentum * b), b


def oracle(param, grad, buf, lr=0.05, momentum=0.9, weight_decay=0.01):
    return _step(param, grad, buf, lr, momentum, weight_decay)[0]


def oracle_buf_new(param, grad, buf, lr=0.05, momentum=0.9, weight_decay=0.01):
    return _step(param, grad, buf, lr, momentum, weight_decay)[1]


def reference(param, grad, buf, lr=0.05, momentum=0.9, weight_decay=0.01):
    return tuple(a.astype(np.float32) for a in _step(param, grad, buf, lr, momentum, weight_decay))
