"""Reference for fp8_quantize: per-row absmax scaling to the float8_e4m3 range (max 240)."""

import ml_dtypes
import numpy as np

FP8_MAX = 240.0


def _scale(x):
    amax = np.maximum(np.abs(x).max(axis=1), np.float32(1e-12)).astype(np.float32)
    return (amax / np.float32(FP8_MAX)).astype(np.float32)


def reference(x):
    scale = _scale(x)
    q = (x.astype(np.float64) / scale.astype(np.float64)[:, None]).astype(np.float32)
    return q.astype(ml_dtypes.float8_e4m3), scale


def oracle(x):
    """Unrounded x / scale in float64: the standard bounds q by the fp8 rounding of this."""
    xd = np.asarray(x, dtype=np.float64)
    return xd / _scale(np.asarray(x, dtype=np.float32)).astype(np.float64)[:, None]
