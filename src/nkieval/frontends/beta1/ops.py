"""Lowering of Beta-1 value-returning calls onto the simulator's instructions and ``nl.*`` wrappers.

There is no second simulator here: every computation is an ``nkieval.sim.isa`` instruction
(or an ``nkieval.sim.language_compute`` wrapper, itself lowered to instructions). This module
adds only what Beta 1 had on top:

* ``mask=``: the instruction's tile is cut into the boxes the mask selects
  (:func:`nkieval.frontends.beta1.index.mask_boxes`); each box runs the instruction on the
  matching sub-views, so out-of-mask elements are neither computed, read nor stored;
* ``dtype=`` and Beta-1 type promotion (weak Python scalars: int → int32, float → float32);
* NumPy broadcasting between tiles (``[P, 1]`` operands become ``tensor_scalar`` vectors;
  free-dim broadcasts are zero-stride views; partition broadcasts go through the Tensor
  engine like ``nl.broadcast_to``);
* matmul results that are not written until used, so ``psum += nl.matmul(...)`` accumulates
  in place in PSUM (:class:`PendingMatmul`), with the accumulation-group flags the Beta-1
  compiler set (:func:`_accumulate_flag`);
* masked results assigned into a larger tile write only the mask's elements (:func:`masked`);
* the affine_range write-conflict check on every Beta-1 write (:mod:`.state`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nkieval.frontends.beta1 import elide, state
from nkieval.frontends.beta1.errors import Beta1Unsupported
from nkieval.frontends.beta1.index import mask_array, mask_boxes
from nkieval.frontends.beta1.tensor import OPERATORS, Access, B1Tensor, wrap
from nkieval.sim import dtypes as dt
from nkieval.sim import isa as sim_isa
from nkieval.sim.context import maybe_current
from nkieval.sim.errors import NkiValidationError
from nkieval.sim.isa.core import flag_view
from nkieval.sim.memory import PSUM, SBUF, Buffer
from nkieval.sim.ops import COMPARE, OPS, Op
from nkieval.sim.tensor import NkiTensor, allocate

_SCALARS = (bool, int, float, np.number)


def reduction_alias(op: Any) -> Any:
    """Beta 1 also took numpy reductions (np.max, np.amax, np.sum) and nl reductions as operators."""
    if op is None or isinstance(op, Op):
        return op
    name = getattr(op, "__name__", None)
    alias = {"amax": "maximum", "max": "maximum", "amin": "minimum", "min": "minimum", "sum": "add",
             "prod": "multiply"}.get(name or "")
    if alias is not None and (getattr(op, "__module__", "") or "").startswith(("numpy", "nkieval")):
        return OPS[alias]
    return op


def instr(name: str) -> Callable[..., Any]:
    """A simulator instruction, looked up at call time."""
    fn = getattr(sim_isa, name, None)
    if fn is None:
        info = sim_isa.INSTRUCTIONS.get(name)
        if info is None:
            raise Beta1Unsupported(f"nisa.{name} is not implemented by nkieval's simulator yet")
        fn = info.fn
    return fn


def lc(name: str) -> Callable[..., Any]:
    """A value-returning ``nl.*`` wrapper of the simulator (current-API semantics)."""
    from nkieval.sim import language_compute

    fn = getattr(language_compute, name, None)
    if fn is None:
        raise Beta1Unsupported(f"nl.{name} is not implemented by nkieval's simulator yet")
    return fn


# -- matmul results that wait for their destination ---------------------------------------------
@dataclass
class PendingMatmul:
    """``stationary.T @ moving`` not yet written: ``+=`` into PSUM accumulates it in place."""

    stationary: B1Tensor
    moving: B1Tensor
    kwargs: dict[str, Any] = field(default_factory=dict)
    boxes: list[tuple[slice, ...] | None] = field(default_factory=lambda: [None])  # mask boxes of the [M, N] result
    # operands cut to the mask's rows / columns (see mask_cut): the result row / column of their first column;
    # and the result's [M, N] (None: from the operands' free sizes)
    m0: int = 0
    n0: int = 0
    full: tuple[int, int] | None = None

    def run(self, dst: NkiTensor, accumulate: bool | None) -> None:
        for box in self.boxes:
            if box is None:
                instr("nc_matmul")(dst, self.stationary, self.moving, accumulate=accumulate, **self.kwargs)
                continue
            # masked: only the result rows/columns in the box are computed, from the matching operand columns
            rows, cols = box
            d = dst if dst.ndim == 2 else dst.reshape((dst.shape[0], -1))
            st = self.stationary.reshape((self.stationary.shape[0], -1))
            mv = self.moving.reshape((self.moving.shape[0], -1))
            r = slice(rows.start - self.m0, rows.stop - self.m0)
            c = slice(cols.start - self.n0, cols.stop - self.n0)
            instr("nc_matmul")(d[rows, cols], st[:, r], mv[:, c], accumulate=accumulate, **self.kwargs)


def mask_cut(x: Any, axis: int, mask: Any, full: tuple[int, int], which: int, api: str) -> tuple[Any, int]:
    """A matmul operand given as an index expression, cut before it is viewed to the result rows (``which`` 0) or
    columns (1) that ``mask`` keeps, along its ``axis``; and the result index of its first kept element. A masked
    ragged edge may index past the tensor (as in Beta 1): only the kept range is bounds-checked."""
    if mask is None or not isinstance(x, Access) or len(x.shape) != 2:
        return x, 0
    boxes = boxes_for(mask, full, api)
    if not boxes or None in boxes:
        return x, 0
    lo = min(b[which].start for b in boxes)
    hi = max(b[which].stop for b in boxes)
    box = tuple(slice(lo, hi) if d == axis else slice(None) for d in range(2))
    return x.view(box), lo


def pending_tile(p: PendingMatmul, mask: Any = None, api: str = "matmul") -> B1Tensor:
    if p.stationary.shape[0] != p.moving.shape[0]:
        raise NkiValidationError(
            f"number of partitions (dimension 0 size of a tile) mismatch in parameters (stationary"
            f"{list(p.stationary.shape)}, moving{list(p.moving.shape)}) of '{api}': both operands hold the contraction "
            "dimension on the partitions", instruction=api, rule="partition-mismatch")
    if p.kwargs.get("perf_mode"):  # double row: [K, 2, M] x [K, 2, N], two contraction rows per partition
        if mask is not None:
            raise Beta1Unsupported(f"{api} with a double-row perf_mode and mask= is not implemented by nkieval")
        m, n = int(p.stationary.shape[-1]), int(p.moving.shape[-1])
    elif p.full is not None:
        m, n = p.full
    else:
        m = math.prod(p.stationary.shape[1:])
        n = math.prod(p.moving.shape[1:])
    p.boxes = boxes_for(mask, (m, n), api)
    # (its sentinels are written only if it is ever flushed or read: ``psum[...] += matmul`` leaves it untouched)
    t = new_tile((m, n), dt.float32, PSUM, api, defer_fill=True)
    t.pending = p
    masked(t, p.boxes)
    return t


def flush(x: Any) -> None:
    if isinstance(x, B1Tensor) and x.pending is not None:
        p, x.pending = x.pending, None
        p.run(x, accumulate=False)


# -- allocation ------------------------------------------------------------------------------------
def check_partitions(shape: tuple[int, ...], what: str, target: Any = None) -> None:
    limit = (target or state.target()).partitions
    if shape and shape[0] > limit:
        raise NkiValidationError(f"number of partitions {shape[0]} exceed architecture limitation of {limit}.",
                                 instruction=what, rule="partition-limit")


def new_tile(shape: Any, dtype: Any, buffer: Buffer = SBUF, what: str = "tile", name: str = "",
             defer_fill: bool = False) -> B1Tensor:
    """A fresh on-chip tile; ``defer_fill``: for a result the caller's instructions write next (its sentinels are
    written only if something reads it or writes part of it first: nkieval.sim.tensor.allocate)."""
    shp = tuple(map(int, shape))
    if len(shp) < 2:
        shp = (1,) * (2 - len(shp)) + shp
    ctx = maybe_current()
    check_partitions(shp, what, ctx.target if ctx is not None else None)
    t = wrap(allocate(shp, dtype, buffer, name, instruction=what, defer_fill=defer_fill))
    if ctx is not None:
        state.note_allocation(t, state.state())
    return t


# -- operands --------------------------------------------------------------------------------------
def to_sbuf(t: Any, api: str) -> Any:
    """A PSUM operand of an engine that cannot read PSUM: Beta 1's compiler inserted this copy."""
    if isinstance(t, NkiTensor) and t.buffer.kind == "psum":
        flush(t)
        c = new_tile(t.shape, t.dtype, SBUF, api, defer_fill=True)
        instr("tensor_copy")(c, t)
        return c
    return t


