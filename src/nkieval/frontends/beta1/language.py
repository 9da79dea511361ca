"""Beta-1 ``nki.language``: value-returning calls with ``dtype=`` / ``mask=``, index grids, SPMD.

Served as ``neuronxcc.nki.language``. Signatures follow the Beta-1 API reference; each call
lowers onto the simulator's instructions through :mod:`nkieval.frontends.beta1.ops`.
"""

from __future__ import annotations

import builtins
import dis
import functools
import math
import sys
from collections.abc import Iterator
from typing import Any

import ml_dtypes
import numpy as np

from nkieval.frontends.beta1 import elide, ops, restart, state
from nkieval.frontends.beta1.index import (  # noqa: F401 - re-exported as nl.*
    arange,
    mgrid,
    nc,
    par_dim,
    split_par_dim,
    spmd_dim,
)
from nkieval.frontends.beta1.ops import (
    Beta1Unsupported,
    PendingMatmul,
    boxes_for,
    instr,
    lc,
    new_tile,
    restrict,
    sub,
    tile,
)
from nkieval.frontends.beta1.tensor import Access, B1Tensor, wrap
from nkieval.sim import dtypes as dt
from nkieval.sim import language as sim_nl
from nkieval.sim import language_compute as _lang_compute
from nkieval.sim import language_tile_sources as _tile_sources
from nkieval.sim.context import current, maybe_current
from nkieval.sim.errors import NkiValidationError
from nkieval.sim.memory import PRIVATE_HBM, PSUM, SBUF, SHARED_HBM, Buffer
from nkieval.sim.ops import BINARY, OPS, UNARY, Op
from nkieval.sim.tensor import (  # noqa: F401 - ds is nl.ds
    NkiTensor,
    allocate,
    as_buffer,
    check_on_chip_rank,
    cover_deferred_fill,
    ds,
)


class B1Op(Op):
    """``nl.add`` etc. in Beta 1: an operator object (``op=nl.add``) that, called, is the
    value-returning function with ``dtype=`` / ``mask=``."""

    __slots__ = ("impl",)

    def __init__(self, name: str, impl: Any) -> None:
        super().__init__(name)
        self.impl = impl

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.impl(*args, **kwargs)


sbuf = SBUF
psum = PSUM
hbm = PRIVATE_HBM
private_hbm = PRIVATE_HBM
shared_hbm = SHARED_HBM
tile_size = sim_nl.tile_size

# dtypes (Beta 1 exposed numpy-compatible dtypes; ours compare equal to the numpy ones)
float32 = dt.float32
float16 = dt.float16
bfloat16 = dt.bfloat16
tfloat32 = dt.tfloat32
float8_e4m3 = dt.float8_e4m3
float8_e5m2 = dt.float8_e5m2
int8, int16, int32 = dt.int8, dt.int16, dt.int32
uint8, uint16, uint32 = dt.uint8, dt.uint16, dt.uint32
bool_ = dt.bool_


class fp32:
    """``nl.fp32.min``: the most negative finite fp32 (used as a -inf stand-in)."""

    min = float(np.finfo(np.float32).min)


class bfp16:
    """``nl.bfp16.min``: the most negative finite bfloat16."""

    min = float(ml_dtypes.finfo(ml_dtypes.bfloat16).min)


def finfo(dtype: Any) -> Any:
    return ml_dtypes.finfo(dt.to_dtype(dtype).storage)


# -- creation --------------------------------------------------------------------------------------
def _buffer(buffer: Any) -> tuple[Buffer, Any]:
    """(memory, Beta-1 allocator object or None); nki.compiler allocators carry their memory."""
    if buffer is None:
        return SBUF, None
    if isinstance(buffer, Buffer):
        return buffer, None
    return as_buffer(buffer), buffer


def ndarray(shape: Any, dtype: Any, *, buffer: Any = None, name: str = "", **kwargs: Any) -> B1Tensor:
    """Allocate a tensor; ``nl.par_dim`` marks the partition dim when block dims come first."""
    return _ndarray(shape, dtype, buffer, name)


def _ndarray(shape: Any, dtype: Any, buffer: Any, name: str, defer_fill: bool = False,
             api: str = "ndarray") -> B1Tensor:
    """``nl.ndarray`` (or the ``api`` that makes one, named in its errors); ``defer_fill``: for a caller that writes
    the whole tensor next (nkieval.sim.tensor's ``cover_deferred_fill``), its on-chip storage's sentinels are not
    written first."""
    plain, pdim = split_par_dim(shape)
    buf, allocator = _buffer(buffer)
    if allocator is not None and hasattr(allocator, "check"):
        allocator.check(plain, pdim)
    if not buf.on_chip:
        if buf is not SHARED_HBM and current().launch.num_programs == 1:
            buf = SHARED_HBM  # one program: private HBM is shared HBM (and Beta 1 let kernels return it)
        return wrap(allocate(plain, dtype, buf, name, instruction="ndarray"))
    if pdim == 0 and len(plain) < 2:
        if api != "ndarray":  # (nl.zeros((n,)) writes the 1-D tile: Beta 1's "Insufficient rank!")
            check_on_chip_rank(plain, buf, name, api)
        # a 1-D tile only declared (course kernels declare nl.ndarray((nl.par_dim(128),)) and rebind the name
        # at once): its one dimension is the partition dimension, with one element per partition
        plain = (*plain, 1) if plain else (1, 1)
    ops.check_partitions((plain[pdim],), "ndarray")
    if allocator is not None and getattr(allocator, "direct", False):
        return _placed(plain, pdim, dtype, buf, allocator, name)
    restart.check_declaration(math.prod(plain) * dt.to_dtype(dtype).itemsize)  # (too large: a replay instead)
    storage_shape = (plain[pdim], *plain[:pdim], *plain[pdim + 1:])
    t = allocate(storage_shape, dtype, buf, name, instruction="ndarray", defer_fill=defer_fill)
    state.note_allocation(t)
    if pdim == 0:
        return wrap(t)
    order = [*range(1, pdim + 1), 0, *range(pdim + 1, len(plain))]
    return B1Tensor(t.data.transpose(order), t.alloc, t.dtype, pdim)


