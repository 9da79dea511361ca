"""DMA instructions: dma_copy (incl. indirect gather/scatter), dma_transpose (incl. gather-transpose)."""

from __future__ import annotations

from typing import Any

import numpy as np

from nkieval.sim import dtypes as dt
from nkieval.sim.errors import NkiIndexError, NkiValidationError
from nkieval.sim.indirect_views import IndirectAccess, OutOfBoundsView
from nkieval.sim.isa.core import (
    check_buffer,
    check_partitions,
    enum_value,
    instruction,
    int_value,
    note_write,
    read,
    read_bits,
    read_exact,
    record,
    tensor_arg,
    write,
    write_exact,
)
from nkieval.sim.isa.enums import dge_mode as DgeMode
from nkieval.sim.isa.enums import oob_mode as OobMode
from nkieval.sim.tensor import NkiTensor

_DMA_BUFFERS = ("hbm", "sbuf")
#: rows a Software DGE gather-transpose moves at a time: its source and index rows come in multiples of it
#: (nki.isa.dma_transpose, "DMA Indirect Transpose Constraints")
_DGE_ROWS = 16


def _dma_values(ctx: Any, t: NkiTensor) -> np.ndarray:
    # DMA casting goes src -> fp32 -> dst.
    return read(t)


def _row_indices(src: NkiTensor, role: str) -> np.ndarray:
    """The run-time row indices of an indirect view (its index tile, checked), one per row of its pattern."""
    ind = src._ap_base
    index = ind.index
    check_buffer(index, "vector_offset", ("sbuf",), "DMA index vectors live in SBUF")
    if not index.dtype.is_int:
        raise NkiValidationError(f"vector_offset dtype must be an integer type, got {index.dtype}",
                                 operand="vector_offset", rule="dtype")
    idx = read_bits(index).reshape(-1)
    rows = ind.pattern[0][1]
    if idx.size < rows:
        raise NkiValidationError(f"vector_offset has {idx.size} indices but the pattern needs {rows}", operand=role,
                                 rule="shape-mismatch")
    return idx[:rows]


def _gathered_rows(ind: Any, idx: np.ndarray) -> np.ndarray | None:
    """The values ``ind.flat[ind.element_offsets(idx)]`` when every row lies inside the storage and inside the
    indexed dimension (the common case), gathered row by row from one strided view of the storage instead of
    through an int64 offset per element (a [128, 3072] gather: 393,216 offsets, bounds masks and a fancy index
    over them); None when some row is out of bounds, or the layout is not the plain one (a contiguous storage,
    rows a positive stride apart, non-negative free strides), which the element-offset path handles."""
    flat = ind.flat
    free = ind.pattern[1:]
    step = ind.row_elems
    if step <= 0 or flat.ndim != 1 or flat.strides[0] != flat.itemsize or any(s < 0 for s, _ in free) \
            or not len(idx) or not ind.rows_ok(idx).all():
        return None
    rows = idx.astype(np.int64)
    first, last = int(rows.min()), int(rows.max())
    span = sum((c - 1) * s for s, c in free)  # the last element of a row, after its first
    lo = ind.offset + first * step
    if lo < 0 or ind.offset + last * step + span >= flat.size:
        return None
    isz = flat.itemsize
    shape, strides = (last - first + 1, *(c for _, c in free)), (step * isz, *(s * isz for s, _ in free))
    try:  # (the ndarray constructor checks the view's extent against the storage: 1 µs, as_strided 4-5 µs)
        view = np.ndarray(shape, flat.dtype, flat, lo * isz, strides)
    except (ValueError, TypeError):
        view = np.lib.stride_tricks.as_strided(flat[lo:], shape=shape, strides=strides, writeable=False)
    return view[rows - first]