def is_scalar(x: Any) -> bool:
    return isinstance(x, _SCALARS)


def shape_of(x: Any) -> tuple[int, ...]:
    return () if is_scalar(x) else tuple(x.shape)


def tile(x: Any, role: str, api: str, allow_hbm: bool = False) -> Any:
    """Check a tensor operand of a Beta-1 compute API (tile or Access); scalars pass through."""
    if isinstance(x, B1Tensor):  # (the common operand first: a tensor is never a scalar)
        if x.pending is not None:
            flush(x)
        if x.pdim != 0 and x.is_on_chip:
            nm = x.alloc.name or "tensor"
            raise NkiValidationError(
                f"Failed to infer tile from tensor '{nm}': its partition dimension is not the first dimension; index "
                "the block dimensions first (e.g. t[i])", instruction=api, operand=role, rule="indexing")
    elif isinstance(x, NkiTensor):
        x = wrap(x)
    elif is_scalar(x):
        return x
    elif not isinstance(x, Access):
        raise NkiValidationError(f"operand '{role}' of '{api}' must be a tile or a number, got {type(x).__name__}",
                                 instruction=api, operand=role, rule="argument")
    if not allow_hbm and not x.is_on_chip:
        raise NkiValidationError(f"Expected operand '{role}' of '{api}' to be in address space 'psum|sbuf', but got "
                                 f"a tile in '{x.buffer.kind}' instead.", instruction=api, operand=role, rule="buffer")
    return x