def _placed(plain: tuple[int, ...], pdim: int, dtype: Any, buf: Buffer, allocator: Any, name: str) -> B1Tensor:
    """A tensor whose logical blocks sit where ``ncc.*.alloc`` / ``mod_alloc`` put them: blocks (and tensors)
    at the same location share one physical tile, so writes through one are seen through the other."""
    st = state.state()
    d = dt.to_dtype(dtype)
    tile_shape = (plain[pdim], *plain[pdim + 1:])
    fbytes = int(np.prod(tile_shape[1:])) * d.itemsize
    ctx = current()
    bank_bytes = ctx.target.psum_bank_bytes
    tiles: dict[tuple[int, ...], B1Tensor] = {}
    for idx in np.ndindex(*plain[:pdim]):
        bank, part, addr = allocator.place(tuple(int(i) for i in idx), tile_shape[0], fbytes)
        key = (buf.kind, bank, part, addr)
        t = st.placed.get(key) if st is not None else None
        if t is not None and (t.shape[0] != tile_shape[0] or t.alloc.row_bytes != fbytes
                              or t.dtype.itemsize != d.itemsize):
            t = None  # a different tile at this address: a fresh allocation (no partial-overlap aliasing)
        if t is None:
            free = addr + (bank * bank_bytes if buf is PSUM else 0)
            t = allocate(tile_shape, d, buf, name, address=(part, free), instruction="ndarray")
            state.note_allocation(t)
            if st is not None:
                st.placed[key] = t
                st.direct.add(t.alloc.id)
        elif t.dtype != d:
            t = t.view(d)
        tiles[tuple(int(i) for i in idx)] = wrap(t)
    if pdim == 0:
        return wrap(tiles[()])
    first = next(iter(tiles.values()))
    # the logical tensor's own data is a zero-stride stand-in with the logical shape; block access goes
    # through `blocks` (B1Tensor.__getitem__), so every block reads and writes its physical tile
    data = np.lib.stride_tricks.as_strided(first.data, shape=plain,
                                           strides=(0,) * pdim + first.data.strides)
    out = B1Tensor(data, first.alloc, first.dtype, pdim)
    out.blocks = tiles
    return out


def _filled(shape: Any, value: Any, dtype: Any, buffer: Any, name: str, api: str) -> B1Tensor:
    buf, _ = _buffer(buffer)
    if not buf.on_chip:
        raise NkiValidationError("Creating HBM tensor with init value is not supported.", instruction=api,
                                 rule="argument")
    t = _ndarray(shape, dtype, buffer, name, defer_fill=True, api=api)
    # the memsets below write every block, so every element of the storage (placed blocks are never deferred)
    cover_deferred_fill(t)
    tiles = [t] if t.pdim == 0 else [t[idx] for idx in np.ndindex(*t.shape[:t.pdim])]
    ctx = maybe_current() if buf is PSUM and value == 0 else None
    for tl in tiles:
        instr("memset")(tl, int(value) if tl.dtype.is_int else float(value))
        if ctx is not None:  # a zeroed accumulator: see nkieval.frontends.beta1.elide
            elide.note_psum_zeroing(ctx)
    return t


def zeros(shape: Any, dtype: Any, *, buffer: Any = None, name: str = "", **kwargs: Any) -> B1Tensor:
    return _filled(shape, 0, dtype, buffer, name, "zeros")


def ones(shape: Any, dtype: Any, *, buffer: Any = None, name: str = "", **kwargs: Any) -> B1Tensor:
    return _filled(shape, 1, dtype, buffer, name, "ones")


def full(shape: Any, fill_value: Any, dtype: Any, *, buffer: Any = None, name: str = "", **kwargs: Any) -> B1Tensor:
    return _filled(shape, fill_value, dtype, buffer, name, "full")


def zeros_like(a: Any, dtype: Any = None, *, buffer: Any = None, name: str = "", **kwargs: Any) -> B1Tensor:
    return zeros(a.shape, dtype or a.dtype, buffer=buffer, name=name)


def empty_like(a: Any, dtype: Any = None, *, buffer: Any = None, name: str = "", **kwargs: Any) -> B1Tensor:
    return ndarray(a.shape, dtype or a.dtype, buffer=buffer if buffer is not None else a.buffer, name=name)


def shared_constant(constant: Any, dtype: Any = None, **kwargs: Any) -> B1Tensor:
    """A constant (array or .npy path) placed in shared HBM, initialised before the kernel runs."""
    return wrap(_tile_sources.shared_constant(constant, dtype))


