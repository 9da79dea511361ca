"""Reference for rope: x * cos + swap_halves(x) * sin in float64, broadcast over heads (sign folded in sin)."""

import numpy as np


def _rotate(x, cos, sin, partner):
    """x * cos + partner(x) * sin, the [T, D] tables broadcast over the heads."""
    xd = np.asarray(x, dtype=np.float64)
    c, s = (np.asarray(a, dtype=np.float64)[:, None, :] for a in (cos, sin))
    return xd * c + partner(xd) * s


def _swap_halves(z):
    half = z.shape[-1] // 2
    return np.concatenate([z[..., half:], z[..., :half]], axis=-1)


def _pairs(z):
    return z.reshape(*z.shape[:-1], -1, 2)


def oracle(x, cos, sin):
    return _rotate(x, cos, sin, _swap_halves)


def interleaved_pairs_oracle(x, cos, sin):
    """GPT-J rotation of the interleaved pairs (x[2i], x[2i+1]), both by the angle in table column 2i."""
    c, s = (np.repeat(_pairs(np.asarray(a))[..., 0], 2, axis=-1) for a in (cos, sin))  # column 2i twice
    return _rotate(x, c, s, lambda z: _pairs(z)[..., ::-1].reshape(z.shape))


# Known wrong formulas: the review's numerics diagnosis names one when it reproduces the output.
VARIANTS = {
    "interleaved_pairs": {
        "cause": "rotates interleaved pairs (x[2i], x[2i+1]), the GPT-J convention, instead of the two halves "
                 "(x[i], x[i + D/2])",
        "action": "pair element i with element i + D/2 (swap the halves), as the cos/sin tables are laid out",
        "fn": interleaved_pairs_oracle,
    },
}


def reference(x, cos, sin):
    return oracle(x, cos, sin).astype(np.float32)