def restrict(x: Any, box: tuple[slice, ...] | None, full: tuple[int, ...]) -> Any:
    """Operand ``x`` cut to ``box`` of the instruction's tile shape ``full`` (broadcast axes stay whole)."""
    if is_scalar(x):
        return x
    shp = tuple(x.shape)
    if box is None:
        return x.view() if isinstance(x, Access) else x
    off = len(full) - len(shp)
    sub = []
    for k, n in enumerate(shp):
        b = box[k + off] if k + off >= 0 else slice(None)
        sub.append(slice(None) if n == 1 and full[k + off] != 1 else b)
    if isinstance(x, Access):
        return x.view(tuple(sub))
    return wrap(x._index(tuple(sub))) if x.is_on_chip or x.pdim == 0 else x[tuple(sub)]


def boxes_for(mask: Any, shape: tuple[int, ...], api: str) -> list[tuple[slice, ...] | None]:
    m = mask_array(mask, shape, api)
    if m is None:
        return [None]
    return list(mask_boxes(m))


def sub(t: B1Tensor, box: tuple[slice, ...] | None) -> B1Tensor:
    return t if box is None else wrap(t._index(box))


def masked(out: B1Tensor, boxes: list[tuple[slice, ...] | None]) -> B1Tensor:
    """Remember that only ``boxes`` of a masked result hold values: ``t[...] = result`` copies just those
    (Beta 1 wrote a masked instruction straight into the assignment's destination)."""
    if boxes != [None]:
        out.boxes = list(boxes)
    return out


