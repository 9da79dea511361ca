"""Vector-engine top-8 search: max8 (8 largest values) and nc_find_index8 (their positions).

Both read 8..16384 elements per partition (flattened free dims) in fp32. nc_find_index8
returns the first occurrence of each value; a value listed twice takes the next occurrence;
a value that is absent yields the all-ones sentinel (0xFFFFFFFF / 0xFFFF).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nkieval.sim import dtypes as dt
from nkieval.sim.errors import NkiValidationError
from nkieval.sim.isa.core import (
    check_dtype,
    check_engine_operands,
    check_max_free_dims,
    free_size,
    instruction,
    read,
    record,
    tensor_arg,
    write,
    write_bits,
)

INDEX8_DTYPES = (dt.uint32, dt.uint16)


def _check_count(ctx: Any, t: Any, role: str) -> int:
    n = free_size(t)
    lo, hi = int(ctx.target.max8_min_elems), int(ctx.target.max8_max_elems)
    if not lo <= n <= hi:
        raise NkiValidationError(f"{role} has {n} elements per partition; must be between {lo} and {hi}",
                                 operand=role, rule="instruction-limit")
    return n


def _check_eight(t: Any, role: str) -> None:
    if free_size(t) != 8:
        raise NkiValidationError(f"{role}{list(t.shape)} must hold exactly 8 elements per partition", operand=role,
                                 rule="shape-mismatch")


@instruction("max8", "vector")
def max8(ctx: Any, dst: Any, src: Any, name: str | None = None) -> None:
    """dst[p, 0:8] = the 8 largest values of src[p, ...] in descending order."""
    dst = tensor_arg(dst, "dst")
    src = tensor_arg(src, "src")
    check_engine_operands(ctx, [("dst", dst), ("src", src)])
    check_max_free_dims(src, "src", 4)
    n = _check_count(ctx, src, "src")
    _check_eight(dst, "dst")
    p = src.shape[0]
    x = read(src).reshape(p, n)
    top = -np.sort(-x, axis=1, kind="stable")[:, :8]
    write(ctx, dst, top.reshape(dst.shape))
    record(ctx, "max8", "vector", [(dst, "dst", "w"), (src, "src", "r")])


@instruction("nc_find_index8", "vector")
def nc_find_index8(ctx: Any, dst: Any, data: Any, vals: Any, name: str | None = None) -> None:
    """dst[p, k] = index of the first (next, for repeated values) occurrence of vals[p, k] in data[p, ...]."""
    dst = tensor_arg(dst, "dst")
    data = tensor_arg(data, "data")
    vals = tensor_arg(vals, "vals")
    check_engine_operands(ctx, [("dst", dst), ("data", data), ("vals", vals)])
    check_dtype(dst, "dst", INDEX8_DTYPES, " for index output")
    n = _check_count(ctx, data, "data")
    _check_eight(vals, "vals")
    _check_eight(dst, "dst")
    p = data.shape[0]
    x = read(data).reshape(p, n)
    v = read(vals).reshape(p, 8)
    sentinel = (1 << (8 * dst.dtype.itemsize)) - 1
    out = np.full((p, 8), sentinel, dtype=np.int64)
    for row in range(p):
        used: dict[float, int] = {}
        for k in range(8):
            hits = np.flatnonzero(x[row] == v[row, k])
            nth = used.get(float(v[row, k]), 0)
            if nth < hits.size:
                out[row, k] = hits[nth]
                used[float(v[row, k])] = nth + 1
    write_bits(dst, out.reshape(dst.shape))
    record(ctx, "nc_find_index8", "vector", [(dst, "dst", "w"), (data, "data", "r"),
                                             (vals, "vals", "r")])
