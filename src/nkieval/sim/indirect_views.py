"""What an indirect (run-time addressed) tensor view reads: the descriptors NkiTensor views carry in
``_ap_base``. ``tensor.py`` builds the views (``.ap(vector_offset=)``, ``.vector_select``, ``.indirect``),
``indirect.py`` resolves them when an instruction runs, and the DMA instructions read them."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

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
    #: ``vector_select``: rows are ``row_stride`` elements apart (the view's dim-0 stride) and an
    #: index must be below ``rows`` (the view's dim-0 size); ``.ap()`` leaves both None.
    row_stride: int | None = None
    rows: int | None = None

    @property
    def row_elems(self) -> int:
        if self.row_stride is not None:
            return self.row_stride
        return int(math.prod(self.base_shape[self.indirect_dim + 1:]))

    def rows_ok(self, idx: np.ndarray) -> np.ndarray:
        """Which indices are inside the indexed dimension (always true for ``.ap()`` views, whose
        bound is the storage, checked on the element offsets)."""
        if self.rows is None:
            return np.ones(idx.shape, dtype=bool)
        return (idx >= 0) & (idx < self.rows)

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


@dataclass
class OutOfBoundsView:
    """An ``.ap()`` view that reaches outside its tensor's storage. Making one is legal, using one is not: with a
    run-time start (``scalar_offset``) the DMA that uses it checks at run time (``oob_mode.skip`` drops the
    transfer, ``error``, the default, raises); a static pattern (``static``) raises ``out-of-bounds`` wherever it
    is used, as any other use of either does."""

    message: str
    static: bool = False


@dataclass
class TensorIndirection:
    """``t.indirect(index, num_elem)``: columns of an on-chip tensor chosen at run time.

    Row ``p`` of the dense operand is ``base[p, offsets[p, :num_elem]]`` (flattened free position).
    Every partition of a group (16 on V/S/G, 32 on the Tensor engine) uses the same offsets."""

    base: NkiTensor
    index: NkiTensor
    num_elem: int
