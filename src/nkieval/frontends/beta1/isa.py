"""Beta-1 ``nki.isa``: value-returning instructions with ``dtype=`` and ``mask=``.

Served as ``neuronxcc.nki.isa``. Each call allocates its destination (SBUF, or PSUM for the
Tensor engine) and runs the simulator's destination-passing instruction of the same name;
``mask=`` runs it once per mask box on the matching sub-tiles. The few calls that were
destination-passing already in Beta 1 (``dma_copy``, ``select_reduce``, ``nc_stream_shuffle``,
``tensor_copy_predicated``) take ``dst`` as Beta 1 did.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from nkieval.frontends.beta1 import ops, state
from nkieval.frontends.beta1.index import IndexExpr, Predicate, affine_form, fitted_form
from nkieval.frontends.beta1.ops import (
    Beta1Unsupported,
    PendingMatmul,
    boxes_for,
    instr,
    new_tile,
    restrict,
    sub,
    tile,
)
from nkieval.frontends.beta1.tensor import Access, B1Tensor, wrap
from nkieval.sim import dtypes as dt
from nkieval.sim.errors import NkiValidationError
from nkieval.sim.isa.enums import (
    dge_mode,
    dma_engine,
    engine,
    matmul_perf_mode,
    nc_version,
    oob_mode,
    reduce_cmd,
)
from nkieval.sim.memory import PSUM, SBUF
from nkieval.sim.ops import OPS, as_op

tensor_engine = engine.tensor
vector_engine = engine.vector
scalar_engine = engine.scalar
gpsimd_engine = engine.gpsimd
unknown_engine = engine.unknown


class fp32:
    min = float(np.finfo(np.float32).min)


_op = ops.reduction_alias


def _view(x: Any) -> Any:
    if isinstance(x, Access):
        return x.view()
    if isinstance(x, B1Tensor):
        ops.flush(x)
    return x


def _elementwise(api: str, main: Any, dtype: Any, mask: Any, run: Callable[..., None], *others: Any,
                 buffer: Any = SBUF, shape: tuple[int, ...] | None = None) -> B1Tensor:
    """Allocate ``[shape of main]`` and run ``run(dst_box, main_box, *others_box)`` per mask box."""
    main = tile(main, "data", api)
    full = tuple(shape or main.shape)
    out = new_tile(full, dtype if dtype is not None else main.dtype, buffer, api, defer_fill=True)
    boxes = boxes_for(mask, full, api)
    for box in boxes:
        rest = [restrict(o, box, full) if isinstance(o, B1Tensor | Access) else o for o in others]
        run(sub(out, box), restrict(main, box, full), *rest)
    return ops.masked(out, boxes)


def _rows(box: tuple[slice, ...] | None) -> Any:
    """The partition part of a mask box (all partitions for no mask)."""
    return slice(None) if box is None else box[0]


def _cut(x: Any, box: tuple[slice, ...] | None) -> Any:
    """Operand ``x`` (a [P, ...] tile) cut to the partitions of ``box``."""
    if x is None or ops.is_scalar(x) or box is None:
        return x
    return wrap(x._index((box[0],)))


def _unviewed(x: Any) -> Any:
    """An operand to be cut to mask boxes before it becomes a view: an index expression's bounds are then
    checked on the box only (a masked ragged edge may index past the tensor, as in Beta 1)."""
    if isinstance(x, B1Tensor):
        ops.flush(x)
    return x


def _per_row(api: str, out: B1Tensor, data: Any, mask: Any, run: Callable[..., None]) -> B1Tensor:
    """A row-wise instruction (output ``[P, k]``): per mask box of ``data``, ``run(out[rows], data[box], box)``
    — masked-out partitions are not computed, masked-out columns are not read (nor bounds-checked)."""
    full = tuple(data.shape)
    boxes = boxes_for(mask, full, api)
    for box in boxes:
        o = out if box is None else wrap(out._index((box[0],)))
        run(o, restrict(data, box, full), box)
    return ops.masked(out, [None if b is None else (b[0], slice(0, out.shape[1])) for b in boxes])


# -- Tensor engine -------------------------------------------------------------------------------------
def nc_matmul(stationary: Any, moving: Any, *, is_stationary_onezero: bool = False, is_moving_onezero: bool = False,
              is_transpose: bool = False, tile_position: Any = (), tile_size: Any = (), mask: Any = None,
              **kwargs: Any) -> B1Tensor:
    """``stationary.T @ moving`` into a new PSUM tile; ``psum += nisa.nc_matmul(...)`` accumulates."""
    st, mv = tile(stationary, "stationary", "nc_matmul"), tile(moving, "moving", "nc_matmul")
    full = (math.prod(st.shape[1:]), math.prod(mv.shape[1:]))
    st, m0 = ops.mask_cut(st, 1, mask, full, 0, "nc_matmul")  # (result rows = stationary columns)
    mv, n0 = ops.mask_cut(mv, 1, mask, full, 1, "nc_matmul")
    s = ops.to_sbuf(_view(st), "nc_matmul")
    m = ops.to_sbuf(_view(mv), "nc_matmul")
    kw = {"is_stationary_onezero": is_stationary_onezero, "is_moving_onezero": is_moving_onezero,
          "is_transpose": is_transpose, "tile_position": tile_position, "tile_size": tile_size}
    pm = _double_row(kwargs.get("perf_mode"))
    if pm:
        kw["perf_mode"] = pm
    # mask= selects result rows/columns: only those are computed (and accumulated) in PSUM
    return ops.pending_tile(PendingMatmul(wrap(s), wrap(m), kw, m0=m0, n0=n0, full=full), mask, "nc_matmul")


def _double_row(perf_mode: Any) -> Any:
    """Beta 1's ``perf_mode='double_row_gen3'`` (FP8 on NeuronCore-v3: two contraction rows per PE row, operands
    ``[K, 2, M]`` / ``[K, 2, N]``) as the simulator's ``matmul_perf_mode.double_row``; none / '' → None."""
    name = getattr(perf_mode, "name", perf_mode)
    if name in (None, "", "none", 0):
        return None
    if str(name).startswith("double_row"):
        return matmul_perf_mode.double_row
    raise NkiValidationError(f"nc_matmul perf_mode {perf_mode!r} is not one of none, double_row_gen3",
                             instruction="nc_matmul", operand="perf_mode", rule="argument")