def _gather(ctx: Any, src: NkiTensor, oob: int, role: str, idx: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Each row's element offsets into the storage, and which rows are inside it (raising for a row outside
    unless ``oob`` skips); ``idx``: the row indices if already read (:func:`_row_indices`)."""
    ind = src._ap_base
    if idx is None:
        idx = _row_indices(src, role)
    offs = ind.element_offsets(idx)
    n = ind.flat.size
    row_ok = np.all((offs >= 0) & (offs < n), axis=tuple(range(1, offs.ndim))) & ind.rows_ok(idx)
    if not row_ok.all() and oob == OobMode.error:
        bad = int(np.nonzero(~row_ok)[0][0])
        row = np.asarray(offs[bad]).reshape(-1)
        off = int(row[(row < 0) | (row >= n)][0]) if ((row < 0) | (row >= n)).any() else int(row[0])
        raise NkiIndexError(
            f"index {off} is out of bounds for axis 0 with size {n} (indirect {role} index {int(idx[bad])} at row "
            f"{bad}, of {ind.base_shape[ind.indirect_dim]} rows)", operand=role)
    return offs, row_ok


def _check_skippable(ind: OutOfBoundsView, oob: int, role: str) -> None:
    """A DMA operand that leaves its tensor: skipped (the caller records the skip) only where a run-time
    ``scalar_offset`` put it there under ``oob_mode.skip``; a static pattern, or ``oob_mode.error``, raises."""
    if oob != OobMode.skip or ind.static:
        raise NkiValidationError(f"{role}: {ind.message}", operand=role, rule="out-of-bounds")


@instruction("dma_copy", "dma")
def dma_copy(ctx: Any, dst: Any, src: Any, priority: int | None = None, oob_mode: Any = OobMode.error,
             dge_mode: Any = DgeMode.unknown, engine: Any = None, name: str | None = None) -> None:
    """Copy ``src`` to ``dst`` (HBM/SBUF only, never PSUM); dtype cast via fp32; indirect rows via .ap(vector_offset=)."""
    dst = tensor_arg(dst, "dst")
    src = tensor_arg(src, "src")
    for role, t in (("dst", dst), ("src", src)):
        check_buffer(t, role, _DMA_BUFFERS, "DMA cannot access PSUM; copy PSUM to SBUF with tensor_copy first")
        if t.is_on_chip:
            check_partitions(ctx, t, role)
    oob = enum_value(oob_mode, OobMode, "oob_mode")
    mode = enum_value(dge_mode, DgeMode, "dge_mode")
    if mode == DgeMode.hwdge:
        if not ctx.target.has("hwdge"):
            raise NkiValidationError("dge_mode=hwdge needs trn2 or later", operand="dge_mode", rule="generation")
        if src.dtype != dst.dtype:
            raise NkiValidationError(f"hwdge DMA cannot cast ({src.dtype} -> {dst.dtype}); dtypes must match",
                                     operand="dst", rule="dtype")
    if priority is not None:
        if not ctx.target.has("dma_priority"):
            raise NkiValidationError(f"priority needs trn3 (NeuronCore-v4); target is {ctx.target.name}",
                                     operand="priority", rule="generation")
        if int_value(priority, "priority") not in range(4):
            raise NkiValidationError(f"priority must be 0-3, got {priority}", operand="priority", rule="argument")
    eng = getattr(engine, "name", engine)
    if eng not in (None, "unknown", 0):
        if mode != DgeMode.hwdge:
            raise NkiValidationError("engine= selects the hwdge trigger engine; it is only valid with "
                                     "dge_mode=hwdge", operand="engine", rule="argument")
        if eng not in ("sync", "scalar"):
            raise NkiValidationError(f"hwdge DMA is triggered by the sync or scalar engine, not {eng}",
                                     operand="engine", rule="argument")
    src_ind, dst_ind = src._ap_base, dst._ap_base
    for role, ind in (("src", src_ind), ("dst", dst_ind)):
        if isinstance(ind, OutOfBoundsView):
            _check_skippable(ind, oob, role)
            record(ctx, "dma_copy", "dma", [(src, "src", "r")] if role == "dst" else [], skipped_oob=role)
            return
    if src_ind is not None and dst_ind is not None:
        raise NkiValidationError("src and dst cannot both be indirect", rule="argument")
    if src.size != dst.size:
        raise NkiValidationError(f"element count mismatch: src{list(src.shape)} has {src.size}, dst{list(dst.shape)} "
                                 f"has {dst.size}", rule="shape-mismatch")
    cast = src.dtype != dst.dtype
    if cast and (src.dtype.name.endswith("_x4") or dst.dtype.name.endswith("_x4")):
        raise NkiValidationError("DMA casting is not supported for packed x4 types", rule="dtype")
    if cast and dt.int64 in (src.dtype, dst.dtype):
        raise NkiValidationError(f"DMA cannot cast {src.dtype} -> {dst.dtype}: a DMA cast goes through fp32, so "
                                 "nl.int64 moves only between int64 tensors (no compute instruction takes int64 "
                                 "either; read a value with nisa.scalar_load)", operand="dst", rule="dtype")
    attrs: dict[str, Any] = {"cast": bool(cast), "dge_mode": int(mode), "indirect": bool(src_ind or dst_ind)}
    fast = idx = None
    if src_ind is not None:
        idx = _row_indices(src, "src")
        fast = _gathered_rows(src_ind, idx)
    if fast is not None:  # every row inside: what the element-offset path below stores, without the offsets
        if fast.size != dst.size:
            raise NkiValidationError(f"element count mismatch: indirect src pattern has {fast.size}, "
                                     f"dst{list(dst.shape)} has {dst.size}", rule="shape-mismatch")
        if cast:
            fast = dt.cast(fast.astype(np.float32), dst.dtype, fp8_overflow=ctx.options.fp8_overflow,
                           precise=ctx.options.precise_fp)
        write_exact(dst, fast.reshape(dst.shape))
        operands = [(dst, "dst", "w"), (src_ind.index, "vector_offset", "r"), (src, "src", "r")]
    elif src_ind is not None:
        offs, ok = _gather(ctx, src, oob, "src", idx)
        if offs.size != dst.size:
            raise NkiValidationError(f"element count mismatch: indirect src pattern has {offs.size}, "
                                     f"dst{list(dst.shape)} has {dst.size}", rule="shape-mismatch")
        okb = np.broadcast_to(ok.reshape((-1,) + (1,) * (offs.ndim - 1)), offs.shape)
        gathered = src_ind.flat[np.where(okb, offs, 0)]
        if cast:
            gathered = dt.cast(gathered.astype(np.float32), dst.dtype, fp8_overflow=ctx.options.fp8_overflow,
                               precise=ctx.options.precise_fp)
        # skip mode: rows with an out-of-bounds index leave dst untouched (bit-exact)
        new = dst.data.copy().reshape(offs.shape)
        new[okb] = gathered[okb]
        write_exact(dst, new.reshape(dst.shape))
        operands = [(dst, "dst", "w"), (src_ind.index, "vector_offset", "r"), (src, "src", "r")]
    elif dst_ind is not None:
        offs, ok = _gather(ctx, dst, oob, "dst")
        vals = _dma_values(ctx, src).reshape(offs.shape)
        flat = dst_ind.flat
        target_dtype = dst.dtype
        conv = read_exact(src).reshape(offs.shape) if not cast else \
            dt.cast(vals, target_dtype, fp8_overflow=ctx.options.fp8_overflow, precise=ctx.options.precise_fp)
        okb = np.broadcast_to(ok.reshape((-1,) + (1,) * (offs.ndim - 1)), offs.shape)
        flat[offs[okb]] = conv[okb]
        note_write(dst.alloc)
        operands = [(dst, "dst", "w"), (dst_ind.index, "vector_offset", "r"), (src, "src", "r")]
    else:
        if not cast:
            write_exact(dst, read_exact(src).reshape(dst.shape))
        else:
            write(ctx, dst, _dma_values(ctx, src).reshape(dst.shape))
        operands = [(dst, "dst", "w"), (src, "src", "r")]
    record(ctx, "dma_copy", "dma", operands, **attrs)


@instruction("dma_transpose", "dma", min_generation=3)
def dma_transpose(ctx: Any, dst: Any, src: Any, axes: Any = None, priority: int | None = None,
                  dge_mode: Any = DgeMode.unknown, oob_mode: Any = OobMode.error, name: str | None = None) -> None:
    """Transpose while copying (dst in SBUF; dst shape must equal the transposed src; with ``dge_mode=hwdge``
    2-byte dtypes only: the documented hardware-DGE restriction, which the default ``unknown`` mode does not have).
    An ``.ap(vector_offset=...)`` source is gathered first: a gather-transpose (:func:`_gather_for_transpose`)."""
    dst = tensor_arg(dst, "dst")
    src = tensor_arg(src, "src")
    mode = enum_value(dge_mode, DgeMode, "dge_mode")
    oob = enum_value(oob_mode, OobMode, "oob_mode")
    perm = _transpose_perm(ctx, dst, src, axes, mode)
    if isinstance(dst._ap_base, OutOfBoundsView):  # (dst is in SBUF: a static pattern, never skipped)
        _check_skippable(dst._ap_base, oob, "dst")
    if dst._ap_base is not None:
        raise NkiValidationError("dma_transpose: dst cannot be indirect (only src is, a gather-transpose)",
                                 operand="dst", rule="argument")
    ind = src._ap_base
    if isinstance(ind, OutOfBoundsView):
        _check_skippable(ind, oob, "src")
        record(ctx, "dma_transpose", "dma", [], axes=list(perm), skipped_oob="src")
        return
    if ind is None:
        write_exact(dst, np.transpose(read_exact(src), perm))
        record(ctx, "dma_transpose", "dma", [(dst, "dst", "w"), (src, "src", "r")], axes=list(perm))
        return
    if not isinstance(ind, IndirectAccess):
        raise NkiValidationError("dma_transpose: src must be an HBM tensor or an .ap(vector_offset=...) gather of one",
                                 operand="src", rule="argument")
    gathered = _gather_for_transpose(ctx, src, ind, dst, perm, oob, mode)
    write_exact(dst, np.transpose(gathered, perm))
    record(ctx, "dma_transpose", "dma", [(dst, "dst", "w"), (ind.index, "vector_offset", "r"), (src, "src", "r")],
           axes=list(perm), indirect=True)


def _transpose_perm(ctx: Any, dst: NkiTensor, src: NkiTensor, axes: Any, mode: int) -> tuple[int, ...]:
    """A DMA transpose's operands checked (buffers, partitions, the hardware DGE's dtype, rank, permutation, shapes,
    dtypes): its permutation."""
    check_buffer(dst, "dst", ("sbuf",))
    check_buffer(src, "src", _DMA_BUFFERS)
    check_partitions(ctx, dst, "dst")
    if src.is_on_chip:
        check_partitions(ctx, src, "src")
    if mode == DgeMode.hwdge and src.dtype.itemsize != 2:
        raise NkiValidationError(f"dma_transpose with dge_mode=hwdge supports 2-byte dtypes, got {src.dtype}",
                                 operand="src", rule="dtype")
    nd = src.ndim
    default = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}
    if nd not in default:
        raise NkiValidationError(f"dma_transpose supports 2-4 dims, got {nd}", operand="src", rule="argument")
    perm = tuple(int_value(a, "axes") for a in axes) if isinstance(axes, tuple | list) else \
        default[nd] if axes is None else (int_value(axes, "axes"),)
    if perm != default[nd]:
        raise NkiValidationError(f"dma_transpose permutation {perm} not supported for {nd}-D (supported: {default[nd]})",
                                 operand="axes", rule="argument")
    expect = tuple(src.shape[i] for i in perm)
    if tuple(dst.shape) != expect:
        raise NkiValidationError(f"dst shape {list(dst.shape)} must equal the transposed src shape {list(expect)}",
                                 operand="dst", rule="shape-mismatch")
    if dst.dtype != src.dtype:
        raise NkiValidationError(f"dma_transpose cannot cast ({src.dtype} -> {dst.dtype})", operand="dst", rule="dtype")
    return perm


def _gather_for_transpose(ctx: Any, src: NkiTensor, ind: IndirectAccess, dst: NkiTensor, perm: tuple[int, ...],
                          oob: int, mode: int) -> np.ndarray:
    """An indirect transpose's source values in ``src``'s shape: NKI's ``dma_gather_transpose``,
    ``gathered = src[indices.T.flatten()[:src.shape[0]], ...]`` (the index tile read column by column), its
    documented constraints checked; rows whose index is out of bounds keep ``dst``'s values under
    ``oob_mode.skip``."""
    _check_indirect_transpose(ctx, src, ind.index, mode)
    idx = read_bits(ind.index).T.reshape(-1)[: src.shape[0]]
    rows = _gathered_rows(ind, idx)
    if rows is not None:
        return rows.reshape(src.shape)
    offs, ok = _gather(ctx, src, oob, "src", idx)
    okb = np.broadcast_to(ok.reshape((-1,) + (1,) * (offs.ndim - 1)), offs.shape)
    cur = np.transpose(dst.data, np.argsort(perm)).reshape(offs.shape).copy()  # (dst in src's layout, as stored)
    cur[okb] = ind.flat[offs[okb]]
    return cur.reshape(src.shape)


def _check_indirect_transpose(ctx: Any, src: NkiTensor, index: NkiTensor, mode: int) -> None:
    """The documented constraints of an indirect DMA transpose (nki.isa.dma_transpose, "DMA Indirect Transpose
    Constraints"): a Software DGE gather of 2-byte rows from HBM (a row's length, the destination's partitions, is
    checked with the destination), a first dimension in multiples of 16 rows, and a uint32 index tile [16..P (a
    multiple of 16), N] in SBUF, P rows when N > 1, covering every row (dma_transpose itself is trn2 or later)."""
    def bad(what: str, rule: str = "argument", operand: str = "src") -> NkiValidationError:
        return NkiValidationError(f"indirect dma_transpose: {what}", operand=operand, rule=rule)

    if mode not in (DgeMode.unknown, DgeMode.swdge):
        raise bad("dge_mode must be unknown or swdge (a Software DGE gather-transpose)", operand="dge_mode")
    if src.alloc.buffer.kind != "hbm":
        raise bad("src must be in HBM", "buffer")
    if src.dtype.itemsize != 2:
        raise bad(f"src dtype must be 2 bytes, got {src.dtype}", "dtype")
    if src.shape[0] % _DGE_ROWS:
        raise bad(f"src shape {list(src.shape)}: the first dimension must be a multiple of {_DGE_ROWS}",
                  "shape-mismatch")
    if src.ndim == 4 and 1 not in (src.shape[1], src.shape[2]):
        raise bad(f"a 4-D src needs its dimension 1 or 2 to be 1, got {list(src.shape)}", "shape-mismatch")
    check_buffer(index, "vector_offset", ("sbuf",), "DMA index vectors live in SBUF")
    n_p, n_c = index.shape[0], (index.shape[1] if index.ndim > 1 else 1)
    if index.ndim != 2 or index.dtype.name != "uint32" or n_p < _DGE_ROWS or n_p % _DGE_ROWS \
            or (n_c > 1 and n_p != ctx.target.partitions) or n_p * n_c < src.shape[0]:
        raise bad(f"the indices must be a 2-D uint32 tile of {_DGE_ROWS}, {2 * _DGE_ROWS}, ... rows (all "
                  f"{ctx.target.partitions} when it has several columns) with at least {src.shape[0]} entries, got "
                  f"{index.dtype}{list(index.shape)}", "shape-mismatch", "vector_offset")
