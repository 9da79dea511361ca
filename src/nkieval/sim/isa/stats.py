"""Vector-engine statistics: bn_stats (per-chunk count/mean/M2) and bn_aggr (combine → mean, variance).

bn_stats splits each partition's (flattened) free elements into even and odd positions and
emits six fp32 values: count, mean and variance·count (M2) of each half. bn_aggr merges any
number of such (count, mean, M2) triples with the parallel-variance formula and emits the
mean and the population variance. All math is fp32, rounded to ``dst.dtype`` on output.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nkieval.sim.errors import NkiValidationError
from nkieval.sim.fpstate import IGNORE_ALL
from nkieval.sim.isa.core import (
    check_engine_operands,
    free_size,
    instruction,
    read,
    record,
    tensor_arg,
    write,
)


def _check_dst_size(dst: Any, n: int, what: str) -> None:
    if free_size(dst) != n:
        raise NkiValidationError(f"dst{list(dst.shape)} must hold {n} elements per partition ({what})",
                                 operand="dst", rule="shape-mismatch")


def _half_stats(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = x.shape[1]
    count = np.full(x.shape[0], n, dtype=np.float32)
    if n == 0:
        z = np.zeros(x.shape[0], dtype=np.float32)
        return count, z, z.copy()
    mean = x.sum(axis=1, dtype=np.float32) / np.float32(n)
    m2 = np.square(x - mean[:, None]).sum(axis=1, dtype=np.float32)
    return count, mean.astype(np.float32), m2.astype(np.float32)


@instruction("bn_stats", "vector")
def bn_stats(ctx: Any, dst: Any, data: Any, name: str | None = None) -> None:
    """dst[:, 0:6] = (count, mean, var·count) of the even elements, then of the odd elements."""
    dst = tensor_arg(dst, "dst")
    data = tensor_arg(data, "data")
    check_engine_operands(ctx, [("dst", dst), ("data", data)])
    n = free_size(data)
    fmax = int(ctx.target.bn_stats_fmax)
    if n > fmax:
        raise NkiValidationError(f"data has {n} elements per partition, exceeding bn_stats_fmax {fmax}; split it into "
                                 f"{fmax}-element chunks and combine with bn_aggr", operand="data",
                                 rule="instruction-limit")
    _check_dst_size(dst, 6, "even/odd count, mean, variance*count")
    p = data.shape[0]
    x = read(data).reshape(p, n)
    with IGNORE_ALL():
        even = _half_stats(x[:, 0::2])
        odd = _half_stats(x[:, 1::2])
    write(ctx, dst, np.stack([*even, *odd], axis=1).reshape(dst.shape))
    record(ctx, "bn_stats", "vector", [(dst, "dst", "w"), (data, "data", "r")])


@instruction("bn_aggr", "vector")
def bn_aggr(ctx: Any, dst: Any, data: Any, name: str | None = None) -> None:
    """Merge (count, mean, var·count) triples per partition into dst[:, 0:2] = (mean, variance)."""
    dst = tensor_arg(dst, "dst")
    data = tensor_arg(data, "data")
    check_engine_operands(ctx, [("dst", dst), ("data", data)])
    n = free_size(data)
    if n % 3:
        raise NkiValidationError(f"data has {n} elements per partition; bn_aggr needs a multiple of 3 "
                                 "(count, mean, variance*count triples from bn_stats)", operand="data",
                                 rule="shape-mismatch")
    _check_dst_size(dst, 2, "mean, variance")
    p = data.shape[0]
    t = read(data).reshape(p, n // 3, 3)
    cnt, mean, m2 = t[:, :, 0], t[:, :, 1], t[:, :, 2]
    with IGNORE_ALL():
        total = cnt.sum(axis=1, dtype=np.float32)
        live = cnt > 0
        wsum = np.where(live, cnt * mean, np.float32(0)).sum(axis=1, dtype=np.float32)
        mu = (wsum / total).astype(np.float32)
        dev = np.where(live, cnt * np.square(mean - mu[:, None]), np.float32(0)).sum(axis=1, dtype=np.float32)
        var = ((np.where(live, m2, np.float32(0)).sum(axis=1, dtype=np.float32) + dev) / total).astype(np.float32)
    write(ctx, dst, np.stack([mu, var], axis=1).reshape(dst.shape))
    record(ctx, "bn_aggr", "vector", [(dst, "dst", "w"), (data, "data", "r")])
