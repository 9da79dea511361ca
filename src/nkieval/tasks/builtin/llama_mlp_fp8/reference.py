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


def gate_scale_on_up_oracle(x_t, w_gate, s_gate, w_up, s_up, w_down, s_down):
    """The MLP with the up projection dequantised by s_gate instead of s_up."""
    return oracle(x_t, w_gate, s_gate, w_up, s_gate, w_down, s_down)


# Known wrong formulas: the review's numerics diagnosis names one when it reproduces the output.
VARIANTS = {
    "gate_scale_on_up": {
        "cause": "dequantises the up projection with the gate projection's scale s_gate (s_up is never used)",
        "action": "scale the up projection's PSUM result by s_up, the gate projection's by s_gate",
        "fn": gate_scale_on_up_oracle,
    },
}


def reference(x_t, w_gate, s_gate, w_up, s_up, w_down, s_down):
    return oracle(x_t, w_gate, s_gate, w_up, s_up, w_down, s_down).astype(np.float32)