def shared_identity_matrix(n: int, dtype: Any = dt.uint8, **kwargs: Any) -> B1Tensor:
    """An [n, n] identity matrix in shared HBM (a constant the compiler de-duplicates)."""
    return wrap(_tile_sources.shared_constant(np.eye(int(n)), dtype))


def static_cast(input_data: Any, dtype: Any) -> Any:
    """Cast a tile (a copy with a new dtype); on a host NumPy array it is ``astype`` (test drivers use that)."""
    if isinstance(input_data, np.ndarray):
        return dt.cast(input_data, dt.to_dtype(dtype))
    return ops.copy(input_data, dtype=dtype, api="static_cast")


# -- programs -------------------------------------------------------------------------------------
def program_id(axis: int) -> int:
    return sim_nl.program_id(int(axis))


def num_programs(axes: Any = None) -> int:
    return sim_nl.num_programs(axes)


def program_ndim() -> int:
    return sim_nl.program_ndim()


# -- loops ----------------------------------------------------------------------------------------
class affine_range(sim_nl.affine_range):
    """Parallel loop: iterations must not write the same element of an outer tensor (checked)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args[:3])

    def __iter__(self) -> Iterator[int]:
        loop = state.enter_loop(len(self.r), self.r.start, self.r.step)
        try:
            for ordinal, i in enumerate(super().__iter__()):
                if loop is not None:
                    loop.iteration = ordinal
                yield i
        finally:
            state.exit_loop(loop)


class sequential_range(sim_nl.sequential_range):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args[:3])


class static_range(sim_nl.static_range):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args[:3])


# -- data movement --------------------------------------------------------------------------------
def _hbm_operand(x: Any, role: str, api: str) -> Any:
    if isinstance(x, NkiTensor):
        ops.flush(x)
        x = wrap(x) if not isinstance(x, B1Tensor) else x
    elif not isinstance(x, Access):
        raise NkiValidationError(f"operand '{role}' of '{api}' must be an HBM tensor, got {type(x).__name__}",
                                 instruction=api, operand=role, rule="argument")
    if x.is_on_chip:
        raise NkiValidationError(f"Expected operand '{role}' of '{api}' to be in address space 'hbm', but got a tile "
                                 f"in '{x.buffer.kind}' instead.", instruction=api, operand=role, rule="buffer")
    return x


def _tile_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    return shape if len(shape) >= 2 else (*shape, 1) if shape else (1, 1)


def load(src: Any, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> B1Tensor:
    """HBM → new SBUF tile; masked-out elements are not loaded; ``src`` may use an SBUF index tile."""
    src = _hbm_operand(src, "src", "load")
    full = _tile_shape(tuple(src.shape))
    out = new_tile(full, dtype if dtype is not None else src.dtype, SBUF, "load")
    boxes = boxes_for(mask, full, "load")
    for box in boxes:
        s = restrict(src, box, full) if len(src.shape) == len(full) else _reshaped(src, box, full)
        instr("dma_copy")(sub(out, box), s)
    return ops.masked(out, boxes)  # t[...] = nl.load(..., mask=m) writes only the masked elements of t


def _reshaped(src: Any, box: Any, full: tuple[int, ...]) -> Any:
    v = src.view() if isinstance(src, Access) else src
    v = wrap(v.reshape(full))
    return v if box is None else wrap(v._index(box))


def store(dst: Any, value: Any, *, mask: Any = None, **kwargs: Any) -> None:
    """Tile (SBUF, or PSUM via a copy) or scalar → HBM; masked-out elements are not stored."""
    dst = _hbm_operand(dst, "dst", "store")
    full = _tile_shape(tuple(dst.shape))
    if ops.is_scalar(value):
        value = full_tile(full, value, dst.dtype)
    value = tile(value, "value", "store")
    for box in boxes_for(mask, full, "store"):
        d = restrict(dst, box, full) if len(dst.shape) == len(full) else _reshaped(dst, box, full)
        v = restrict(value, box, full)
        ops.copy_into(d, v, "store")
        state.note_write(d, what="store")


def full_tile(shape: tuple[int, ...], value: Any, dtype: Any) -> B1Tensor:
    t = new_tile(shape, dtype, SBUF, "store")
    instr("memset")(t, int(value) if t.dtype.is_int else float(value))
    return t


def load_transpose2d(src: Any, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> B1Tensor:
    """HBM [a, b] → SBUF tile [b, a] (a strided DMA)."""
    src = _hbm_operand(src, "src", "load_transpose2d")
    if isinstance(src, Access) and src.dyn is not None:
        raise NkiValidationError("indirect indices are not supported with load_transpose2d",
                                 instruction="load_transpose2d", rule="indexing")
    if len(src.shape) != 2:
        raise NkiValidationError(f"load_transpose2d needs a 2-D source, got {list(src.shape)}",
                                 instruction="load_transpose2d", rule="argument")
    full = (src.shape[1], src.shape[0])
    out = new_tile(full, dtype if dtype is not None else src.dtype, SBUF, "load_transpose2d")
    boxes = boxes_for(mask, full, "load_transpose2d")
    for box in boxes:
        v = src.view() if isinstance(src, Access) else src
        vt = wrap(v.permute((1, 0)))
        s = vt if box is None else wrap(vt._index(box))
        instr("dma_copy")(sub(out, box), s)
    return ops.masked(out, boxes)


def _copy(src: Any, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> B1Tensor:
    return ops.copy(src, dtype=dtype, mask=mask)


copy = B1Op("copy", _copy)


def atomic_rmw(dst: Any, value: Any, op: Any, *, mask: Any = None, **kwargs: Any) -> None:
    """``dst = op(dst, value)`` on HBM rows chosen by an index tile (only add; duplicates accumulate)."""
    from nkieval.sim.ops import as_op

    o = as_op(op, "atomic_rmw")
    if o.name != "add":
        raise NkiValidationError(f"atomic_rmw supports only op=np.add / nl.add, got {o.name}", instruction="atomic_rmw",
                                 operand="op", rule="argument")
    if not isinstance(dst, Access) or dst.dyn is None:
        raise NkiValidationError("atomic_rmw only supports indirect dynamic indexing of dst (hbm[idx_tile, i_f])",
                                 instruction="atomic_rmw", operand="dst", rule="indexing")
    full = tuple(dst.shape)
    if ops.is_scalar(value):
        value = full_tile(full, value, dst.dtype)
    value = tile(value, "value", "atomic_rmw")
    idx_t = dst.items[dst.dyn]
    idx_v = idx_t.view() if isinstance(idx_t, Access) else idx_t
    for box in boxes_for(mask, full, "atomic_rmw"):
        p0, p1 = (box[0].start or 0, box[0].stop or full[0]) if box is not None else (0, full[0])
        rows = np.asarray(idx_v.data).reshape(-1)[p0:p1]
        # rows with a repeated index are applied one at a time so every contribution lands
        groups = [(p0, p1)] if len(np.unique(rows)) == len(rows) else [(r, r + 1) for r in range(p0, p1)]
        for g0, g1 in groups:
            gbox = (slice(g0, g1), *(box[1:] if box is not None else (slice(0, n) for n in full[1:])))
            where = dst.view(gbox)
            cur = new_tile(where.shape, dst.dtype, SBUF, "atomic_rmw")
            instr("dma_copy")(cur, where)
            ops.binary_into(cur, "add", cur, restrict(value, gbox, full), "atomic_rmw")
            instr("dma_copy")(dst.view(gbox), cur)


# -- matmul / transpose ---------------------------------------------------------------------------
def matmul(x: Any, y: Any, *, transpose_x: bool = False, mask: Any = None, **kwargs: Any) -> B1Tensor:
    """``x @ y`` (``x.T @ y`` with transpose_x) into PSUM; ``psum += nl.matmul(...)`` accumulates."""
    x, y = tile(x, "x", "matmul"), tile(y, "y", "matmul")
    full = (math.prod(x.shape[1:]) if transpose_x else int(x.shape[0]), math.prod(y.shape[1:]))
    x, m0 = ops.mask_cut(x, 1 if transpose_x else 0, mask, full, 0, "matmul")  # (result rows)
    y, n0 = ops.mask_cut(y, 1, mask, full, 1, "matmul")
    xv = ops.to_sbuf(x.view() if isinstance(x, Access) else x, "matmul")
    yv = ops.to_sbuf(y.view() if isinstance(y, Access) else y, "matmul")
    stationary = xv
    if not transpose_x:
        pt = lc("transpose")(xv)
        stationary = new_tile(pt.shape, xv.dtype, SBUF, "matmul")
        instr("tensor_copy")(stationary, pt)
    # mask= selects result rows/columns of the [M, N] PSUM tile: only those are computed
    return ops.pending_tile(PendingMatmul(wrap(stationary), wrap(yv), m0=m0, n0=n0, full=full), mask, "matmul")


def transpose(x: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> B1Tensor:
    """``x.T`` (Tensor engine, a PSUM tile); ``mask=`` selects elements of the result."""
    x = tile(x, "x", "transpose")
    xv = x.view() if isinstance(x, Access) else x
    if mask is None:
        return wrap(lc("transpose")(xv, dtype))
    if xv.ndim != 2:
        raise NkiValidationError(f"nl.transpose needs a 2-D tile, got {list(xv.shape)}", instruction="transpose",
                                 rule="argument")
    full = (xv.shape[1], xv.shape[0])
    out: B1Tensor | None = None
    boxes = boxes_for(mask, full, "transpose")
    for box in boxes:
        src = xv if box is None else wrap(xv._index((box[1], box[0])))
        r = lc("transpose")(src, dtype)
        if out is None:
            out = new_tile(full, r.dtype, r.buffer, "transpose")
        instr("tensor_copy")(sub(out, box), r)
    if out is None:
        out = new_tile(full, dtype if dtype is not None else xv.dtype, PSUM, "transpose")
    return ops.masked(out, boxes)


# -- element-wise math ----------------------------------------------------------------------------
def _make_binary(name: str, default_bool: bool) -> B1Op:
    def f(x: Any, y: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> B1Tensor:
        return ops.binary(name, x, y, dtype=dtype, mask=mask)

    return B1Op(name, f)


def _make_unary(name: str) -> B1Op:
    def f(x: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> B1Tensor:
        return ops.unary(name, x, dtype=dtype, mask=mask)

    return B1Op(name, f)


_B1_BINARY = ("add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "fmod", "mod", "equal",
              "not_equal", "greater", "greater_equal", "less", "less_equal", "logical_and", "logical_or",
              "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift")
_B1_UNARY = ("abs", "negative", "sign", "square", "exp", "log", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "tan",
             "arctan", "tanh", "ceil", "floor", "trunc", "invert", "logical_not", "relu", "sigmoid", "silu",
             "silu_dx", "gelu", "gelu_dx", "gelu_apprx_tanh", "gelu_apprx_sigmoid", "mish", "softplus", "erf",
             "erf_dx")
for _n in _B1_BINARY:
    if _n in BINARY:
        globals()[_n] = _make_binary(_n, False)
for _n in _B1_UNARY:
    if _n in UNARY:
        globals()[_n] = _make_unary(_n)


def where(condition: Any, x: Any, y: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> B1Tensor:
    """``condition ? x : y`` (condition a boolean tile; x and y tiles or scalars)."""
    cond = tile(condition, "condition", "where")
    x, y = tile(x, "x", "where"), tile(y, "y", "where")
    full = ops.elementwise_shape([cond, x, y], "where")
    out_dt = dt.to_dtype(dtype) if dtype is not None else ops.result_dtype("where", [o for o in (x, y)], None)
    out = new_tile(full, out_dt, SBUF, "where")
    boxes = boxes_for(mask, full, "where")
    ops.masked(out, boxes)
    for box in boxes:
        o = sub(out, box)
        c, xv, yv = (restrict(v, box, full) for v in (cond, x, y))
        shp = tuple(o.shape)
        if ops.is_scalar(yv):
            instr("memset")(o, int(yv) if o.dtype.is_int else float(yv))
        else:
            ops.copy_into(o, yv, "where")
        pred = c if not ops.is_scalar(c) else None
        if pred is None:
            if c:
                ops.copy_into(o, xv, "where")
            continue
        pred = ops._broadcast(wrap(pred), shp, "where")
        # (Beta-1 comparisons give bool tiles, stored as uint8)
        pred = wrap(_lang_compute.predicate(pred, lambda shp=shp: new_tile(shp, dt.uint8, SBUF, "where")))
        xs = xv if not ops.is_scalar(xv) else full_tile(shp, xv, out_dt)
        xs = ops._broadcast(wrap(xs), shp, "where")
        if xs.dtype != out_dt:
            c2 = new_tile(shp, out_dt, SBUF, "where")
            instr("tensor_copy")(c2, xs)
            xs = c2
        instr("tensor_copy_predicated")(o, xs, pred)
    return out


# -- reductions and composites ------------------------------------------------------------------
def _axes_of(axis: Any, nd: int) -> tuple[int, ...]:
    axes = (int(axis),) if isinstance(axis, int | np.integer) else tuple(int(a) for a in axis)
    return tuple(sorted(a + nd if a < 0 else a for a in axes))


def _reduction(name: str) -> Any:
    def f(x: Any, axis: Any, *, dtype: Any = None, mask: Any = None, keepdims: bool = False, **kwargs: Any) -> Any:
        x = tile(x, "x", name)
        xv = x.view() if isinstance(x, Access) else x
        nd = xv.ndim
        axes = _axes_of(axis, nd)
        if mask is not None and 0 not in axes and axes != tuple(range(nd - len(axes), nd)):
            boxes = boxes_for(mask, tuple(xv.shape), name)
            if len(boxes) != 1:
                raise Beta1Unsupported(f"nl.{name} over non-trailing axes with a non-rectangular mask is not "
                                       "implemented by nkieval")
            box = boxes[0]
            if box is not None:
                # reduce the masked box (free axes permuted last, as below) into the full kept-shape result
                r = f(wrap(xv._index(box)), axes, dtype=dtype, keepdims=True)
                kept = tuple(1 if d in axes else n for d, n in enumerate(xv.shape))
                out = new_tile(kept, r.dtype, SBUF, name)
                instr("tensor_copy")(sub(out, tuple(slice(0, 1) if d in axes else b for d, b in enumerate(box))), r)
                if keepdims:
                    return out
                shape = tuple(n for d, n in enumerate(kept) if d not in axes)
                return wrap(out.reshape(shape if len(shape) >= 2 else (*shape, 1)))
            mask = None
        if 0 not in axes and axes != tuple(range(nd - len(axes), nd)):
            # Beta 1 reduced any free axes: permute them last (a free-dim view), reduce, restore the order
            keep = [d for d in range(nd) if d not in axes]
            r = f(wrap(xv.permute([*keep, *axes])), tuple(range(len(keep), nd)), dtype=dtype, keepdims=True)
            r = wrap(r.permute([int(i) for i in np.argsort([*keep, *axes])]))
            if keepdims:
                return r
            shape = tuple(n for d, n in enumerate(xv.shape) if d not in axes)
            return ops.copy(r, dtype=r.dtype).reshape(shape if len(shape) >= 2 else (*shape, 1))
        if mask is None:
            return wrap(lc(name)(xv, axes, dtype=dtype, keepdims=keepdims))
        # masked: the result keeps the full (reduced) tile shape; only rows/columns in the mask are computed
        kept = tuple(1 if d in axes else n for d, n in enumerate(xv.shape))
        out = None
        for box in boxes_for(mask, tuple(xv.shape), name):
            xb = xv if box is None else wrap(xv._index(box))
            r = lc(name)(xb, axes, dtype=dtype, keepdims=True)
            if out is None:
                out = new_tile(kept, r.dtype, SBUF, name)
            ob = None if box is None else tuple(slice(0, 1) if d in axes else b for d, b in enumerate(box))
            instr("tensor_copy")(sub(out, ob), r)
        if out is None:
            out = new_tile(kept, dtype if dtype is not None else xv.dtype, SBUF, name)
        if keepdims:
            return out
        shape = tuple(n for d, n in enumerate(kept) if d not in axes)
        return wrap(out.reshape(shape if len(shape) >= 2 else (*shape, 1)))

    f.__name__ = name
    return f


sum = _reduction("sum")
max = _reduction("max")
min = _reduction("min")
prod = _reduction("prod")
mean = _reduction("mean")


def all(x: Any, axis: Any, *, dtype: Any = dt.bool_, mask: Any = None, **kwargs: Any) -> Any:
    return _reduction("all")(x, axis, dtype=dtype, mask=mask)


def var(x: Any, axis: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> Any:
    return _reduction("var")(x, axis, dtype=dtype, mask=mask, keepdims=True)


def softmax(x: Any, axis: Any, *, dtype: Any = None, compute_dtype: Any = None, mask: Any = None,
            **kwargs: Any) -> B1Tensor:
    x = tile(x, "x", "softmax")
    xv = x.view() if isinstance(x, Access) else x
    if mask is None:
        return wrap(lc("softmax")(xv, axis, dtype=dtype))
    # masked: each mask box is normalised over its own elements (out-of-mask elements are not read)
    full = tuple(xv.shape)
    out = new_tile(full, dtype if dtype is not None else xv.dtype, SBUF, "softmax")
    boxes = boxes_for(mask, full, "softmax")
    for box in boxes:
        r = lc("softmax")(xv if box is None else wrap(xv._index(box)), axis, dtype=out.dtype)
        instr("tensor_copy")(sub(out, box), r)
    return ops.masked(out, boxes)


def rms_norm(x: Any, w: Any, axis: Any, n: Any, epsilon: float = 1e-6, *, dtype: Any = None,
             compute_dtype: Any = None, mask: Any = None, **kwargs: Any) -> B1Tensor:
    x, w = tile(x, "x", "rms_norm"), tile(w, "w", "rms_norm")
    xv = x.view() if isinstance(x, Access) else x
    wv = w.view() if isinstance(w, Access) else w
    if mask is None:
        out = lc("rms_norm")(xv, wv, axis, n, epsilon=epsilon, compute_dtype=compute_dtype)
        return wrap(out) if dtype is None else ops.copy(wrap(out), dtype=dtype)
    full = tuple(xv.shape)
    res = new_tile(full, dtype if dtype is not None else xv.dtype, SBUF, "rms_norm")
    boxes = boxes_for(mask, full, "rms_norm")
    for box in boxes:  # masked: each box is normalised over its own elements (with the given n)
        r = lc("rms_norm")(restrict(xv, box, full), restrict(wv, box, full), axis, n, epsilon=epsilon,
                           compute_dtype=compute_dtype)
        instr("tensor_copy")(sub(res, box), r)
    return ops.masked(res, boxes)


def broadcast_to(src: Any, *, shape: Any, **kwargs: Any) -> B1Tensor:
    return ops.broadcast_to(src, shape)


def expand_dims(data: Any, axis: int) -> B1Tensor:
    d = tile(data, "data", "expand_dims")
    return wrap(lc("expand_dims")(d.view() if isinstance(d, Access) else d, axis))


def dropout(x: Any, rate: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> B1Tensor:
    from nkieval.frontends.beta1 import isa as b1isa

    return b1isa.dropout(x, rate, dtype=dtype, mask=mask)


def gather_flattened(data: Any, indices: Any, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> B1Tensor:
    d, i = tile(data, "data", "gather_flattened"), tile(indices, "indices", "gather_flattened")
    dv = d.view() if isinstance(d, Access) else d
    iv = i.view() if isinstance(i, Access) else i
    out = new_tile(iv.shape, dtype if dtype is not None else dv.dtype, SBUF, "gather_flattened")
    boxes = boxes_for(mask, tuple(iv.shape), "gather_flattened")
    for box in boxes:  # masked: only the indices in the box are gathered (from the box's partitions)
        instr("nc_n_gather")(sub(out, box), dv if box is None else wrap(dv._index((box[0],))), sub(wrap(iv), box))
    return ops.masked(out, boxes)


def device_print(prefix: str, x: Any, *, mask: Any = None, **kwargs: Any) -> None:
    """Print a tensor's values at once (Beta 1: only in simulation)."""
    if isinstance(x, Access):
        x = x.view()
    if isinstance(x, NkiTensor):
        ops.flush(x)
        vals = np.asarray(x.data).astype(np.float32) if x.dtype.is_float else np.asarray(x.data)
        if mask is not None:  # masked: only the selected elements are printed (NaN elsewhere)
            m = np.zeros(vals.shape, dtype=bool)
            for box in boxes_for(mask, tuple(vals.shape), "device_print"):
                m[box if box is not None else ...] = True
            vals = np.where(m, vals.astype(np.float64), np.nan)
    else:
        vals = x
    builtins.print(prefix, vals)


