"""The documented platform differences in special values (research note §2.4, §4.6): which NaN/Inf
mismatches gate G1 warns about instead of failing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .formats import Format


@dataclass(frozen=True)
class SpecialValueRule:
    """One documented platform difference in special values (research note §2.4, §4.6).

    ``applies(y, got, out)`` marks elements where a NaN/Inf mismatch is this documented
    difference (G1 then warns instead of failing); rules without it are documentation only
    (handled elsewhere, or not detectable from outputs). ``platforms`` restricts a rule to
    recipes declaring one of them.
    """

    id: str
    situation: str
    behaviours: str
    applies: Callable[[np.ndarray, np.ndarray, Format], np.ndarray] | None = None
    platforms: tuple[str, ...] = ()


def _overflow_variant(y: np.ndarray, got: np.ndarray, out: Format) -> np.ndarray:
    if out.kind != "float":
        return np.zeros(y.shape, dtype=bool)
    over = np.isfinite(y) & (np.abs(y) > out.max)
    same_sign = np.sign(got) == np.sign(y)
    return over & (np.isnan(got) | (np.isinf(got) & same_sign) | ((np.abs(got) == out.max) & same_sign))


def _saturated_inf(y: np.ndarray, got: np.ndarray, out: Format) -> np.ndarray:
    return np.isinf(y) & (np.abs(got) == out.max) & (np.sign(got) == np.sign(y))


SPECIAL_VALUE_TABLE: tuple[SpecialValueRule, ...] = (
    SpecialValueRule("overflow", "result beyond the output format's max",
                     "ml_dtypes e4m3/e5m2 → ±inf, ml_dtypes/PyTorch e4m3fn → NaN, Neuron trn2 e4m3 → NaN, "
                     "NVIDIA __NV_SATFINITE → ±max", _overflow_variant),
    SpecialValueRule("saturate_infinity", "±inf result on trn1 with --enable-saturate-infinity", "±max",
                     _saturated_inf, ("trn1",)),
    SpecialValueRule("ftz", "subnormal result", "flushed to ±0 (CUDA fast-math; undocumented on Neuron): "
                     "accepted through the underflow floor η, not a special value"),
    SpecialValueRule("nan_payload", "NaN sign and payload", "ignored: every NaN matches every NaN"),
    SpecialValueRule("signed_zero", "±0", "equal (except ops whose result is the sign of zero)"),
    SpecialValueRule("transpose_nan_spread", "NaN/Inf through a TensorE identity-matmul transpose (NeuronCore-v2)",
                     "spreads across the output row; v3+ is_transpose is bit-accurate (not modelled: no transpose op)"),
)
