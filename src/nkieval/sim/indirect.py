"""Access patterns over storage (``tensor.ap(...)``) and indirect (gather/scatter) views."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from nkieval.sim import dtypes as dt
from nkieval.sim.errors import NkiValidationError

if TYPE_CHECKING:
    from nkieval.sim.tensor import NkiTensor


@dataclass
class IndirectAccess:
    """A view whose dim-``indirect_dim`` rows come from an index tensor at run time.

    Row ``r`` of the view starts at element ``offset + index[r] * row_elems`` of the
    storage, where ``row_elems = prod(base_shape[indirect_dim+1:])``; within a row the
    remaining pattern pairs apply.
    """

    flat: np.ndarray
    base_shape: tuple[int, ...]
    pattern: tuple[tuple[int, int], ...]
    offset: int
    index: NkiTensor
    indirect_dim: int

    @property
    def row_elems(self) -> int:
        return int(math.prod(self.base_shape[self.indirect_dim + 1:]))

    def element_offsets(self, rows: np.ndarray) -> np.ndarray:
        """Storage element offsets for the given row indices: shape (len(rows), *free counts)."""
        free = self.pattern[1:]
        offs = np.zeros([len(rows)] + [c for _, c in free], dtype=np.int64)
        offs += (self.offset + rows.astype(np.int64) * self.row_elems).reshape((-1,) + (1,) * len(free))
        for k, (s, c) in enumerate(free):
            shape = [1] * (len(free) + 1)
            shape[k + 1] = c
            offs += (np.arange(c, dtype=np.int64) * s).reshape(shape)
        return offs


def _pattern(pattern: Any) -> tuple[tuple[int, int], ...]:
    try:
        pat = tuple((int(p[0]), int(p[1])) for p in pattern)
    except (TypeError, IndexError, ValueError):
        raise NkiValidationError(f"access pattern must be a list of [stride, count] pairs, got {pattern!r}",
                                 instruction="ap", rule="argument") from None
    if not pat:
        raise NkiValidationError("access pattern is empty", instruction="ap", rule="argument")
    for _stride, c in pat:
        if c <= 0:
            raise NkiValidationError(f"access pattern count {c} must be positive", instruction="ap", rule="argument")
    return pat


def _scalar_value(x: Any) -> int:
    from nkieval.sim.tensor import NkiTensor

    if isinstance(x, NkiTensor):
        if x.size != 1:
            raise NkiValidationError(f"scalar_offset tensor must be [1, 1], got {list(x.shape)}",
                                     instruction="ap", rule="argument")
        return int(np.asarray(x.data, dtype=np.float64).reshape(-1)[0])
    if hasattr(x, "value"):  # virtual register
        return int(x.value)
    return int(x)


def make_ap(t: NkiTensor, pattern: Any, offset: int = 0, scalar_offset: Any = None, vector_offset: Any = None,
            indirect_dim: int = 0, dtype: Any = None) -> NkiTensor:
    from nkieval.sim.tensor import NkiTensor

    a = t.alloc
    flat = a.storage.reshape(-1)
    d = t.dtype
    if dtype is not None:
        d = dt.to_dtype(dtype)
        try:
            flat = flat.view(dt.storage_dtype(d))
        except ValueError as e:
            raise NkiValidationError(f"cannot reinterpret storage as {d}: {e}", instruction="ap", rule="indexing") from None
    pat = _pattern(pattern)
    base_shape = a.shape
    off = t.offset if offset is None else int(offset)
    if scalar_offset is not None:
        off += _scalar_value(scalar_offset) * int(math.prod(base_shape[indirect_dim + 1:]))
    if a.buffer.on_chip:
        row = int(math.prod(base_shape[1:])) * (a.storage.dtype.itemsize // flat.dtype.itemsize or 1)
        if len(pat) < 2 and vector_offset is None:
            raise NkiValidationError("an on-chip access pattern needs a partition pair and at least one free pair",
                                     instruction="ap", rule="indexing")
        if pat[0][1] > 1 and pat[0][0] != row and vector_offset is None:
            raise NkiValidationError(
                f"partition stride {pat[0][0]} must equal the storage free size {row} (partitions are contiguous)",
                instruction="ap", rule="indexing")
    n = flat.size
    if vector_offset is not None:
        if indirect_dim != 0:
            raise NkiValidationError("vector_offset supports only indirect_dim=0", instruction="ap", rule="argument")
        if not isinstance(vector_offset, NkiTensor) or not vector_offset.is_on_chip:
            raise NkiValidationError("vector_offset must be an on-chip [P, 1] index tensor", instruction="ap",
                                     rule="argument")
        ind = IndirectAccess(flat, base_shape, pat, off, vector_offset, indirect_dim)
        # The data view is the first row's pattern; DMA resolves rows through `_ap_base`.
        shape = tuple(c for _, c in pat)
        view = np.zeros(shape, dtype=flat.dtype)
        out = NkiTensor(view, a, d)
        out._ap_base = ind
        return out
    lo = off + sum((c - 1) * s for s, c in pat if s < 0)
    hi = off + sum((c - 1) * s for s, c in pat if s > 0)
    if lo < 0 or hi >= n:
        raise NkiValidationError(
            f"access pattern {[list(p) for p in pat]} with offset {off} reaches elements [{lo}, {hi}] outside "
            f"storage of {n} elements", instruction="ap", operand=a.name or None, rule="out-of-bounds")
    isz = flat.dtype.itemsize
    view = np.lib.stride_tricks.as_strided(flat[off:], shape=tuple(c for _, c in pat),
                                           strides=tuple(s * isz for s, _ in pat))
    return NkiTensor(view, a, d)
