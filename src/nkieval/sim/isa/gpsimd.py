"""GpSimd engine (POOL) instructions: iota, affine_select (GpSimd never touches PSUM)."""

from __future__ import annotations

from typing import Any

import numpy as np

from nkieval.sim.errors import NkiValidationError
from nkieval.sim.isa.core import (
    check_engine_operands,
    free_size,
    instruction,
    record,
    tensor_arg,
    write,
)


def pattern_values(pattern: Any, offset: int, channel_multiplier: int, p: int, role: str = "pattern") -> np.ndarray:
    """``offset + p*channel_multiplier + Σ stride_k * i_k`` over a [[stride, count], ...] pattern, int64 [P, F]."""
    try:
        pat = [(int(s), int(n)) for s, n in pattern]
    except (TypeError, ValueError):
        raise NkiValidationError(f"{role} must be a list of [step, count] pairs, got {pattern!r}", operand=role,
                                 rule="argument") from None
    if not pat or len(pat) > 4:
        raise NkiValidationError(f"{role} needs 1 to 4 [step, count] pairs, got {len(pat)}", operand=role,
                                 rule="argument")
    free = np.zeros([n for _, n in pat], dtype=np.int64)
    for k, (s, n) in enumerate(pat):
        shape = [1] * len(pat)
        shape[k] = n
        free = free + (np.arange(n, dtype=np.int64) * s).reshape(shape)
    vals = int(offset) + np.arange(p, dtype=np.int64)[:, None] * int(channel_multiplier) + free.reshape(1, -1)
    return vals


@instruction("iota", "gpsimd")
def iota(ctx: Any, dst: Any, pattern: Any, offset: int = 0, channel_multiplier: int = 0, name: str | None = None) -> None:
    """``dst[p, ...] = offset + p*channel_multiplier + Σ step_k * i_k`` (int32 math, cast to dst)."""
    dst = tensor_arg(dst, "dst")
    check_engine_operands(ctx, [("dst", dst)], allow_psum=False, engine="gpsimd")
    p = dst.shape[0]
    vals = pattern_values(pattern, offset, channel_multiplier, p)
    if vals.shape[1] != free_size(dst):
        raise NkiValidationError(f"pattern covers {vals.shape[1]} elements per partition but dst{list(dst.shape)} has "
                                 f"{free_size(dst)}", operand="pattern", rule="shape-mismatch")
    vals = ((vals + 2**31) % 2**32 - 2**31)  # int32 wrap-around
    write(ctx, dst, vals.astype(np.float64))
    record(ctx, "iota", "gpsimd", [dst.access("dst", "w")])
