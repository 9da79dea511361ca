"""Reference for chunked_linear_attention: o = tril(q k^T) v in float64."""

import numpy as np


def oracle(q, k, v):
    qd, kd, vd = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    return np.tril(qd @ kd.T) @ vd


def mask_excludes_diagonal_oracle(q, k, v):
    """o[t] = sum_{s < t} (q[t] . k[s]) v[s]: the causal mask drops each step's own term."""
    qd, kd, vd = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    return np.tril(qd @ kd.T, -1) @ vd


# Known wrong formulas: the review's numerics diagnosis names one when it reproduces the output.
VARIANTS = {
    "mask_excludes_diagonal": {
        "cause": "the causal mask keeps s < t only: each step misses its own (q_t . k_t) v_t term",
        "action": "keep s <= t in the intra-chunk mask (the diagonal included)",
        "fn": mask_excludes_diagonal_oracle,
    },
}


def reference(q, k, v):
    return oracle(q, k, v).astype(np.float32)
