"""Reference for matvec: float64 GEMV rounded once to fp32."""

import numpy as np


def reference(a, x):
    return (a.astype(np.float64) @ x.astype(np.float64)).astype(np.float32)
