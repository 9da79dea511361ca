"""Value-returning ``nl.*`` API over the ISA: allocation, loops, programs, load/store.

These are the current-API (0.3+) semantics; the Beta-1 front end adapts them (dtype=, mask=).
Each wrapper allocates its result (SBUF unless stated) and lowers to ``nisa`` instructions,
so the trace shows the instructions the real wrappers would issue.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator
from typing import Any

import numpy as np

from nkieval.hardware import get_target
from nkieval.sim import isa as _isa  # attribute lookups at call time: instruments see every call
from nkieval.sim.context import current, maybe_current
from nkieval.sim.errors import NkiValidationError
from nkieval.sim.memory import PRIVATE_HBM, PSUM, SBUF, SHARED_HBM, Buffer
from nkieval.sim.ops import LANGUAGE_IMPL
from nkieval.sim.tensor import NkiTensor, allocate, ds
from nkieval.sim.tensor import as_buffer as _as_buffer

sbuf = SBUF
psum = PSUM
hbm = PRIVATE_HBM
private_hbm = PRIVATE_HBM
shared_hbm = SHARED_HBM


# -- creation ------------------------------------------------------------------------
def ndarray(shape: Any, dtype: Any, buffer: Any = None, name: str = "", address: Any = None) -> NkiTensor:
    """Allocate an uninitialised tensor (the simulator fills it with NaN / 4)."""
    return allocate(shape, dtype, buffer, name, address, instruction="ndarray")


def _filled(shape: Any, value: Any, dtype: Any, buffer: Any, name: str, what: str) -> NkiTensor:

    if _as_buffer(buffer).on_chip:
        t = allocate(shape, dtype, buffer, name, instruction=what)
        _isa.memset(t, int(value) if t.dtype.is_int else float(value))
    else:  # HBM is filled before the kernel runs: the allocation carries its value (no instruction)
        t = allocate(shape, dtype, buffer, name, instruction=what, fill=value)
        _isa.core.note_write(t.alloc)
    return t


def zeros(shape: Any, dtype: Any, buffer: Any = None, name: str = "") -> NkiTensor:
    return _filled(shape, 0, dtype, buffer, name, "zeros")


def ones(shape: Any, dtype: Any, buffer: Any = None, name: str = "") -> NkiTensor:
    return _filled(shape, 1, dtype, buffer, name, "ones")


def full(shape: Any, fill_value: Any, dtype: Any, buffer: Any = None, name: str = "") -> NkiTensor:
    return _filled(shape, fill_value, dtype, buffer, name, "full")


def zeros_like(x: NkiTensor, dtype: Any = None, buffer: Any = None, name: str = "") -> NkiTensor:
    return zeros(x.shape, dtype or x.dtype, buffer or x.buffer, name)


def empty_like(x: NkiTensor, dtype: Any = None, buffer: Any = None, name: str = "") -> NkiTensor:
    return ndarray(x.shape, dtype or x.dtype, buffer or x.buffer, name)


# -- memory region predicates ------------------------------------------------------------
def is_sbuf(b: Any) -> bool:
    return isinstance(b, Buffer) and b.kind == "sbuf"


def is_psum(b: Any) -> bool:
    return isinstance(b, Buffer) and b.kind == "psum"


def is_hbm(b: Any) -> bool:
    return isinstance(b, Buffer) and b.kind == "hbm"


def is_on_chip(b: Any) -> bool:
    return isinstance(b, Buffer) and b.on_chip


# -- programs ------------------------------------------------------------------------------
def program_id(axis: int = 0) -> int:
    ctx = current()
    idx = ctx.grid_index
    if not 0 <= int(axis) < builtins.max(1, len(idx)):
        raise NkiValidationError(f"program_id axis {axis} out of range for a {len(idx)}-D launch", rule="argument")
    return int(idx[int(axis)])


def num_programs(axes: Any = 0) -> int:
    ctx = current()
    grid = ctx.launch.grid or (ctx.launch.num_programs,)
    if axes is None:
        return int(np.prod(grid))
    if isinstance(axes, tuple | list):
        return int(np.prod([grid[a] for a in axes]))
    return int(grid[int(axes)])


def program_ndim() -> int:
    """Rank of the launch grid: 0 for a plain launch, 1 for ``kernel[2]`` (LNC 2), N for an N-D grid."""
    launch = current().launch
    if launch.grid:
        return len(launch.grid)
    return 1 if launch.num_programs > 1 else 0


def device_print(prefix: str, tensor: Any) -> None:
    """Print a tensor's values at once (as the reference simulator does)."""
    vals = np.asarray(tensor) if isinstance(tensor, NkiTensor) else tensor
    print(prefix, vals)


# -- loops ----------------------------------------------------------------------------------
class _LoopRange:
    """An NKI loop iterator: iterates like ``range`` and records the loop in the trace context."""

    kind = "range"

    def __init__(self, start: Any, stop: Any = None, step: int = 1) -> None:
        if stop is None:
            start, stop = 0, start
        self.r = builtins.range(int(start), int(stop), int(step))

    def __len__(self) -> int:
        return len(self.r)

    def __iter__(self) -> Iterator[int]:
        ctx = maybe_current()
        if ctx is None:
            yield from self.r
            return
        frame = ctx.push_loop(self.kind, len(self.r))
        try:
            for i in self.r:
                ctx.set_loop_index(frame, i)
                yield i
        finally:
            ctx.pop_loop(frame)


class range(_LoopRange):  # nl.range: a sequential NKI loop, like affine_range & co.
    kind = "range"


class affine_range(_LoopRange):
    kind = "affine"


class sequential_range(_LoopRange):
    kind = "sequential"


class static_range(_LoopRange):
    kind = "static"