# -- dtypes ----------------------------------------------------------------------------------------
def weak_dtype(v: Any) -> dt.DType:
    if isinstance(v, np.number | np.bool_):
        return dt.to_dtype(np.asarray(v).dtype) if np.asarray(v).dtype != np.float64 else dt.float32
    if isinstance(v, bool):
        return dt.uint8
    if isinstance(v, int):
        return dt.int32
    return dt.float32


def result_dtype(name: str, operands: list[Any], dtype: Any) -> dt.DType:
    if dtype is not None:
        return dt.to_dtype(dtype)
    if name in COMPARE or name.startswith("logical_"):
        return dt.bool_
    ds = [o.dtype if not is_scalar(o) else weak_dtype(o) for o in operands]
    out = ds[0]
    for d in ds[1:]:
        out = dt.promote(out, d)
    return out


# -- elementwise -----------------------------------------------------------------------------------
def _column(t: Any) -> bool:
    return all(s == 1 for s in t.shape[1:])


def _broadcast(t: B1Tensor, shape: tuple[int, ...], api: str) -> B1Tensor:
    """Make tile ``t`` the full ``shape``: zero-stride views on free dims, Tensor-engine copy across partitions."""
    if tuple(t.shape) == shape:
        return t
    if t.ndim != len(shape):
        t = wrap(t.reshape((t.shape[0], *([1] * (len(shape) - t.ndim)), *t.shape[1:])) if t.ndim < len(shape)
                 else t)
    if t.shape[0] != shape[0]:
        if t.shape[0] != 1:
            raise NkiValidationError(
                f"number of partitions (dimension 0 size of a tile) mismatch in parameters of '{api}': "
                f"{list(t.shape)} vs {list(shape)}", instruction=api, rule="partition-mismatch")
        t = wrap(lc("broadcast_to")(t, (shape[0], *t.shape[1:]), dtype=t.dtype if t.dtype.is_float else dt.float32))
    v: NkiTensor = t
    for d in range(1, len(shape)):
        if v.shape[d] != shape[d]:
            v = v.broadcast(d, shape[d])
    return wrap(v)


def binary_into(dst: B1Tensor, name: str, a: Any, b: Any, api: str) -> None:
    """``dst = name(a, b)`` for operands already cut to ``dst``'s shape (or broadcastable to it)."""
    op = OPS[name]
    full = tuple(dst.shape)
    if is_scalar(a) and is_scalar(b):
        raise NkiValidationError(f"'{api}' needs at least one tile operand", instruction=api, rule="argument")
    if is_scalar(a) or is_scalar(b):
        t, s, rev = (b, a, True) if is_scalar(a) else (a, b, False)
        t = _broadcast(t, full, api)
        instr("tensor_scalar")(dst, t, op, float(s) if not dst.dtype.is_int or isinstance(s, float) else s,
                               reverse0=rev)
        return
    a_full, b_full = tuple(a.shape) == full, tuple(b.shape) == full
    if not a_full and b_full and _column(a) and a.shape[0] == full[0]:
        instr("tensor_scalar")(dst, b, op, a, reverse0=True)
        return
    if a_full and not b_full and _column(b) and b.shape[0] == full[0]:
        instr("tensor_scalar")(dst, a, op, b)
        return
    a, b = _broadcast(a, full, api), _broadcast(b, full, api)
    if a.buffer.kind == "psum" and b.buffer.kind == "psum":
        c = new_tile(b.shape, b.dtype, SBUF, api, defer_fill=True)
        instr("tensor_copy")(c, b)
        b = c
    instr("tensor_tensor")(dst, a, b, op)


def elementwise_shape(operands: list[Any], api: str) -> tuple[int, ...]:
    shapes = [shape_of(o) for o in operands if not is_scalar(o)]
    try:
        shp = tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        desc = ", ".join(f"{list(s)}" for s in shapes)
        raise NkiValidationError(f"number of partitions (dimension 0 size of a tile) mismatch in parameters ({desc}) "
                                 f"of '{api}'", instruction=api, rule="partition-mismatch") from None
    if len(shp) < 2:
        shp = (1,) * (2 - len(shp)) + shp
    return shp