class NeedsConcurrentGrid(Exception):
    """Raised by ``nl.all_reduce`` in a grid whose programs run one after the other; the Beta-1 launcher
    re-runs the grid with all programs at once (threads), where the all-reduce is a rendezvous."""


def all_reduce(x: Any, op: Any, program_axes: Any, *, dtype: Any = None, mask: Any = None,
               parallel_reduce: bool = True, asynchronous: bool = False, **kwargs: Any) -> B1Tensor:
    """Reduce ``x`` with ``op`` over the SPMD programs that differ only along ``program_axes`` of the launch grid;
    every program of a group gets the same reduced tile (reduced in program order). All programs of the group
    must call it (a barrier: they run concurrently for this)."""
    from nkieval.sim.ops import as_op

    o = as_op(op, "all_reduce")
    xt = tile(x, "x", "all_reduce")
    xv = ops.to_sbuf(xt.view() if isinstance(xt, Access) else xt, "all_reduce")
    full = tuple(xv.shape)
    out_dt = dt.to_dtype(dtype) if dtype is not None else xv.dtype
    ctx = current()
    launch = ctx.launch
    grid = tuple(launch.grid) or (launch.num_programs,)
    axes = (int(program_axes),) if isinstance(program_axes, int | np.integer) else tuple(int(a) for a in program_axes)
    for a in axes:
        if not 0 <= a < len(grid):
            raise NkiValidationError(f"all_reduce program axis {a} is not an axis of the launch grid {list(grid)}",
                                     instruction="all_reduce", operand="program_axes", rule="argument")
    me = tuple(ctx.grid_index) if launch.grid else (ctx.program_id,)
    members = [p for p in np.ndindex(*grid) if builtins.all(p[d] == me[d] for d in range(len(grid)) if d not in axes)]
    if len(members) > 1 and launch.turns is None:
        raise NeedsConcurrentGrid("nl.all_reduce needs the SPMD programs to run concurrently")
    # each program contributes a snapshot of its (masked) tile; snapshots are never written again
    snap = new_tile(full, dt.float32 if out_dt.is_float else out_dt, SBUF, "all_reduce")
    boxes = boxes_for(mask, full, "all_reduce")
    for box in boxes:
        instr("tensor_copy")(sub(snap, box), restrict(xv, box, full))
    seq = _next_all_reduce_seq(ctx)
    key = ("beta1.all_reduce", seq, tuple(sorted(members)))
    with launch.cond:
        box_of = launch.mailboxes.setdefault(key, {})
        box_of[me] = snap
        launch.cond.notify_all()
    gathered = _wait_for_group(launch, key, members, me)
    out = new_tile(full, out_dt, SBUF, "all_reduce")
    acc = new_tile(full, snap.dtype, SBUF, "all_reduce")
    for box in boxes:
        a = sub(acc, box)
        instr("tensor_copy")(a, sub(gathered[members[0]], box))
        for p in members[1:]:
            instr("tensor_tensor")(a, a, sub(gathered[p], box), o)
        instr("tensor_copy")(sub(out, box), a)
    del parallel_reduce, asynchronous
    return ops.masked(out, boxes)


