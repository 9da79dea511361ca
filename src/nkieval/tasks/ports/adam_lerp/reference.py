"""Reference for adam_lerp: Adam's update (no weight decay) in float64, rounded once to fp32."""

import numpy as np


def _step(param, grad, m, v, lr, beta1, beta2, eps, step):
    p, g, m0, v0 = (np.asarray(a, dtype=np.float64) for a in (param, grad, m, v))
    m1 = beta1 * m0 + (1.0 - beta1) * g
    v1 = beta2 * v0 + (1.0 - beta2) * g * g
    m_hat = m1 / (1.0 - beta1 ** step)
    v_hat = v1 / (1.0 - beta2 ** step)
    return p - lr * m_hat / (np.sqrt(v_hat) + eps), m1, v1


def oracle(param, grad, m, v, lr=0.001, beta1=0.9, beta2=0.999, eps=1e-8, step=10):
    return _step(param, grad, m, v, lr, beta1, beta2, eps, step)[0]


def oracle_m_new(param, grad, m, v, lr=0.001, beta1=0.9, beta2=0.999, eps=1e-8, step=10):
    return _step(param, grad, m, v, lr, beta1, beta2, eps, step)[1]


def oracle_v_new(param, grad, m, v, lr=0.001, beta1=0.9, beta2=0.999, eps=1e-8, step=10):
    return _step(param, grad, m, v, lr, beta1, beta2, eps, step)[2]


def reference(param, grad, m, v, lr=0.001, beta1=0.9, beta2=0.999, eps=1e-8, step=10):
    return tuple(a.astype(np.float32) for a in _step(param, grad, m, v, lr, beta1, beta2, eps, step))