def binary(name: str, x: Any, y: Any, dtype: Any = None, mask: Any = None, api: str | None = None) -> B1Tensor:
    api = api or name
    x, y = tile(x, "x", api), tile(y, "y", api)
    full = elementwise_shape([x, y], api)
    out = new_tile(full, result_dtype(name, [x, y], dtype), SBUF, api, defer_fill=True)
    boxes = boxes_for(mask, full, api)
    for box in boxes:
        binary_into(sub(out, box), name, restrict(x, box, full), restrict(y, box, full), api)
    return masked(out, boxes)


def unary(name: str, x: Any, dtype: Any = None, mask: Any = None) -> B1Tensor:
    x = tile(x, "x", name)
    if is_scalar(x):
        raise NkiValidationError(f"'{name}' needs a tile operand", instruction=name, rule="argument")
    if mask is None and not isinstance(x, Access):
        return wrap(lc("unary")(name, x, dtype))
    full = tuple(x.shape)
    out = new_tile(full, dt.to_dtype(dtype) if dtype is not None else x.dtype, SBUF, name, defer_fill=True)
    boxes = boxes_for(mask, full, name)
    for box in boxes:
        r = lc("unary")(name, restrict(x, box, full), out.dtype)
        instr("tensor_copy")(sub(out, box), r)
    return masked(out, boxes)


def copy_into(dst: B1Tensor, src: Any, api: str) -> None:
    """``dst[...] = src`` between tiles / HBM views (DMA when HBM is involved)."""
    if is_scalar(src):
        if not dst.is_on_chip:
            raise NkiValidationError("a scalar can only be assigned to an on-chip tile", instruction=api,
                                     rule="argument")
        instr("memset")(dst, int(src) if dst.dtype.is_int else float(src))
        return
    flush(src)
    if tuple(src.shape) != tuple(dst.shape):
        if src.size == dst.size and src.shape[0] == dst.shape[0]:
            pass  # same elements per partition: instructions match them in order
        else:
            try:
                np.broadcast_shapes(tuple(src.shape), tuple(dst.shape))
            except ValueError:
                raise NkiValidationError(
                    f"Illegal assignment destination shape in '{api}': shape {list(dst.shape)} of the destination "
                    f"does not match the value's shape {list(src.shape)}", instruction=api, rule="shape-mismatch"
                ) from None
            if np.broadcast_shapes(tuple(src.shape), tuple(dst.shape)) != tuple(dst.shape):
                raise NkiValidationError(
                    f"Illegal assignment destination shape in 'a = b': shape {list(dst.shape)} of parameter 'a' is "
                    f"smaller than other parameter shapes b{list(src.shape)}.", instruction=api,
                    rule="shape-mismatch")
            if dst.is_on_chip and src.is_on_chip:
                src = _broadcast(wrap(src), tuple(dst.shape), api)
    if not dst.is_on_chip or not src.is_on_chip:
        if src.buffer.kind == "psum":
            c = new_tile(src.shape, src.dtype, SBUF, api, defer_fill=True)
            instr("tensor_copy")(c, src)
            src = c
        instr("dma_copy")(dst, src)
    else:
        instr("tensor_copy")(dst, src)
        if api == "assign":  # the compiler writes an assigned result in place: see nkieval.frontends.beta1.elide
            ctx = maybe_current()
            if ctx is not None:
                elide.note_assignment_copy(ctx)


def same_region(a: NkiTensor, b: NkiTensor) -> bool:
    # (byte offsets in one storage: views made by indexing carry theirs, NumPy's __array_interface__ is slow)
    return (a.alloc is b.alloc and a.data.shape == b.data.shape and a.data.strides == b.data.strides
            and a._byte_offset() == b._byte_offset())


@dataclass
class LoopReduce:
    """The value of ``nl.loop_reduce(x, op, loop_indices)``: assigning it to ``dst[...]`` reduces into the
    destination, ``dst = op(dst, x)``, so over the iterations of the named loops ``dst`` holds the reduction
    (exempt from the affine-loop output-dependency check, like ``+=``)."""

    x: Any
    op: str
    mask: Any = None


