"""Reference for batched_gemm: float64 batched product of the bf16 operands, rounded once to fp32."""

import numpy as np


def oracle(a_t, b):
    return np.einsum("bkm,bkn->bmn", np.asarray(a_t, dtype=np.float64), np.asarray(b, dtype=np.float64))


def drops_k_tail_oracle(a_t, b):
    """The product over whole 128-row K tiles only: the last K % 128 contraction rows are left out."""
    kk = (np.shape(a_t)[1] // 128) * 128
    return oracle(np.asarray(a_t)[:, :kk], np.asarray(b)[:, :kk])


# Known wrong formulas: the review's numerics diagnosis names one when it reproduces the output.
VARIANTS = {
    "drops_k_tail": {
        "cause": "drops the last K % 128 rows of the contraction (loops over whole 128-row K tiles only)",
        "action": "add the partial last K tile (ceil(K / 128) tiles, the last one K % 128 rows)",
        "fn": drops_k_tail_oracle,
    },
}


def reference(a_t, b):
    return oracle(a_t, b).astype(np.float32)
