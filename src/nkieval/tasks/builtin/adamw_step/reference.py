"""Reference for adamw_step: torch.optim.AdamW's update in float64, rounded once to fp32."""

import numpy as np


def _step(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step, bias_correction=True):
    p, g, m0, v0 = (np.asarray(a, dtype=np.float64) for a in (param, grad, m, v))
    m1 = beta1 * m0 + (1.0 - beta1) * g
    v1 = beta2 * v0 + (1.0 - beta2) * g * g
    m_hat, v_hat = m1, v1
    if bias_correction:
        m_hat = m1 / (1.0 - beta1 ** step)
        v_hat = v1 / (1.0 - beta2 ** step)
    p1 = p * (1.0 - lr * weight_decay) - lr * m_hat / (np.sqrt(v_hat) + eps)
    return p1, m1, v1


def oracle(param, grad, m, v, lr=0.001, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01, step=10):
    """float64 param_new (the numerics standard judges the first output)."""
    return _step(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step)[0]


def oracle_m_new(param, grad, m, v, lr=0.001, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01, step=10):
    """float64 m_new (the review judges each output with its own oracle)."""
    return _step(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step)[1]


def oracle_v_new(param, grad, m, v, lr=0.001, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01, step=10):
    """float64 v_new."""
    return _step(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step)[2]


def no_bias_correction_oracle(param, grad, m, v, lr=0.001, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01,
                              step=10):
    """param_new from the raw moments m and v, not divided by 1 - beta1^step and 1 - beta2^step."""
    return _step(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step, bias_correction=False)[0]


# Known wrong formulas: the review's numerics diagnosis names one when it reproduces param_new.
VARIANTS = {
    "no_bias_correction": {
        "cause": "omits Adam's bias correction (uses m and v instead of m / (1 - beta1^step) and "
                 "v / (1 - beta2^step))",
        "action": "divide the new moments by 1 - beta1^step and 1 - beta2^step before the update",
        "fn": no_bias_correction_oracle,
    },
}


def reference(param, grad, m, v, lr=0.001, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01, step=10):
    return tuple(a.astype(np.float32) for a in _step(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step))
