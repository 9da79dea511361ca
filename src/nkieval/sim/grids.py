"""Tile and block grids (NKI 0.7+): ``nl.tiles``, ``nl.blocks``, ``nl.alloc_tiles``, ``nl.alloc_blocks``.

A grid is a *view* of a tensor region in tile (or block) coordinates; it allocates nothing, moves
nothing and records no instruction. ``grid.data`` is the ``NkiTensor`` for the selected region (a
plain slice of the source), which is what instructions take.

Model (documented behaviour; where nkieval had to choose a reading, docs/simulator.md says so):

* ``tile_shape`` (>= 2 dims) applies to the trailing dims of the source; leading dims stay untiled
  and step one element (one slab) at a time. ``block_shape`` counts tiles per block, same rank as
  ``tile_shape``. ``shape`` counts tiles/blocks, rounding up: the last tile/block of a dim is
  clamped to the source extent (``is_remainder``).
* integer indexing consumes a coordinate and keeps the grid type; ``element_shape`` keeps every
  tiled dim and drops consumed untiled (slab) dims, as integer indexing of a tensor does.
* ``tiles(block_grid)`` exposes the tiles inside the selected block(s); ``blocks(grid)`` regroups.
* ``alloc_tiles`` / ``alloc_blocks`` on HBM allocate the compact logical extent. On SBUF/PSUM the
  documentation says only that tiles are laid out in a "dense rank-two capacity layout"; nkieval
  models the case where that layout is the logical tensor itself (the element extent fits one row of
  tiles along the partition dimension) and refuses the rest with ``unsupported``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from nkieval.sim.context import location_str
from nkieval.sim.errors import NkiUnsupportedError, NkiValidationError
from nkieval.sim.tensor import NkiTensor, allocate, as_buffer


@dataclass(frozen=True)
class _Dim:
    """One source dim of a grid selection: elements [start, stop) stepping ``step`` per coordinate."""

    start: int
    stop: int
    step: int  # grid step in elements (tile or block extent; 1 for an untiled slab dim)
    tile: int  # nominal tile extent (1 for an untiled dim)
    tiled: bool
    consumed: bool = False  # integer-indexed: no longer a grid coordinate

    @property
    def count(self) -> int:
        return -(-(self.stop - self.start) // self.step)


def _err(api: str, msg: str, rule: str = "argument", operand: str | None = None) -> NkiValidationError:
    return NkiValidationError(msg, instruction=api, operand=operand, rule=rule, location=location_str())


def _shape_arg(x: Any, api: str, role: str, min_len: int = 1) -> tuple[int, ...]:
    if not isinstance(x, tuple) or any(type(v) is not int for v in x):
        raise _err(api, f"{role} must be a tuple of Python ints, got {x!r}", operand=role)
    if len(x) < min_len:
        raise _err(api, f"{role} must have at least {min_len} dimensions, got {x!r}", operand=role)
    if any(v <= 0 for v in x):
        raise _err(api, f"{role} entries must be positive, got {x!r}", operand=role)
    return x


class NkiGrid:
    """Base of :class:`NkiTileGrid` and :class:`NkiBlockGrid`: a tensor region in grid coordinates."""

    def __init__(self, base: NkiTensor, dims: tuple[_Dim, ...], tile_shape: tuple[int, ...],
                 block_shape: tuple[int, ...] | None = None) -> None:
        self._base = base
        self._dims = dims
        self._tile_shape = tile_shape
        self._block_shape = block_shape

    # -- queries ---------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        """Tiles (or blocks) along each grid coordinate still open."""
        return tuple(d.count for d in self._dims if not d.consumed)

    @property
    def tile_shape(self) -> tuple[int, ...]:
        return self._tile_shape

    @property
    def element_shape(self) -> tuple[int, ...]:
        """Selected elements per source dim (consumed slab dims dropped), clamped to the source."""
        return tuple(d.stop - d.start for d in self._dims if d.tiled or not d.consumed)

    @property
    def index_step_elements(self) -> tuple[int, ...]:
        """Elements per grid-coordinate step, for each open coordinate."""
        return tuple(d.step for d in self._dims if not d.consumed)

    @property
    def is_remainder(self) -> bool:
        """Is some tile/block of the selection clamped by the source extent?"""
        return any(d.tiled and (d.stop - d.start) % d.step != 0 for d in self._dims)

    @property
    def is_data_representable(self) -> bool:
        return True  # every grid nkieval builds is a rectangular slice of its source

    @property
    def dtype(self) -> Any:
        return self._base.dtype

    @property
    def buffer(self) -> Any:
        return self._base.buffer

    @property
    def data(self) -> NkiTensor:
        """The selected region as one tensor operand (a view of the source)."""
        key = tuple(d.start if (d.consumed and not d.tiled) else slice(d.start, d.stop) for d in self._dims)
        return self._base[key]

    # -- indexing --------------------------------------------------------------------------
    def __getitem__(self, key: Any) -> NkiGrid:
        api = type(self).__name__
        keys = key if isinstance(key, tuple) else (key,)
        open_dims = [i for i, d in enumerate(self._dims) if not d.consumed]
        if len(keys) > len(open_dims):
            raise _err(api, f"{len(keys)} indices for a grid of rank {len(open_dims)}", "indexing")
        dims = list(self._dims)
        for k, i in zip(keys, open_dims, strict=False):
            d = dims[i]
            n = d.count
            if isinstance(k, bool) or not isinstance(k, int | np.integer | slice):
                raise _err(api, f"grid index must be an int or a slice, got {type(k).__name__}", "indexing")
            if isinstance(k, slice):
                if k.step not in (None, 1):
                    raise _err(api, f"grid slices take step 1, got {k.step}", "indexing")
                lo, hi, _ = k.indices(n)
                if hi <= lo:
                    raise _err(api, f"empty grid slice {k} of a dimension with {n} entries", "out-of-bounds")
                dims[i] = _Dim(d.start + lo * d.step, min(d.stop, d.start + hi * d.step), d.step, d.tile, d.tiled)
            else:
                j = int(k)
                if not -n <= j < n:
                    raise _err(api, f"grid index {j} is out of range for a dimension with {n} entries",
                               "out-of-bounds")
                j %= n
                dims[i] = _Dim(d.start + j * d.step, min(d.stop, d.start + (j + 1) * d.step), d.step, d.tile,
                               d.tiled, consumed=True)
        return type(self)(self._base, tuple(dims), self._tile_shape, self._block_shape)

    def __iter__(self) -> Any:
        raise TypeError(f"iterate a {type(self).__name__} with range(grid.shape[i]) and index it")

    def __repr__(self) -> str:
        extra = f", block_shape={self._block_shape}" if self._block_shape is not None else ""
        return (f"{type(self).__name__}(shape={self.shape}, tile_shape={self._tile_shape}{extra}, "
                f"element_shape={self.element_shape}, {self._base.buffer.kind})")


class NkiTileGrid(NkiGrid):
    """A tensor region navigated in tile coordinates (from ``nl.tiles`` / ``nl.alloc_tiles``)."""


class NkiBlockGrid(NkiGrid):
    """A tensor region navigated in block coordinates (from ``nl.blocks`` / ``nl.alloc_blocks``)."""

    @property
    def block_shape(self) -> tuple[int, ...]:
        assert self._block_shape is not None
        return self._block_shape


def _region(source: Any, api: str) -> tuple[NkiTensor, list[tuple[int, int]], tuple[int, ...] | None]:
    """(base tensor, [start, stop) per source dim, the source grid's tile_shape or None)."""
    if isinstance(source, NkiGrid):
        return source._base, [(d.start, d.stop) for d in source._dims], source._tile_shape
    if isinstance(source, NkiTensor):
        if source._ap_base is not None:
            raise _err(api, "the source is an indirect view; grids take plain tensors", "indexing", "source")
        return source, [(0, n) for n in source.shape], None
    raise _err(api, f"source must be an NkiTensor or a grid, got {type(source).__name__}", operand="source")


def _build(source: Any, tile_shape: Any, block_shape: tuple[int, ...] | None, api: str, cls: type) -> NkiGrid:
    base, ranges, src_tile = _region(source, api)
    consumed_slab = [d.consumed and not d.tiled for d in source._dims] if isinstance(source, NkiGrid) else \
        [False] * len(ranges)
    if tile_shape is None:
        if src_tile is None:
            raise _err(api, "tile_shape is required when the source is a tensor", operand="tile_shape")
        tile_shape = src_tile
    ts = _shape_arg(tile_shape, api, "tile_shape", 2)
    free = [i for i, c in enumerate(consumed_slab) if not c]  # dims that can still be tiled
    if len(ts) > len(free):
        raise _err(api, f"tile_shape {ts} has more dimensions than the source ({len(free)})", operand="tile_shape")
    if block_shape is not None and len(block_shape) != len(ts):
        raise _err(api, f"block_shape {block_shape} must have the rank of tile_shape {ts}", operand="block_shape")
    tiled_dims = free[len(free) - len(ts):]
    dims = []
    for i, (lo, hi) in enumerate(ranges):
        if i in tiled_dims:
            k = tiled_dims.index(i)
            t = ts[k]
            step = t * (block_shape[k] if block_shape is not None else 1)
            dims.append(_Dim(lo, hi, step, t, True))
        else:
            dims.append(_Dim(lo, hi, 1, 1, False, consumed=consumed_slab[i]))
    return cls(base, tuple(dims), ts, block_shape)


def tiles(source: Any, *, tile_shape: Any = None) -> NkiTileGrid:
    """A tile-coordinate view of ``source`` (a tensor, a tile grid, or a block grid's selected blocks)."""
    return _build(source, tile_shape, None, "tiles", NkiTileGrid)  # type: ignore[return-value]


def blocks(source: Any, *, tile_shape: Any = None, block_shape: Any = None) -> NkiBlockGrid:
    """A block-coordinate view of ``source``: each block groups ``block_shape`` tiles of ``tile_shape``."""
    bs = _shape_arg(block_shape, "blocks", "block_shape")
    return _build(source, tile_shape, bs, "blocks", NkiBlockGrid)  # type: ignore[return-value]


def _alloc(api: str, tile_shape: Any, element_shape: Any, buffer: Any, dtype: Any, address: Any,
           name: str) -> NkiTensor:
    ts = _shape_arg(tile_shape, api, "tile_shape", 2)
    es = _shape_arg(element_shape, api, "element_shape")
    if len(ts) > len(es):
        raise _err(api, f"tile_shape {ts} has more dimensions than element_shape {es}", operand="tile_shape")
    buf = as_buffer(buffer)
    if buf.on_chip:
        if len(es) != len(ts):
            raise NkiUnsupportedError(
                f"on {buf.kind.upper()} the element extent {es} needs untiled leading dims; the documented "
                "'dense rank-two capacity layout' of such a grid is not specified, so nkieval does not model it",
                instruction=api, location=location_str())
        if es[0] > ts[0]:
            n = math.ceil(es[0] / ts[0])
            raise NkiUnsupportedError(
                f"element_shape {es} spans {n} tiles of {ts[0]} along the partition dimension; the "
                "documented 'dense rank-two capacity layout' that stacks them in SBUF/PSUM is not specified "
                "precisely enough to simulate (allocate one row of tiles, es[0] <= tile_shape[0], or use "
                "nl.ndarray per tile row)", instruction=api, location=location_str())
    return allocate(es, dtype, buffer, name, address, instruction=api)


def alloc_tiles(*, tile_shape: Any, element_shape: Any, buffer: Any, dtype: Any, address: Any = None,
                name: str = "") -> NkiTileGrid:
    """New uninitialised storage of ``element_shape`` viewed as a grid of ``tile_shape`` tiles."""
    t = _alloc("alloc_tiles", tile_shape, element_shape, buffer, dtype, address, name)
    return tiles(t, tile_shape=tile_shape)


def alloc_blocks(*, tile_shape: Any, block_shape: Any, element_shape: Any, buffer: Any, dtype: Any,
                 address: Any = None, name: str = "") -> NkiBlockGrid:
    """New uninitialised storage viewed as blocks of ``block_shape`` tiles of ``tile_shape``."""
    _shape_arg(block_shape, "alloc_blocks", "block_shape")
    t = _alloc("alloc_blocks", tile_shape, element_shape, buffer, dtype, address, name)
    return blocks(t, tile_shape=tile_shape, block_shape=block_shape)


__all__ = ["NkiBlockGrid", "NkiGrid", "NkiTileGrid", "alloc_blocks", "alloc_tiles", "blocks", "tiles"]