# -- data movement ---------------------------------------------------------------------------
def load(src: NkiTensor, dtype: Any = None) -> NkiTensor:
    """HBM → new SBUF tile (dim 0 becomes the partition dim)."""
    if not isinstance(src, NkiTensor):
        raise NkiValidationError(f"src must be an NKI tensor, got {type(src).__name__}", instruction="load",
                                 operand="src", rule="argument")
    if src.buffer.kind != "hbm":
        raise NkiValidationError(f"Expected operand 'src' of 'load' to be in address space 'hbm', but got a tile in "
                                 f"'{src.buffer.kind}' instead.", instruction="load", operand="src", rule="buffer")
    shape = src.shape if src.ndim >= 2 else (1, *src.shape)
    out = allocate(shape, dtype or src.dtype, SBUF, instruction="load")
    _isa.dma_copy(out, src if src.ndim >= 2 else src.reshape(shape))
    return out


def store(dst: NkiTensor, value: Any) -> None:
    """SBUF tile → HBM tensor."""
    if not isinstance(dst, NkiTensor) or dst.buffer.kind != "hbm":
        where = dst.buffer.kind if isinstance(dst, NkiTensor) else type(dst).__name__
        raise NkiValidationError(f"Expected operand 'dst' of 'store' to be in address space 'hbm', but got "
                                 f"'{where}' instead.", instruction="store", operand="dst", rule="buffer")
    if not isinstance(value, NkiTensor):
        raise NkiValidationError("value must be an SBUF tensor", instruction="store", operand="value", rule="argument")
    src = value
    if value.buffer.kind == "psum":
        src = allocate(value.shape, value.dtype, SBUF, instruction="store")
        _isa.tensor_copy(src, value)
    _isa.dma_copy(dst, src)


def copy(x: NkiTensor, dtype: Any = None) -> NkiTensor:
    out = allocate(x.shape, dtype or x.dtype, SBUF, instruction="copy")
    _isa.tensor_copy(out, x)
    return out


# -- tile sizes -------------------------------------------------------------------------------
class _TileSize:
    """``nl.tile_size``: limits of the current target (the running kernel's, else the environment's)."""

    def _t(self) -> Any:
        ctx = maybe_current()
        return ctx.target if ctx is not None else get_target()

    @property
    def pmax(self) -> int:
        return int(self._t().partitions)

    @property
    def psum_fmax(self) -> int:
        return int(self._t().psum_bank_bytes // 4)

    @property
    def psum_bank_fmax(self) -> int:
        return int(self._t().psum_bank_bytes // 4)

    @property
    def psum_bank_fmax_bytes(self) -> int:
        return int(self._t().psum_bank_bytes)

    @property
    def psum_num_banks(self) -> int:
        return int(self._t().psum_banks)

    @property
    def gemm_stationary_fmax(self) -> int:
        return int(self._t().gemm_stationary_fmax)

    @property
    def gemm_moving_fmax(self) -> int:
        # the tiling constant (512 on every generation), not NeuronCore-v4's larger nc_matmul limit
        return int(self._t().tile_size_gemm_moving_fmax)

    @property
    def bn_stats_fmax(self) -> int:
        return int(self._t().bn_stats_fmax)

    @property
    def sbuf_size_bytes(self) -> int:
        return int(self._t().sbuf_bytes_per_partition)

    sbuf_fmax_bytes = sbuf_size_bytes
    total_available_sbuf_size = sbuf_size_bytes

    @property
    def psum_size_bytes(self) -> int:
        return int(self._t().psum_bytes_per_partition)


tile_size = _TileSize()

# Operator objects (nl.copy, ...) call these when used as functions.
LANGUAGE_IMPL.update({"copy": copy})

# Importing language_compute registers the nl.<op> wrappers in LANGUAGE_IMPL.
from nkieval.sim.language_compute import (  # noqa: E402
    all,
    broadcast_to,
    dropout,
    expand_dims,
    matmul,
    max,
    mean,
    min,
    prod,
    rms_norm,
    shared_identity_matrix,
    softmax,
    sum,
    transpose,
    var,
    where,
)

__all__ = [
    "affine_range", "all", "broadcast_to", "copy", "device_print", "dropout", "ds", "empty_like", "expand_dims", "full",
    "hbm", "is_hbm", "is_on_chip", "is_psum", "is_sbuf", "load", "matmul", "max", "mean", "min", "ndarray",
    "num_programs", "ones", "private_hbm", "prod", "program_id", "program_ndim", "psum", "range", "rms_norm",
    "sbuf", "sequential_range", "shared_hbm", "shared_identity_matrix", "softmax", "static_range", "store",
    "sum", "tile_size", "transpose", "var", "where", "zeros", "zeros_like",
]

# load_transpose2d, shared_constant, rand, random_seed and the refused names live in language_tile_sources.
from nkieval.sim.language_tile_sources import (  # noqa: E402, F401, I001
    __all__ as _tile_sources_all, gather_flattened, load_transpose2d, rand, random_seed, shared_constant,
)
__all__ += _tile_sources_all

# NKI 0.7 tile/block grids (nl.tiles, nl.blocks, nl.alloc_tiles, nl.alloc_blocks) live in nkieval.sim.grids.
from nkieval.sim.grids import (  # noqa: E402, F401, I001
    __all__ as _grid_all, NkiBlockGrid, NkiGrid, NkiTileGrid, alloc_blocks, alloc_tiles, blocks, tiles,
)
__all__ += _grid_all

# Device-side control flow (fori_loop, while_loop, dynamic_range, no_reorder) lives in nkieval.sim.control.
from nkieval.sim.control import __all__ as _control_all, dynamic_range, fori_loop, no_reorder, while_loop  # noqa: E402, F401, I001
__all__ += _control_all