def loop_reduce_into(d: NkiTensor, op: str, x: Any, mask: Any = None) -> None:
    """One iteration of ``nl.loop_reduce``: ``d = op(d, x)`` (``mask``: only its box)."""
    if mask is None:
        _reduce_step(d, op, x)
        return
    full = tuple(d.shape)
    for box in boxes_for(mask, full, "loop_reduce"):  # masked: only the box is reduced into
        _reduce_step(sub(wrap(d), box), op, restrict(x, box, full))


def _reduce_step(d: NkiTensor, op: str, x: Any) -> None:
    """``d = op(d, x)``, except into a destination no instruction has written: there the reduction starts,
    ``d = x``. The compiler's own Beta-1 output reduces into a fresh ``nl.ndarray`` this way (its NKIBench
    kernels, NumPy-checked on Trainium, do it for add and max), which on hardware holds garbage; a destination
    that was written (the docs' ``nl.zeros``) is reduced into as documented. Decided from which elements
    instructions wrote, never from values: a recorded program is the same whatever the data."""
    flags = d.alloc.track_element_writes()
    if flags is not None and not flag_view(d, flags).any():
        copy_into(d, tile(x.view() if isinstance(x, Access) else x, "x", "loop_reduce"), "loop_reduce")
        state.note_write(d, accumulate=True)
        return
    iop(op, d, x)


def assign(dst: Any, value: Any) -> None:
    """``t[key] = value``."""
    d = dst.view() if isinstance(dst, Access) else dst
    if isinstance(value, LoopReduce):
        loop_reduce_into(d, value.op, value.x, value.mask)
        return
    if isinstance(value, B1Tensor) and value.pending is not None and d.buffer.kind == "psum":
        value.pending.run(d, accumulate=False)
        _note_group(d)
        state.note_write(d, what="matmul")
        return
    v = value.view() if isinstance(value, Access) else value
    if isinstance(v, NkiTensor) and same_region(d, v):
        return
    if isinstance(v, B1Tensor) and v.boxes is not None and tuple(v.shape) == tuple(d.shape):
        flush(v)
        for box in v.boxes:  # a masked result: only the elements inside its mask are assigned
            dd = sub(wrap(d), box)
            copy_into(dd, sub(v, box), "assign")
            state.note_write(dd, what="assign")
        return
    if not (is_scalar(v) or isinstance(v, NkiTensor)):
        raise NkiValidationError(f"cannot assign a {type(v).__name__} to a tensor", rule="argument")
    copy_into(d, v, "assign")
    state.note_write(d, what="assign")


def _accumulate_flag(d: NkiTensor, groups: Any = None) -> bool | None:
    """The accumulate flag the Beta-1 compiler gives ``psum += matmul``: the first matmul of an accumulation
    group overwrites, the others add. A group is the run of ``+=`` into a PSUM region until the region's
    result is read by another instruction; so ``+=`` into a region that no group has written yet, or whose
    result was consumed since, starts a new group (and needs no ``nl.zeros`` first). Into a zeroed region
    the PE array's own rule applies (``None``). ``groups``: ``_groups(d)``, when the caller has it."""
    groups = groups or _groups(d)
    if groups is None:
        return None if _zero_initialised(d) else True
    table, region, records = groups
    since = table.get(region)
    if since is None:
        return None if _zero_initialised(d) else False
    alloc, p0, np_, lo, hi = region
    for k in range(since, len(records)):
        rec = records[k]
        if rec.opcode == "nc_matmul":
            continue
        for op in rec.operands:
            if (op.alloc == alloc and "r" in op.mode and op.addr_lo < hi and lo < op.addr_hi
                    and op.partition_start < p0 + np_ and p0 < op.partition_start + op.partitions):
                return False  # the previous group's result was read: a new group starts
    return True


