"""Reference for gelu: the exact GELU 0.5 x (1 + erf(x / sqrt 2)) in float64, rounded to fp32."""

import math

import numpy as np

_erf = np.vectorize(math.erf, otypes=[np.float64])


def reference(x):
    xd = x.astype(np.float64)
    return (0.5 * xd * (1.0 + _erf(xd / math.sqrt(2.0)))).astype(np.float32)