def nc_transpose(data: Any, *, mask: Any = None, dtype: Any = None, engine: Any = engine.unknown,
                 **kwargs: Any) -> B1Tensor:
    """Partition↔free transpose: Tensor engine (→ PSUM) by default, Vector engine (≤32x32) if asked."""
    d = _unviewed(tile(data, "data", "nc_transpose"))
    if d.ndim != 2:
        d = _view(d)
    eng = getattr(engine, "name", engine)
    use_vector = eng == "vector" or (eng in (None, "unknown", 0) and d.buffer.kind == "psum")
    p, f = d.shape[0], math.prod(d.shape[1:])
    out_dt = dtype if dtype is not None else d.dtype
    out = new_tile((f, p), out_dt, SBUF if use_vector else PSUM, "nc_transpose", defer_fill=True)
    # mask= selects elements of the [f, p] result: box (r, c) of it is the transpose of data[c, r]
    boxes = boxes_for(mask, (f, p), "nc_transpose")
    d2 = d if d.ndim == 2 else wrap(d.reshape((p, f)))
    for box in boxes:  # (a 2-D index expression is bounds-checked on the box only)
        instr("nc_transpose")(sub(out, box), restrict(d2, None if box is None else (box[1], box[0]), (p, f)),
                              engine=engine)
    return ops.masked(out, boxes)


# -- Scalar engine ---------------------------------------------------------------------------------------
def activation(op: Any, data: Any, *, bias: Any = None, scale: Any = 1.0, reduce_op: Any = None,
               reduce_res: Any = None, reduce_cmd: Any = reduce_cmd.idle, mask: Any = None, dtype: Any = None,
               **kwargs: Any) -> B1Tensor:
    def run(dst: Any, x: Any, b: Any, s: Any, rr: Any) -> None:
        instr("activation")(dst, _op(op), x, bias=b, scale=s, reduce_op=_op(reduce_op), reduce_res=rr, reduce_cmd=reduce_cmd)

    return _elementwise("activation", data, dtype, mask, run, _v(bias), _v(scale), _v(reduce_res))


def activation_reduce(op: Any, data: Any, *, reduce_op: Any, reduce_res: Any, bias: Any = None, scale: Any = 1.0,
                      mask: Any = None, dtype: Any = None, **kwargs: Any) -> B1Tensor:
    def run(dst: Any, x: Any, b: Any, s: Any, rr: Any) -> None:
        instr("activation_reduce")(dst, _op(op), x, reduce_op=_op(reduce_op), reduce_res=rr, bias=b, scale=s)

    out = _elementwise("activation_reduce", data, dtype, mask, run, _v(bias), _v(scale), _v(reduce_res))
    state.note_write(_view(reduce_res), what="activation_reduce")
    return out


