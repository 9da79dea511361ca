"""ULP distances in histograms: the buckets, fast histograms of int64 distances, fp32 keys, the labels the
reports print and the overlap of two histograms."""

from __future__ import annotations

import math

import numpy as np


def _ulp_buckets(d: np.ndarray) -> np.ndarray:
    """ULP-histogram bucket of each distance ``d`` (int64, >= 0): d itself up to 2, then
    ceil(log2 d) + 1 (the bit length of d - 1, plus 1), at most 39."""
    b = np.frexp(np.maximum(d, 2) - 1)[1].astype(np.int64)
    b += 1
    np.copyto(b, d, where=d <= 2)
    np.minimum(b, 39, out=b)
    return b


_ULP_TABLE_N = 1 << 16
_ULP_BUCKET = _ulp_buckets(np.arange(_ULP_TABLE_N, dtype=np.int64))  # the bucket of every small distance


# _ulp_buckets by the float64 exponent field of d - 1: 0x3FF + j for d - 1 in [2^j, 2^(j+1)), i.e.
# bit length j + 1 and bucket j + 2 (d - 1 >= 2^53 may round up a binade: bucket 39 either way);
# field 0 is d = 1 (bucket 1) and 0xBFF, the sign and exponent of -1.0, is d = 0 (bucket 0)
_EXP_BUCKET = np.full(1 << 12, 39, dtype=np.intp)
_EXP_BUCKET[0x3FF:0x3FF + 38] = np.arange(2, 40)
_EXP_BUCKET[0] = 1
_EXP_BUCKET[0xBFF] = 0


def _ulp_hist(d: np.ndarray) -> np.ndarray:
    """``np.bincount(_ulp_buckets(d), minlength=40)[:40]`` for int64 distances ``d >= 0``, which it
    overwrites: counts per float64 exponent field of ``d - 1`` (cast in place), added up per
    bucket — no frexp, no masked copy, no fresh array of the size of ``d``."""
    d -= 1
    f = d.view(np.float64)
    np.copyto(f, d, casting="unsafe")
    k = f.view(np.uint64)
    k >>= np.uint64(52)
    counts = np.bincount(k.view(np.int64), minlength=1 << 12)
    return np.bincount(_EXP_BUCKET, weights=counts, minlength=40)[:40].astype(np.int64)

def _ulp_key32(x32: np.ndarray) -> np.ndarray:
    """:func:`~.formats.ulp_key` of float32 values for an fp32 format (the same int64 keys for
    every one of the 2^32 bit patterns, checked exhaustively): sign-magnitude to two's
    complement in int32 (``(m ^ s) - s`` negates ``m`` where the sign ``s`` is -1), then widened.
    About ten times faster than the masked negation, on every output block."""
    b = x32.view(np.int32)
    s = b >> 31
    k = b & np.int32(0x7FFFFFFF)
    k ^= s
    k -= s
    return k.astype(np.int64)

def _ulp_hist_dict(h: np.ndarray) -> dict[str, int]:
    out = {}
    for b, c in enumerate(h):
        if not c:
            continue
        if b <= 2:
            label = str(b)
        else:
            lo, hi = 2 ** (b - 2) + 1, 2 ** (b - 1)
            label = f"{lo}-{hi}" if b < 39 else f">{2 ** 36}"
        out[label] = int(c)
    return out


def _bhattacharyya(h1: np.ndarray, h2: np.ndarray) -> float:
    if h1.sum() == 0 or h2.sum() == 0:
        return math.nan
    p, q = h1 / h1.sum(), h2 / h2.sum()
    return float(np.sum(np.sqrt(p * q)))