def _next_all_reduce_seq(ctx: Any) -> int:
    n = getattr(ctx, "_b1_all_reduce_seq", 0)
    ctx._b1_all_reduce_seq = n + 1
    return n


def _wait_for_group(launch: Any, key: Any, members: list[tuple[int, ...]], me: tuple[int, ...]) -> dict[Any, Any]:
    """Every member's snapshot for this all_reduce; between checks the turn goes to the other programs
    (nkieval.sim.turns: one program runs at a time)."""
    grid = tuple(launch.grid) or (launch.num_programs,)
    flat = {p: i for i, p in enumerate(np.ndindex(*grid))}
    first = True
    while True:
        with launch.cond:
            got = dict(launch.mailboxes.get(key, {}))
        if len(got) == len(members):
            return got
        missing = [p for p in members if p not in got]
        with launch.lock:
            gone = [p for p in missing if flat[p] in launch.finished]
        if gone:
            raise NkiValidationError(
                f"nl.all_reduce: program {list(gone[0])} of the group {[list(m) for m in members]} ended without "
                f"calling this all_reduce (program {list(me)} waits for it); every program of the group must call "
                "nl.all_reduce the same number of times", instruction="all_reduce", rule="kernel")
        if not first and launch.turns.stuck():
            raise NkiValidationError(f"nl.all_reduce: programs {[list(m) for m in missing]} are blocked waiting too "
                                     "(a deadlock)", instruction="all_reduce", rule="kernel")
        launch.turns.wait(flat[me], progressed=first)
        first = False