def _v(x: Any) -> Any:
    """An optional tensor argument as a tile (or unchanged scalar / None)."""
    if isinstance(x, B1Tensor | Access):
        return tile(x, "operand", "isa")
    return x


# -- Vector engine ---------------------------------------------------------------------------------------
def tensor_tensor(data1: Any, data2: Any, op: Any, *, dtype: Any = None, mask: Any = None,
                  engine: Any = engine.unknown, **kwargs: Any) -> B1Tensor:
    a, b = tile(data1, "data1", "tensor_tensor"), tile(data2, "data2", "tensor_tensor")
    dtype = dtype if dtype is not None else ops.result_dtype(as_op(_op(op), "tensor_tensor").name, [a, b], None)
    if a.shape[0] != b.shape[0]:
        raise NkiValidationError(
            f"number of partitions (dimension 0 size of a tile) mismatch in parameters (data1{list(a.shape)}, "
            f"data2{list(b.shape)}) of 'tensor_tensor'", instruction="tensor_tensor", rule="partition-mismatch")

    full = tuple(a.shape)
    # operands of the same size but another shape pair elements per partition in order; of different sizes, a
    # [P, 1] (size-1 free dims) operand is broadcast along the free dims, as Beta 1 did
    broadcast = math.prod(a.shape) != math.prod(b.shape)
    if broadcast:  # (free dims broadcast among themselves: a [P, 1] operand against [P, H, W] is [P, 1, 1])
        try:
            full = (a.shape[0], *np.broadcast_shapes(tuple(a.shape[1:]), tuple(b.shape[1:])))
        except ValueError:
            raise NkiValidationError(f"tensor_tensor: data1{list(a.shape)} and data2{list(b.shape)} do not "
                                     "broadcast", instruction="tensor_tensor", rule="shape-mismatch") from None

    def run(dst: Any, x: Any, y: Any) -> None:
        if broadcast:  # zero-stride views along the broadcast free dims
            shp = tuple(dst.shape)
            x = x if tuple(x.shape) == shp else ops._broadcast(wrap(x), shp, "tensor_tensor")
            y = y if tuple(y.shape) == shp else ops._broadcast(wrap(y), shp, "tensor_tensor")
        instr("tensor_tensor")(dst, x, y, _op(op), engine=engine)

    return _elementwise("tensor_tensor", a, dtype, mask, run, b, shape=full)


def tensor_scalar(data: Any, op0: Any, operand0: Any, reverse0: bool = False, op1: Any = None, operand1: Any = None,
                  reverse1: bool = False, *, dtype: Any = None, mask: Any = None, engine: Any = engine.unknown,
                  **kwargs: Any) -> B1Tensor:
    def run(dst: Any, x: Any, o0: Any, o1: Any) -> None:
        instr("tensor_scalar")(dst, x, _op(op0), o0, reverse0=reverse0, op1=_op(op1), operand1=o1, reverse1=reverse1,
                               engine=engine)

    return _elementwise("tensor_scalar", data, dtype, mask, run, _v(operand0), _v(operand1))


def scalar_tensor_tensor(*, data: Any, op0: Any, operand0: Any, op1: Any, operand1: Any, reverse0: bool = False,
                         reverse1: bool = False, dtype: Any = None, mask: Any = None, **kwargs: Any) -> B1Tensor:
    def run(dst: Any, x: Any, o0: Any, o1: Any) -> None:
        instr("scalar_tensor_tensor")(dst, x, _op(op0), o0, _op(op1), o1, reverse0=reverse0, reverse1=reverse1)

    return _elementwise("scalar_tensor_tensor", data, dtype, mask, run, _v(operand0), _v(operand1))


def tensor_copy(src: Any, *, mask: Any = None, dtype: Any = None, engine: Any = engine.unknown,
                **kwargs: Any) -> B1Tensor:
    def run(dst: Any, x: Any) -> None:
        instr("tensor_copy")(dst, x, engine=engine)

    return _elementwise("tensor_copy", src, dtype, mask, run)


