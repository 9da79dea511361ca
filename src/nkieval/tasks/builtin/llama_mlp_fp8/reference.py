"""Reference for llama_mlp_fp8: float64 SwiGLU MLP with dequantised fp8 weights."""

import numpy as np


def oracle(x_t, w_gate, s_gate, w_up, s_up, w_down, s_down):
    f = lambda a: np.asarray(a, dtype=np.float64)  # noqa: E731
    x = f(x_t).T
    g = (x @ f(w_gate)) * f(s_gate)[None, :]
    u = (x @ f(w_up)) * f(s_up)[None, :]
    with np.errstate(over="ignore"):
        act = g / (1.0 + np.exp(-g)) * u
    return (act @ f(w_down)) * f(s_down)[None, :]


def reference(x_t, w_gate, s_gate, w_up, s_up, w_down, s_down):
    return oracle(x_t, w_gate, s_gate, w_up, s_up, w_down, s_down).astype(np.float32)