def _groups(d: NkiTensor) -> tuple[dict[Any, int], tuple[int, int, int, int, int], list[Any]] | None:
    """The running accumulation groups, ``d``'s PSUM region as they key it, and the trace's records; None
    when the run keeps no trace (then no group is tracked)."""
    ctx = maybe_current()
    if ctx is None or not ctx.options.record_trace:
        return None
    st = state.state()
    if st is None:
        return None
    acc = d.access("dst", "rw")
    return st.groups, (acc.alloc, acc.partition_start, acc.partitions, acc.addr_lo, acc.addr_hi), ctx.trace.records


def _note_group(d: NkiTensor, groups: Any = None) -> None:
    """``d``'s accumulation group has its latest matmul now (``groups``: ``_groups(d)``, when the caller has it)."""
    groups = groups or _groups(d)
    if groups is not None:
        table, region, records = groups
        table[region] = len(records)


def _zero_initialised(d: NkiTensor) -> bool:
    a = d.alloc
    if a.mm_written is not None and flag_view(d, a.mm_written).all():
        return True
    with np.errstate(invalid="ignore"):
        return bool(a.written and np.all(np.asarray(d.data, dtype=np.float32) == 0))


def iop(name: str, target: Any, other: Any) -> Any:
    """``target op= other``: in-place; ``psum += matmul`` accumulates on the Tensor engine."""
    d = target.view() if isinstance(target, Access) else target
    flush(d)
    if name == "add" and isinstance(other, B1Tensor) and other.pending is not None and d.buffer.kind == "psum":
        groups = _groups(d)
        other.pending.run(d, accumulate=_accumulate_flag(d, groups))
        _note_group(d, groups)
        return target
    o = other.view() if isinstance(other, Access) else other
    if isinstance(o, NkiTensor):
        flush(o)
    no_partition_broadcast(name, d, o)
    binary_into(d, name, d, tile(o, "y", name), name)
    state.note_write(d, accumulate=True)
    return target


def cast(x: Any, dtype: Any) -> B1Tensor:
    return copy(x, dtype=dtype)


def copy(x: Any, dtype: Any = None, mask: Any = None, api: str = "copy") -> B1Tensor:
    x = tile(x, "src", api)
    full = tuple(x.shape)
    out = new_tile(full, dt.to_dtype(dtype) if dtype is not None else x.dtype, SBUF, api, defer_fill=True)
    boxes = boxes_for(mask, full, api)
    for box in boxes:
        instr("tensor_copy")(sub(out, box), restrict(x, box, full))
    return masked(out, boxes)


def broadcast_to(x: Any, shape: Any) -> B1Tensor:
    x = tile(x, "src", "broadcast_to")
    src = x.view() if isinstance(x, Access) else x
    return wrap(lc("broadcast_to")(src, tuple(int(s) for s in shape)))


def operator_binary(name: str, a: Any, b: Any) -> B1Tensor:
    """``a + b``, ``a * b``... (and NumPy's ufuncs) on tiles: :func:`binary` without partition-dimension
    broadcasting, which NKI Beta 1 supported only through ``nki.language`` calls (``nl.add``...)."""
    no_partition_broadcast(name, a, b)
    return binary(name, a, b)


def no_partition_broadcast(name: str, a: Any, b: Any) -> None:
    """Refuse an operator whose two tile operands differ in partitions, one of them having one: NKI Beta 1's
    known issues, "Partition dimension broadcasting is not supported on operator overloads (i.e, +, -, *, /, <<,
    >>, etc), use nki.language APIs instead (i.e, nl.add, nl.multiply, ...)"."""
    sa, sb = shape_of(a), shape_of(b)
    if sa and sb and sa[0] != sb[0] and 1 in (sa[0], sb[0]):
        raise NkiValidationError(
            f"'{name}' as a Python operator broadcasts the partition dimension ({list(sa)} with {list(sb)}): NKI "
            f"Beta 1 broadcasts partitions only in nki.language calls; write nl.{name}(a, b)", instruction=name,
            rule="partition-mismatch")


OPERATORS.update({
    "binary": operator_binary,
    "unary": lambda name, a: unary(name, a),
    "assign": assign,
    "iop": iop,
    "flush": flush,
    "cast": cast,
    "broadcast_to": broadcast_to,
})
