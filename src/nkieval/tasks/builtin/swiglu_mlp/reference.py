"""Reference for swiglu_mlp: float64 SwiGLU MLP on the given bf16 operands."""

import numpy as np


def oracle(x_t, w_gate, w_up, w_down):
    x = np.asarray(x_t, dtype=np.float64).T
    g = x @ np.asarray(w_gate, dtype=np.float64)
    u = x @ np.asarray(w_up, dtype=np.float64)
    with np.errstate(over="ignore"):
        act = g / (1.0 + np.exp(-g)) * u
    return act @ np.asarray(w_down, dtype=np.float64)


def reference(x_t, w_gate, w_up, w_down):
    return oracle(x_t, w_gate, w_up, w_down).astype(np.float32)
