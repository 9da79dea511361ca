"""Reference for swiglu_mlp: float64 SwiGLU MLP on the given bf16 operands."""

import numpy as np


def _silu(z):
    with np.errstate(over="ignore"):
        return z / (1.0 + np.exp(-z))


def _projections(x_t, w_gate, w_up):
    x = np.asarray(x_t, dtype=np.float64).T
    return x @ np.asarray(w_gate, dtype=np.float64), x @ np.asarray(w_up, dtype=np.float64)


def oracle(x_t, w_gate, w_up, w_down):
    g, u = _projections(x_t, w_gate, w_up)
    return (_silu(g) * u) @ np.asarray(w_down, dtype=np.float64)


def silu_on_up_oracle(x_t, w_gate, w_up, w_down):
    """(g * silu(u)) @ w_down: SiLU applied to the up projection instead of the gate projection."""
    g, u = _projections(x_t, w_gate, w_up)
    return (g * _silu(u)) @ np.asarray(w_down, dtype=np.float64)


# Known wrong formulas: the review's numerics diagnosis names one when it reproduces the output.
VARIANTS = {
    "silu_on_up": {
        "cause": "applies SiLU to the up projection instead of the gate projection (g * silu(u) instead of "
                 "silu(g) * u)",
        "action": "apply SiLU to x @ w_gate and multiply by x @ w_up",
        "fn": silu_on_up_oracle,
    },
}


def reference(x_t, w_gate, w_up, w_down):
    return oracle(x_t, w_gate, w_up, w_down).astype(np.float32)