def reciprocal(data: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> B1Tensor:
    return _elementwise("reciprocal", data, dtype, mask, lambda dst, x: instr("reciprocal")(dst, x))


def dropout(data: Any, prob: Any, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> B1Tensor:
    return _elementwise("dropout", data, dtype, mask, lambda dst, x, p: instr("dropout")(dst, x, p), _v(prob))


def tensor_reduce(op: Any, data: Any, axis: Any, *, mask: Any = None, dtype: Any = None, negate: bool = False,
                  keepdims: bool = False, **kwargs: Any) -> B1Tensor:
    d = tile(data, "data", "tensor_reduce")
    dv = _view(d)
    if mask is not None:
        boxes = boxes_for(mask, tuple(dv.shape), "tensor_reduce")
        if len(boxes) != 1:
            raise Beta1Unsupported("nisa.tensor_reduce with a non-rectangular mask is not implemented by nkieval")
        if boxes[0] is not None:
            dv = wrap(dv._index(boxes[0]))
    nd = dv.ndim
    axes = (int(axis),) if isinstance(axis, int | np.integer) else tuple(int(a) for a in axis)
    axes = tuple(a + nd if a < 0 else a for a in axes)
    if keepdims:
        shape = tuple(1 if i in axes else n for i, n in enumerate(dv.shape))
    else:
        shape = tuple(n for i, n in enumerate(dv.shape) if i not in axes)
        if len(shape) < 2:
            shape = (*shape, 1)
    out = new_tile(shape, dtype if dtype is not None else dv.dtype, SBUF, "tensor_reduce")
    if axes and 0 not in axes and sorted(axes) != list(range(nd - len(axes), nd)):
        # Beta 1 reduced any free axes, as its nl reductions did (a max pool reduces [P, 2, W, 2] over (1, 3)):
        # the reduced axes are permuted last, a free-dimension access pattern, and the instruction reduces those
        keep = [d for d in range(nd) if d not in axes]
        dv, axes = wrap(dv.permute([*keep, *sorted(axes)])), tuple(range(len(keep), nd))
    instr("tensor_reduce")(out, _op(op), dv, axes, negate=negate, keepdims=keepdims)
    return out


def tensor_partition_reduce(op: Any, data: Any, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> B1Tensor:
    d = _unviewed(tile(data, "data", "tensor_partition_reduce"))
    out = new_tile((1, *d.shape[1:]), dtype if dtype is not None else d.dtype, SBUF, "tensor_partition_reduce")
    full = tuple(d.shape)
    boxes = boxes_for(mask, full, "tensor_partition_reduce")
    for box in boxes:  # masked: only the partitions and columns in the box are reduced (and bounds-checked)
        o = out if box is None else wrap(out._index((slice(0, 1), *box[1:])))
        instr("tensor_partition_reduce")(o, _op(op), restrict(d, box, full))
    return ops.masked(out, [None if b is None else (slice(0, 1), *b[1:]) for b in boxes])


def tensor_tensor_scan(data0: Any, data1: Any, initial: Any, op0: Any, op1: Any, reverse0: bool = False,
                       reverse1: bool = False, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> B1Tensor:
    def run(dst: Any, a: Any, b: Any, init: Any) -> None:
        instr("tensor_tensor_scan")(dst, a, b, init, _op(op0), _op(op1), reverse0=reverse0, reverse1=reverse1)

    return _elementwise("tensor_tensor_scan", data0, dtype, mask, run, tile(data1, "data1", "tensor_tensor_scan"),
                        _v(initial))


def tensor_scalar_reduce(*, data: Any, op0: Any, operand0: Any, reduce_op: Any, reduce_res: Any,
                         reverse0: bool = False, dtype: Any = None, mask: Any = None, **kwargs: Any) -> B1Tensor:
    def run(dst: Any, x: Any, o0: Any, rr: Any) -> None:
        instr("tensor_scalar_reduce")(dst, x, _op(op0), o0, _op(reduce_op), reduce_res=rr, reverse0=reverse0)

    return _elementwise("tensor_scalar_reduce", data, dtype, mask, run, _v(operand0), _v(reduce_res))


def tensor_scalar_cumulative(*, src: Any, dst: Any, op0: Any, op1: Any, imm0: Any, imm1: Any = None,
                             reduce_cmd: Any = reduce_cmd.reset_reduce, mask: Any = None, dtype: Any = None,
                             **kwargs: Any) -> None:
    """Destination-passing in Beta 1 too (``dst=``), as in the current API."""
    d = _view(dst)
    full = tuple(d.shape)
    s = _view(src)
    i0, i1 = _v(imm0), _v(imm1)
    for box in boxes_for(mask, full, "tensor_scalar_cumulative"):
        dd = sub(wrap(d), box)
        instr("tensor_scalar_cumulative")(dd, restrict(wrap(s), box, full), _op(op0), _op(op1), _cut(i0, box),
                                          _cut(i1, box), reduce_cmd=reduce_cmd)
        state.note_write(dd, what="tensor_scalar_cumulative")


def memset(shape: Any, value: Any, dtype: Any, *, mask: Any = None, engine: Any = engine.unknown,
           **kwargs: Any) -> B1Tensor:
    out = new_tile(tuple(int(s) for s in shape), dtype, SBUF, "memset")
    v = value
    if out.dtype.is_int and isinstance(v, float) and float(v).is_integer():
        v = int(v)
    boxes = boxes_for(mask, tuple(out.shape), "memset")
    for box in boxes:
        instr("memset")(sub(out, box), v, engine=engine)
    return ops.masked(out, boxes)


def bn_stats(data: Any, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> B1Tensor:
    d = _unviewed(tile(data, "data", "bn_stats"))
    out = new_tile((d.shape[0], 6), dtype if dtype is not None else dt.float32, SBUF, "bn_stats")
    return _per_row("bn_stats", out, d, mask, lambda o, x, box: instr("bn_stats")(o, x))


def bn_aggr(data: Any, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> B1Tensor:
    d = _unviewed(tile(data, "data", "bn_aggr"))
    out = new_tile((d.shape[0], 2), dtype if dtype is not None else dt.float32, SBUF, "bn_aggr")
    return _per_row("bn_aggr", out, d, mask, lambda o, x, box: instr("bn_aggr")(o, x))


def max8(*, src: Any, mask: Any = None, dtype: Any = None, **kwargs: Any) -> B1Tensor:
    s = _unviewed(tile(src, "src", "max8"))
    out = new_tile((s.shape[0], 8), dtype if dtype is not None else s.dtype, SBUF, "max8")
    return _per_row("max8", out, s, mask, lambda o, x, box: instr("max8")(o, x))


def nc_find_index8(*, data: Any, vals: Any, mask: Any = None, dtype: Any = None, **kwargs: Any) -> B1Tensor:
    d = _unviewed(tile(data, "data", "nc_find_index8"))
    v = _view(tile(vals, "vals", "nc_find_index8"))
    out = new_tile((d.shape[0], 8), dtype if dtype is not None else dt.uint32, SBUF, "nc_find_index8")
    return _per_row("nc_find_index8", out, d, mask, lambda o, x, box: instr("nc_find_index8")(o, x, _cut(v, box)))


def nc_match_replace8(*, data: Any, vals: Any, imm: float, dst_idx: Any = None, mask: Any = None, dtype: Any = None,
                      **kwargs: Any) -> B1Tensor:
    d = _view(tile(data, "data", "nc_match_replace8"))
    v = _view(tile(vals, "vals", "nc_match_replace8"))
    di = _view(dst_idx) if dst_idx is not None else None
    out = new_tile(d.shape, dtype if dtype is not None else d.dtype, SBUF, "nc_match_replace8")
    boxes = boxes_for(mask, tuple(d.shape), "nc_match_replace8")
    for box in boxes:
        instr("nc_match_replace8")(sub(out, box), d if box is None else wrap(d._index(box)), _cut(v, box), imm,
                                   dst_idx=_cut(di, box))
    return ops.masked(out, boxes)


def iota(expr: Any, dtype: Any, *, mask: Any = None, **kwargs: Any) -> B1Tensor:
    """Values of an affine index expression (``nisa.iota(2 * nl.arange(64)[:, None], dtype=nl.int32)``)."""
    if not isinstance(expr, IndexExpr):
        raise NkiValidationError("iota needs an nl.arange/nl.mgrid index expression", instruction="iota",
                                 operand="expr", rule="argument")
    shape = tuple(expr.shape) if expr.ndim >= 2 else (1, *expr.shape)
    form = affine_form(expr.values.reshape(shape), shape)
    if form is None:
        raise NkiValidationError("iota expression is not affine in its index grids", instruction="iota",
                                 operand="expr", rule="argument")
    base, coefs = form
    out = new_tile(shape, dtype, SBUF, "iota")
    pattern = [[c, n] for c, n in zip(coefs[1:], shape[1:])]
    for box in boxes_for(mask, shape, "iota"):
        if box is None:
            instr("iota")(out, pattern, offset=base, channel_multiplier=coefs[0])
        else:
            b0 = base + sum(c * (b.start or 0) for c, b in zip(coefs, box))
            sub_shape = sub(out, box).shape
            pat = [[c, n] for c, n in zip(coefs[1:], sub_shape[1:])]
            instr("iota")(sub(out, box), pat, offset=b0, channel_multiplier=coefs[0])
    return out


def affine_select(pred: Any, on_true_tile: Any, on_false_value: Any, *, mask: Any = None, dtype: Any = None,
                  **kwargs: Any) -> B1Tensor:
    """``pred ? on_true_tile : on_false_value`` with ``pred`` one affine comparison of index grids."""
    t = ops.to_sbuf(_view(tile(on_true_tile, "on_true_tile", "affine_select")), "affine_select")
    if not isinstance(pred, Predicate) or (pred.aff is None and pred.diff is None):  # (.diff: made when read)
        raise NkiValidationError("affine_select pred must be a single comparison of affine index expressions "
                                 "(e.g. iy < ix)", instruction="affine_select", operand="pred", rule="argument")
    shape = tuple(t.shape)
    form = fitted_form(pred.aff, shape) if pred.aff is not None else None
    if form is None:
        diff = np.broadcast_to(pred.diff.reshape(pred.diff.shape[-len(shape):]) if pred.diff.ndim > len(shape)
                               else pred.diff, shape)
        form = affine_form(diff, shape)
    if form is None:
        raise NkiValidationError("affine_select pred is not affine in the tile's indices", instruction="affine_select",
                                 operand="pred", rule="argument")
    base, coefs = form
    out = new_tile(shape, dtype if dtype is not None else t.dtype, SBUF, "affine_select", defer_fill=True)
    boxes = boxes_for(mask, shape, "affine_select")
    for box in boxes:  # masked: the instruction runs on the box, its affine offset moved to the box's corner
        b0 = base if box is None else base + sum(c * (b.start or 0) for c, b in zip(coefs, box))
        o = sub(out, box)
        pattern = [[c, n] for c, n in zip(coefs[1:], o.shape[1:])]
        instr("affine_select")(o, pattern, coefs[0], t if box is None else wrap(t._index(box)),
                               float(on_false_value), cmp_op=OPS[pred.cmp], offset=b0)
    return ops.masked(out, boxes)


def range_select(*, on_true_tile: Any, comp_op0: Any, comp_op1: Any, bound0: Any, bound1: Any,
                 reduce_cmd: Any = reduce_cmd.idle, reduce_res: Any = None, reduce_op: Any = np.amax,
                 range_start: int = 0, on_false_value: float = fp32.min, mask: Any = None, dtype: Any = None,
                 **kwargs: Any) -> B1Tensor:
    t = _view(tile(on_true_tile, "on_true_tile", "range_select"))
    out = new_tile(t.shape, dtype if dtype is not None else t.dtype, SBUF, "range_select")
    op = _op(reduce_op)
    b0, b1, rr = _view(bound0), _view(bound1), _view(reduce_res)
    boxes = boxes_for(mask, tuple(t.shape), "range_select")
    for box in boxes:  # masked: the column index of the box's first element is range_start + its offset
        start = range_start + (0 if box is None else (box[-1].start or 0))
        instr("range_select")(sub(out, box), t if box is None else wrap(t._index(box)), comp_op0, comp_op1,
                              _cut(b0, box), _cut(b1, box), reduce_cmd=reduce_cmd, reduce_res=_cut(rr, box),
                              reduce_op=op, range_start=start, on_false_value=on_false_value)
    return ops.masked(out, boxes)


def select_reduce(*, dst: Any, predicate: Any, on_true: Any, on_false: Any, reduce_res: Any = None,
                  reduce_cmd: Any = reduce_cmd.idle, reduce_op: Any = np.amax, reverse_pred: bool = False,
                  mask: Any = None, dtype: Any = None, **kwargs: Any) -> None:
    op = _op(reduce_op)
    d = _view(dst)
    full = tuple(d.shape)
    pred, on_t = _view(predicate), _view(on_true)
    on_f = _view(on_false) if not ops.is_scalar(on_false) else on_false
    rr = _view(reduce_res)
    for box in boxes_for(mask, full, "select_reduce"):
        dd = sub(wrap(d), box)
        instr("select_reduce")(dd, restrict(wrap(pred), box, full), restrict(wrap(on_t), box, full),
                               restrict(wrap(on_f), box, full) if not ops.is_scalar(on_f) else on_f,
                               reduce_res=_cut(rr, box), reduce_cmd=reduce_cmd, reduce_op=op, reverse_pred=reverse_pred)
        state.note_write(dd, what="select_reduce")


def tensor_copy_predicated(*, src: Any, dst: Any, predicate: Any, reverse_pred: bool = False, mask: Any = None,
                           dtype: Any = None, **kwargs: Any) -> None:
    d = _view(dst)
    pred = _view(predicate)
    if pred.dtype == dt.bool_:  # Beta-1 comparisons give bool tiles (stored as uint8)
        pred = wrap(pred.view(dt.uint8))
    src_v = _view(src) if not ops.is_scalar(src) else src
    full = tuple(d.shape)
    for box in boxes_for(mask, full, "tensor_copy_predicated"):
        dd = sub(wrap(d), box)
        instr("tensor_copy_predicated")(dd, restrict(wrap(src_v), box, full) if not ops.is_scalar(src_v) else src_v,
                                        restrict(pred, box, full), reverse_pred=reverse_pred)
        state.note_write(dd, what="tensor_copy_predicated")


def nc_stream_shuffle(src: Any, dst: Any, shuffle_mask: Any, *, dtype: Any = None, mask: Any = None,
                      **kwargs: Any) -> None:
    d = _view(dst)
    sv = _view(src)
    full = tuple(d.shape)
    for box in boxes_for(mask, full, "nc_stream_shuffle"):  # masked: the shuffle runs on the box's sub-tiles
        dd = sub(wrap(d), box)
        instr("nc_stream_shuffle")(dd, restrict(wrap(sv), box, full), shuffle_mask)
        state.note_write(dd, what="nc_stream_shuffle")


def sequence_bounds(*, segment_ids: Any, dtype: Any = None) -> B1Tensor:
    s = _view(tile(segment_ids, "segment_ids", "sequence_bounds"))
    out = new_tile((1, 2, int(np.prod(s.shape[1:]))), dtype if dtype is not None else s.dtype, SBUF,
                   "sequence_bounds")
    instr("sequence_bounds")(out, s)
    return out


def local_gather(src_buffer: Any, index: Any, num_elem_per_idx: int = 1, num_valid_indices: Any = None, *,
                 mask: Any = None) -> B1Tensor:
    s = _view(tile(src_buffer, "src_buffer", "local_gather"))
    i = _view(tile(index, "index", "local_gather"))
    # the index tile holds, per 16-partition group, 16 x (free size) indices
    n_idx = int(num_valid_indices) if num_valid_indices is not None else 16 * int(np.prod(i.shape[1:]))
    n = n_idx * int(num_elem_per_idx)
    out = new_tile((s.shape[0], n), s.dtype, SBUF, "local_gather")
    if boxes_for(mask, tuple(out.shape), "local_gather") != [None]:
        raise Beta1Unsupported("nisa.local_gather with a mask that selects part of the result is not implemented by "
                               "nkieval (the gather works on whole 16-partition groups); mask the consumer instead")
    instr("local_gather")(out, s, i, num_elem_per_idx=num_elem_per_idx, num_valid_indices=num_valid_indices)
    return out


# -- DMA ---------------------------------------------------------------------------------------------------
def dma_copy(*, dst: Any, src: Any, mask: Any = None, dst_rmw_op: Any = None, oob_mode: Any = oob_mode.error,
             dge_mode: Any = dge_mode.unknown) -> None:
    """Beta-1 DMA: destination-passing, keyword-only; ``dst_rmw_op=np.add`` accumulates into dst."""
    d = dst.view() if isinstance(dst, Access) and mask is None else dst
    s = _view(src) if mask is None else src
    if dst_rmw_op is not None:
        d, s = (d.view() if isinstance(d, Access) else d), _view(s)
        o = as_op(dst_rmw_op, "dma_copy", "dst_rmw_op")
        instr("dma_compute")(d, [d, s], o)
        return
    if mask is not None:
        # index expressions (and slices past the tensor) are cut to each mask box before they are viewed
        d0 = dst if isinstance(dst, Access) else wrap(d)
        s0 = src if isinstance(src, Access) else wrap(_view(src))
        full = tuple(d0.shape)
        for box in boxes_for(mask, full, "dma_copy"):
            dd = restrict(d0, box, full)
            instr("dma_copy")(dd, restrict(s0, box, full), oob_mode=oob_mode, dge_mode=dge_mode)
            state.note_write(dd, what="dma_copy")
        return
    else:
        instr("dma_copy")(d, s, oob_mode=oob_mode, dge_mode=dge_mode)
    state.note_write(d, what="dma_copy")


def dma_transpose(src: Any, *, axes: Any = None, mask: Any = None, dtype: Any = None, **kwargs: Any) -> B1Tensor:
    s = _view(src)
    nd = s.ndim
    perm = tuple(axes) if axes is not None else tuple(reversed(range(nd)))
    out = new_tile(tuple(s.shape[i] for i in perm), s.dtype, SBUF, "dma_transpose")
    boxes = boxes_for(mask, tuple(out.shape), "dma_transpose")
    for box in boxes:  # masked: box of the result <- the source box with its axes un-permuted
        if box is None:
            instr("dma_transpose")(out, s, axes=axes)
            continue
        src_box = [slice(None)] * nd
        for k, ax in enumerate(perm):
            src_box[ax] = box[k]
        instr("dma_transpose")(sub(out, box), wrap(s._index(tuple(src_box))), axes=axes)
    return ops.masked(out, boxes)


def get_nc_version() -> nc_version:
    from nkieval.hardware import get_target
    from nkieval.sim.context import maybe_current

    ctx = maybe_current()
    return nc_version((ctx.target if ctx else get_target()).generation)


def _unsupported(name: str, why: str = "") -> Any:
    def f(*args: Any, **kwargs: Any) -> Any:
        raise Beta1Unsupported(f"nisa.{name} is not implemented by nkieval" + (f" ({why})" if why else ""))

    f.__name__ = name
    return f


def _dynamic_view(x: Any, role: str, api: str) -> Any:
    if not (isinstance(x, Access) and x.scalar is not None):
        raise NkiValidationError(f"operand '{role}' of '{api}' must be a tile indexed with a dynamic offset, e.g. "
                                 "t[i_p, offsets[0, j] + i_f]", instruction=api, operand=role, rule="indexing")
    return x


def tensor_copy_dynamic_src(src: Any, *, mask: Any = None, dtype: Any = None, engine: Any = engine.unknown,
                            **kwargs: Any) -> B1Tensor:
    """Copy of ``src`` (an on-chip tile at a runtime offset within each partition, ``t[i_p, offs[0, j] + i_f]``)
    into a new SBUF tile (Beta 1 up to NKI 0.3; the current API writes ``tensor_copy`` of ``.ap(scalar_offset=)``)."""
    _dynamic_view(src, "src", "tensor_copy_dynamic_src")
    return tensor_copy(src, mask=mask, dtype=dtype, engine=engine)


def tensor_copy_dynamic_dst(*, dst: Any, src: Any, mask: Any = None, dtype: Any = None, engine: Any = engine.unknown,
                            **kwargs: Any) -> None:
    """Copy ``src`` into ``dst``, an on-chip tile at a runtime offset within each partition."""
    _dynamic_view(dst, "dst", "tensor_copy_dynamic_dst")
    s = tile(src, "src", "tensor_copy_dynamic_dst")
    full = tuple(dst.shape)
    if tuple(s.shape) != full and math.prod(s.shape) != math.prod(full):
        raise NkiValidationError(f"tensor_copy_dynamic_dst: src{list(s.shape)} and dst{list(full)} must have the same "
                                 "partitions and elements per partition", instruction="tensor_copy_dynamic_dst",
                                 rule="shape-mismatch")
    for box in boxes_for(mask, full, "tensor_copy_dynamic_dst"):
        d = dst.view(box)
        instr("tensor_copy")(d, restrict(s, box, full), engine=engine)
        state.note_write(d, what="tensor_copy_dynamic_dst")

builtin_custom_op = _unsupported("builtin_custom_op", "custom ucode libraries need hardware")

NkiValidationError = NkiValidationError

__all__ = [
    "activation", "activation_reduce", "affine_select", "bn_aggr", "bn_stats", "builtin_custom_op", "dge_mode",
    "dma_copy", "dma_engine", "dma_transpose", "dropout", "engine", "fp32", "get_nc_version", "gpsimd_engine", "iota",
    "local_gather", "matmul_perf_mode", "max8", "memset", "nc_find_index8", "nc_match_replace8", "nc_matmul",
    "nc_stream_shuffle", "nc_transpose", "nc_version", "oob_mode", "range_select", "reciprocal", "reduce_cmd",
    "scalar_engine", "scalar_tensor_tensor", "select_reduce", "sequence_bounds", "tensor_copy",
    "tensor_copy_dynamic_dst", "tensor_copy_dynamic_src", "tensor_copy_predicated", "tensor_engine",
    "tensor_partition_reduce", "tensor_reduce", "tensor_scalar", "tensor_scalar_cumulative", "tensor_scalar_reduce",
    "tensor_tensor",
    "tensor_tensor_scan", "unknown_engine", "vector_engine",
]