def loop_reduce(x: Any, op: Any, loop_indices: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> Any:
    """Reduce ``x`` over the iterations of the loops in ``loop_indices`` into the destination, which is also the
    right-hand input of ``op`` (``dst = op(dst, x)`` each iteration; ``dst`` keeps its own dtype; a destination
    nothing has written starts as ``x``: ``ops.loop_reduce_into``).

    ``dst[...] = nl.loop_reduce(...)`` names the destination; in the documented ``b = nl.loop_reduce(a, ...)``
    form the destination is the tile ``b`` holds before the assignment (read from the caller's frame), updated
    in place and returned."""
    from nkieval.sim.ops import as_op

    name = as_op(ops.reduction_alias(op), "loop_reduce").name  # np.max as np.maximum, as the other reductions
    xt = ops.tile(x, "x", "loop_reduce")
    dst = _assignment_target(sys._getframe(1))
    if isinstance(dst, NkiTensor) and dst.is_on_chip:
        ops.loop_reduce_into(dst, name, xt, mask)
        return dst
    return ops.LoopReduce(xt, name, mask)


def _assignment_target(frame: Any) -> Any:
    """The current value of the local that the call at ``frame``'s current instruction is assigned to, if the
    statement is ``name = call(...)`` (else None)."""
    name = _stored_name_after(frame.f_code, frame.f_lasti)
    return None if name is None else frame.f_locals.get(name)


@functools.lru_cache(maxsize=4096)
def _stored_name_after(code: Any, lasti: int) -> str | None:
    """The local that the first real instruction after ``lasti`` stores to, or None. Cached: disassembling the
    kernel's code at every call was a quarter of a large kernel's run (``loop_reduce`` in an unrolled nest)."""
    for ins in dis.get_instructions(code):
        if ins.offset <= lasti or ins.opname in ("CACHE", "PRECALL", "EXTENDED_ARG"):
            continue
        if ins.opname in ("STORE_FAST", "STORE_NAME", "STORE_DEREF"):
            return str(ins.argval)
        return None
    return None


def rand(shape: Any, dtype: Any = dt.float32, **kwargs: Any) -> B1Tensor:
    """Uniform [0, 1) values: 32 random bits per element (Vector-engine ``rng``) scaled by 2**-32."""
    shp = tuple(int(s) for s in shape)
    bits = new_tile(shp, dt.uint32, SBUF, "rand")
    instr("rng")(bits)
    out = new_tile(shp, dtype, SBUF, "rand")
    instr("tensor_scalar")(out, bits, OPS["multiply"], 2.0**-32, op1=OPS["minimum"], operand1=float(np.nextafter(
        np.float32(1), np.float32(0))))
    return out


def random_seed(seed: Any, *, mask: Any = None, **kwargs: Any) -> None:
    """Seed the Vector-engine PRNG (a 32-bit scalar, or a [1, 1] tile)."""
    if ops.is_scalar(seed):
        t = new_tile((1, 1), dt.uint32, SBUF, "random_seed")
        instr("memset")(t, int(seed))
        seed = t
    instr("set_rng_seed")(tile(seed, "seed", "random_seed"))

class TileDef:
    """A Beta-1 tile definition: the largest tile an engine operand may be (``pmax`` partitions × ``fmax``)."""

    __slots__ = ("fmax", "name", "pmax")

    def __init__(self, name: str, pmax: int, fmax: int) -> None:
        self.name, self.pmax, self.fmax = name, pmax, fmax

    @property
    def shape(self) -> tuple[int, int]:
        return (self.pmax, self.fmax)

    def __repr__(self) -> str:
        return f"nl.{self.name}() = [{self.pmax}, {self.fmax}]"


def gemm_grid() -> TileDef:
    """Tile definition of a Tensor-engine matmul result (the same as its moving operand):
    ``[tile_size.pmax, tile_size.gemm_moving_fmax]``."""
    return TileDef("gemm_grid", int(tile_size.pmax), int(tile_size.gemm_moving_fmax))


def gemm_stationary_grid() -> TileDef:
    """Tile definition of a Tensor-engine stationary operand: ``[tile_size.pmax, tile_size.gemm_stationary_fmax]``."""
    return TileDef("gemm_stationary_grid", int(tile_size.pmax), int(tile_size.gemm_stationary_fmax))


def is_sbuf(b: Any) -> bool:
    return sim_nl.is_sbuf(b)


def is_psum(b: Any) -> bool:
    return sim_nl.is_psum(b)


def is_hbm(b: Any) -> bool:
    return sim_nl.is_hbm(b)


__all__ = sorted(
    {"arange", "mgrid", "nc", "par_dim", "spmd_dim", "ds", "sbuf", "psum", "hbm",
     "private_hbm", "shared_hbm", "tile_size", "fp32", "bfp16", "finfo", "ndarray", "zeros", "ones", "full",
     "zeros_like", "empty_like", "shared_constant", "shared_identity_matrix", "static_cast", "program_id",
     "num_programs", "program_ndim", "affine_range", "sequential_range", "static_range", "load", "store",
     "load_transpose2d", "copy", "atomic_rmw", "matmul", "transpose", "where", "sum", "max", "min", "prod", "mean",
     "all", "var", "softmax", "rms_norm", "broadcast_to", "expand_dims", "dropout", "gather_flattened",
     "device_print", "all_reduce", "loop_reduce", "gemm_grid", "gemm_stationary_grid", "rand", "random_seed", "is_sbuf", "is_psum", "is_hbm",
     "float32", "float16", "bfloat16", "tfloat32", "float8_e4m3", "float8_e5m2", "int8", "int16", "int32", "uint8",
     "uint16", "uint32", "bool_", *[n for n in _B1_BINARY if n in BINARY], *[n for n in _B1_UNARY if n in UNARY]}
)
del _n
