"""Reference for cumsum: float64 inclusive prefix sums rounded once to fp32."""

import numpy as np


def reference(x):
    return np.cumsum(x.astype(np.float64), axis=1).astype(np.float32)


def chunks_without_carry(x, chunk=512):
    """Each run of ``chunk`` columns scanned on its own: the running total is not carried into the next run (the
    scan instruction's free size is 512)."""
    x64 = x.astype(np.float64)
    out = np.empty_like(x64)
    for lo in range(0, x64.shape[1], chunk):
        out[:, lo:lo + chunk] = np.cumsum(x64[:, lo:lo + chunk], axis=1)
    return out


VARIANTS = {
    "no_carry_across_chunks": {
        "cause": "the running total is not carried from one 512-column chunk into the next (each chunk is scanned "
                 "from zero)",
        "action": "seed each chunk's scan with the previous chunk's last column (the scan's initial value)",
        "fn": chunks_without_carry,
    },
}
