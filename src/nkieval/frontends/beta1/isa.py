"""Beta-1 ``nki.isa``: value-returning instructions with ``dtype=`` and ``mask=``.

Served as ``neuronxcc.nki.isa``. Each call allocates its destination (SBUF, or PSUM for the
Tensor engine) and runs the simulator's destination-passing instruction of the same name;
``mask=`` runs it once per mask box on the matching sub-tiles. The few calls that were
destination-passing already in Beta 1 (``dma_copy``, ``select_reduce``, ``nc_stream_shuffle``,
``tensor_copy_predicated``) take ``dst`` as Beta 1 did.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from nkieval.frontends.beta1 import ops, state
from nkieval.frontends.beta1.index import IndexExpr, Predicate, affine_form
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
from nkieval.sim.ops import OPS, Op, as_op

tensor_engine = engine.tensor
vector_engine = engine.vector
scalar_engine = engine.scalar
gpsimd_engine = engine.gpsimd
unknown_engine = engine.unknown


class fp32:
    min = float(np.finfo(np.float32).min)


def _op(op: Any) -> Any:
    """Beta 1 also took numpy reductions (np.max, np.amax, np.sum) and nl reductions as operators."""
    if op is None or isinstance(op, Op):
        return op
    name = getattr(op, "__name__", None)
    alias = {"amax": "maximum", "max": "maximum", "amin": "minimum", "min": "minimum", "sum": "add",
             "prod": "multiply"}.get(name or "")
    if alias is not None and (getattr(op, "__module__", "") or "").startswith(("numpy", "nkieval")):
        return OPS[alias]
    return op


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
    out = new_tile(full, dtype if dtype is not None else main.dtype, buffer, api)
    for box in boxes_for(mask, full, api):
        rest = [restrict(o, box, full) if isinstance(o, B1Tensor | Access) else o for o in others]
        run(sub(out, box), restrict(main, box, full), *rest)
    return out


def _same_partitions_operand(x: Any) -> Any:
    return tile(x, "operand", "isa") if isinstance(x, B1Tensor | Access) else x


# -- Tensor engine -------------------------------------------------------------------------------------
def nc_matmul(stationary: Any, moving: Any, *, is_stationary_onezero: bool = False, is_moving_onezero: bool = False,
              is_transpose: bool = False, tile_position: Any = (), tile_size: Any = (), mask: Any = None,
              **kwargs: Any) -> B1Tensor:
    """``stationary.T @ moving`` into a new PSUM tile; ``psum += nisa.nc_matmul(...)`` accumulates."""
    s = ops.to_sbuf(_view(tile(stationary, "stationary", "nc_matmul")), "nc_matmul")
    m = ops.to_sbuf(_view(tile(moving, "moving", "nc_matmul")), "nc_matmul")
    if mask is not None:
        boxes = boxes_for(mask, (int(np.prod(s.shape[1:])), int(np.prod(m.shape[1:]))), "nc_matmul")
        if boxes != [None]:
            raise Beta1Unsupported("nisa.nc_matmul with mask= is not implemented by nkieval (mask the operands)")
    kw = {"is_stationary_onezero": is_stationary_onezero, "is_moving_onezero": is_moving_onezero,
          "is_transpose": is_transpose, "tile_position": tile_position, "tile_size": tile_size}
    return ops.pending_tile(PendingMatmul(wrap(s), wrap(m), kw))


def nc_transpose(data: Any, *, mask: Any = None, dtype: Any = None, engine: Any = engine.unknown,
                 **kwargs: Any) -> B1Tensor:
    """Partition↔free transpose: Tensor engine (→ PSUM) by default, Vector engine (≤32x32) if asked."""
    d = _view(tile(data, "data", "nc_transpose"))
    eng = getattr(engine, "name", engine)
    use_vector = eng == "vector" or (eng in (None, "unknown", 0) and d.buffer.kind == "psum")
    p, f = d.shape[0], int(np.prod(d.shape[1:]))
    out_dt = dtype if dtype is not None else d.dtype
    out = new_tile((f, p), out_dt, SBUF if use_vector else PSUM, "nc_transpose")
    instr("nc_transpose")(out, d, engine=engine)
    del mask
    return out


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

    def run(dst: Any, x: Any, y: Any) -> None:
        instr("tensor_tensor")(dst, x, y, _op(op), engine=engine)

    return _elementwise("tensor_tensor", a, dtype, mask, run, b)


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
    instr("tensor_reduce")(out, _op(op), dv, axes, negate=negate, keepdims=keepdims)
    return out


def tensor_partition_reduce(op: Any, data: Any, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> B1Tensor:
    d = _view(tile(data, "data", "tensor_partition_reduce"))
    out = new_tile((1, *d.shape[1:]), dtype if dtype is not None else d.dtype, SBUF, "tensor_partition_reduce")
    instr("tensor_partition_reduce")(out, _op(op), d)
    return out


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


def memset(shape: Any, value: Any, dtype: Any, *, mask: Any = None, engine: Any = engine.unknown,
           **kwargs: Any) -> B1Tensor:
    out = new_tile(tuple(int(s) for s in shape), dtype, SBUF, "memset")
    v = value
    if out.dtype.is_int and isinstance(v, float) and float(v).is_integer():
        v = int(v)
    for box in boxes_for(mask, tuple(out.shape), "memset"):
        instr("memset")(sub(out, box), v, engine=engine)
    return out


def bn_stats(data: Any, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> B1Tensor:
    d = _view(tile(data, "data", "bn_stats"))
    out = new_tile((d.shape[0], 6), dtype if dtype is not None else dt.float32, SBUF, "bn_stats")
    instr("bn_stats")(out, d)
    return out


def bn_aggr(data: Any, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> B1Tensor:
    d = _view(tile(data, "data", "bn_aggr"))
    out = new_tile((d.shape[0], 2), dtype if dtype is not None else dt.float32, SBUF, "bn_aggr")
    instr("bn_aggr")(out, d)
    return out


def max8(*, src: Any, mask: Any = None, dtype: Any = None, **kwargs: Any) -> B1Tensor:
    s = _view(tile(src, "src", "max8"))
    out = new_tile((s.shape[0], 8), dtype if dtype is not None else s.dtype, SBUF, "max8")
    instr("max8")(out, s)
    return out


def nc_find_index8(*, data: Any, vals: Any, mask: Any = None, dtype: Any = None, **kwargs: Any) -> B1Tensor:
    d = _view(tile(data, "data", "nc_find_index8"))
    out = new_tile((d.shape[0], 8), dtype if dtype is not None else dt.uint32, SBUF, "nc_find_index8")
    instr("nc_find_index8")(out, d, _view(tile(vals, "vals", "nc_find_index8")))
    return out


def nc_match_replace8(*, data: Any, vals: Any, imm: float, dst_idx: Any = None, mask: Any = None, dtype: Any = None,
                      **kwargs: Any) -> B1Tensor:
    d = _view(tile(data, "data", "nc_match_replace8"))
    out = new_tile(d.shape, dtype if dtype is not None else d.dtype, SBUF, "nc_match_replace8")
    instr("nc_match_replace8")(out, d, _view(tile(vals, "vals", "nc_match_replace8")), imm,
                               dst_idx=_view(dst_idx) if dst_idx is not None else None)
    return out


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
    if not isinstance(pred, Predicate) or pred.diff is None:
        raise NkiValidationError("affine_select pred must be a single comparison of affine index expressions "
                                 "(e.g. iy < ix)", instruction="affine_select", operand="pred", rule="argument")
    shape = tuple(t.shape)
    diff = np.broadcast_to(pred.diff.reshape(pred.diff.shape[-len(shape):]) if pred.diff.ndim > len(shape)
                           else pred.diff, shape)
    form = affine_form(diff, shape)
    if form is None:
        raise NkiValidationError("affine_select pred is not affine in the tile's indices", instruction="affine_select",
                                 operand="pred", rule="argument")
    base, coefs = form
    out = new_tile(shape, dtype if dtype is not None else t.dtype, SBUF, "affine_select")
    pattern = [[c, n] for c, n in zip(coefs[1:], shape[1:])]
    instr("affine_select")(out, pattern, coefs[0], t, float(on_false_value), cmp_op=OPS[pred.cmp], offset=base)
    del mask
    return out


def range_select(*, on_true_tile: Any, comp_op0: Any, comp_op1: Any, bound0: Any, bound1: Any,
                 reduce_cmd: Any = reduce_cmd.idle, reduce_res: Any = None, reduce_op: Any = np.amax,
                 range_start: int = 0, on_false_value: float = fp32.min, mask: Any = None, dtype: Any = None,
                 **kwargs: Any) -> B1Tensor:
    t = _view(tile(on_true_tile, "on_true_tile", "range_select"))
    out = new_tile(t.shape, dtype if dtype is not None else t.dtype, SBUF, "range_select")
    op = _op(reduce_op)
    instr("range_select")(out, t, comp_op0, comp_op1, _view(bound0), _view(bound1), reduce_cmd=reduce_cmd,
                          reduce_res=_view(reduce_res), reduce_op=op, range_start=range_start,
                          on_false_value=on_false_value)
    return out


def select_reduce(*, dst: Any, predicate: Any, on_true: Any, on_false: Any, reduce_res: Any = None,
                  reduce_cmd: Any = reduce_cmd.idle, reduce_op: Any = np.amax, reverse_pred: bool = False,
                  mask: Any = None, dtype: Any = None, **kwargs: Any) -> None:
    op = _op(reduce_op)
    d = _view(dst)
    instr("select_reduce")(d, _view(predicate), _view(on_true), _view(on_false) if not ops.is_scalar(on_false)
                           else on_false, reduce_res=_view(reduce_res), reduce_cmd=reduce_cmd, reduce_op=op,
                           reverse_pred=reverse_pred)
    state.note_write(d, what="select_reduce")


def tensor_copy_predicated(*, src: Any, dst: Any, predicate: Any, reverse_pred: bool = False, mask: Any = None,
                           dtype: Any = None, **kwargs: Any) -> None:
    d = _view(dst)
    pred = _view(predicate)
    if pred.dtype == dt.bool_:  # Beta-1 comparisons give bool tiles (stored as uint8)
        pred = wrap(pred.view(dt.uint8))
    instr("tensor_copy_predicated")(d, _view(src) if not ops.is_scalar(src) else src, pred,
                                    reverse_pred=reverse_pred)
    state.note_write(d, what="tensor_copy_predicated")


def nc_stream_shuffle(src: Any, dst: Any, shuffle_mask: Any, *, dtype: Any = None, mask: Any = None,
                      **kwargs: Any) -> None:
    d = _view(dst)
    instr("nc_stream_shuffle")(d, _view(src), shuffle_mask)
    state.note_write(d, what="nc_stream_shuffle")


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
    n_idx = int(num_valid_indices) if num_valid_indices is not None else int(np.prod(i.shape[1:]))
    n = n_idx * int(num_elem_per_idx)
    out = new_tile((s.shape[0], n), s.dtype, SBUF, "local_gather")
    instr("local_gather")(out, s, i, num_elem_per_idx=num_elem_per_idx, num_valid_indices=num_valid_indices)
    return out


# -- DMA ---------------------------------------------------------------------------------------------------
def dma_copy(*, dst: Any, src: Any, mask: Any = None, dst_rmw_op: Any = None, oob_mode: Any = oob_mode.error,
             dge_mode: Any = dge_mode.unknown) -> None:
    """Beta-1 DMA: destination-passing, keyword-only; ``dst_rmw_op=np.add`` accumulates into dst."""
    d = dst.view() if isinstance(dst, Access) else dst
    s = _view(src)
    if dst_rmw_op is not None:
        o = as_op(dst_rmw_op, "dma_copy", "dst_rmw_op")
        instr("dma_compute")(d, [d, s], o)
        return
    if mask is not None:
        full = tuple(d.shape)
        for box in boxes_for(mask, full, "dma_copy"):
            instr("dma_copy")(restrict(wrap(d), box, full), restrict(wrap(s), box, full), oob_mode=oob_mode,
                              dge_mode=dge_mode)
    else:
        instr("dma_copy")(d, s, oob_mode=oob_mode, dge_mode=dge_mode)
    state.note_write(d, what="dma_copy")


def dma_transpose(src: Any, *, axes: Any = None, mask: Any = None, dtype: Any = None, **kwargs: Any) -> B1Tensor:
    s = _view(src)
    nd = s.ndim
    perm = tuple(axes) if axes is not None else tuple(reversed(range(nd)))
    out = new_tile(tuple(s.shape[i] for i in perm), s.dtype, SBUF, "dma_transpose")
    instr("dma_transpose")(out, s, axes=axes)
    return out


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


tensor_copy_dynamic_src = _unsupported("tensor_copy_dynamic_src", "removed in NKI 0.4")
tensor_copy_dynamic_dst = _unsupported("tensor_copy_dynamic_dst", "removed in NKI 0.4")
builtin_custom_op = _unsupported("builtin_custom_op", "custom ucode libraries need hardware")

NkiValidationError = NkiValidationError

__all__ = [
    "activation", "activation_reduce", "affine_select", "bn_aggr", "bn_stats", "builtin_custom_op", "dge_mode",
    "dma_copy", "dma_engine", "dma_transpose", "dropout", "engine", "fp32", "get_nc_version", "gpsimd_engine", "iota",
    "local_gather", "matmul_perf_mode", "max8", "memset", "nc_find_index8", "nc_match_replace8", "nc_matmul",
    "nc_stream_shuffle", "nc_transpose", "nc_version", "oob_mode", "range_select", "reciprocal", "reduce_cmd",
    "scalar_engine", "scalar_tensor_tensor", "select_reduce", "sequence_bounds", "tensor_copy",
    "tensor_copy_dynamic_dst", "tensor_copy_dynamic_src", "tensor_copy_predicated", "tensor_engine",
    "tensor_partition_reduce", "tensor_reduce", "tensor_scalar", "tensor_scalar_reduce", "tensor_tensor",
    "tensor_tensor_scan", "unknown_engine", "vector_engine",
]
