"""dma_compute: sum source tensors inside the DMA engines (fp32), optionally as an indirect
read-modify-write (scatter-add into HBM or gather-add into SBUF through a vector_offset view)."""

from __future__ import annotations

from typing import Any

import numpy as np

from nkieval.sim import dtypes as dt
from nkieval.sim.errors import NkiValidationError
from nkieval.sim.fpstate import IGNORE_ALL
from nkieval.sim.indirect_views import OutOfBoundsView
from nkieval.sim.isa.core import (
    check_buffer,
    check_partitions,
    enum_value,
    instruction,
    note_write,
    read,
    record,
    tensor_arg,
    write,
)
from nkieval.sim.isa.enums import oob_mode as OobMode
from nkieval.sim.ops import as_op
from nkieval.sim.tensor import NkiTensor


def _rows_of(t: NkiTensor, oob: int, role: str) -> tuple[np.ndarray, np.ndarray]:
    ind = t._ap_base
    idx = np.asarray(ind.index.data).reshape(-1).astype(np.int64)
    rows = ind.pattern[0][1]
    if idx.size < rows:
        raise NkiValidationError(f"vector_offset has {idx.size} indices but the pattern needs {rows}", operand=role,
                                 rule="shape-mismatch")
    offs = ind.element_offsets(idx[:rows])
    ok = np.all((offs >= 0) & (offs < ind.flat.size), axis=tuple(range(1, offs.ndim))) & ind.rows_ok(idx[:rows])
    if not ok.all() and oob == OobMode.error:
        bad = int(np.nonzero(~ok)[0][0])
        raise NkiValidationError(f"indirect {role} index {int(idx[bad])} at row {bad} is out of bounds",
                                 operand=role, rule="out-of-bounds")
    return offs, ok


@instruction("dma_compute", "dma")
def dma_compute(ctx: Any, dst: Any, srcs: Any, reduce_op: Any, scales: Any = None, unique_indices: bool = True,
                oob_mode: Any = OobMode.error, name: str | None = None) -> None:
    """``dst = Σ srcs`` in fp32 inside the DMA engines (HBM/SBUF); with a vector_offset view, an indirect
    read-modify-write (scatter-add into HBM or gather-add into SBUF)."""
    dst = tensor_arg(dst, "dst")
    if not isinstance(srcs, list | tuple) or not srcs:
        raise NkiValidationError("srcs must be a non-empty list of tensors", operand="srcs", rule="argument")
    srcs = [tensor_arg(s, f"srcs[{i}]") for i, s in enumerate(srcs)]
    lim = ctx.target.dma_compute_max_srcs
    if len(srcs) > lim:
        raise NkiValidationError(f"{len(srcs)} sources exceed the maximum of {lim}", operand="srcs",
                                 rule="instruction-limit")
    ro = as_op(reduce_op, "dma_compute", "reduce_op")
    if ro.name != "add":
        raise NkiValidationError(f"reduce_op must be nl.add (only add is supported), got {ro.name}",
                                 operand="reduce_op", rule="argument")
    if scales is not None:
        try:
            sc = [float(s) for s in scales]
        except (TypeError, ValueError):
            raise NkiValidationError("scales must be a list of numbers", operand="scales", rule="argument") from None
        if len(sc) != len(srcs) or any(s != 1.0 for s in sc):
            raise NkiValidationError(f"scales must be {len(srcs)} values, all 1.0, got {sc}", operand="scales",
                                     rule="argument")
    oob = enum_value(oob_mode, OobMode, "oob_mode")
    for role, t in (("dst", dst), *((f"srcs[{i}]", s) for i, s in enumerate(srcs))):
        check_buffer(t, role, ("hbm", "sbuf"), "DMA cannot access PSUM")
        if t.is_on_chip:
            check_partitions(ctx, t, role)
    for role, t in (("dst", dst), *((f"srcs[{i}]", s) for i, s in enumerate(srcs))):
        if isinstance(t._ap_base, OutOfBoundsView):
            raise NkiValidationError(f"{role}: {t._ap_base.message}", operand=role, rule="out-of-bounds")
    indirect = [i for i, s in enumerate(srcs) if s._ap_base is not None]
    operands = [(dst, "dst", "w")]
    if dst._ap_base is not None or indirect:
        _dma_rmw(ctx, dst, srcs, indirect, oob, bool(unique_indices), operands)
    else:
        for i, s in enumerate(srcs):
            if s.size != dst.size:
                raise NkiValidationError(f"srcs[{i}]{list(s.shape)} has {s.size} elements, dst{list(dst.shape)} has "
                                         f"{dst.size}", operand=f"srcs[{i}]", rule="shape-mismatch")
            operands.append((s, f"srcs[{i}]", "r"))
        with IGNORE_ALL():
            total = np.zeros(dst.size, dtype=np.float32)
            for s in srcs:
                total = total + np.asarray(s.data, dtype=np.float32).reshape(-1)
        write(ctx, dst, total.reshape(dst.shape))
    record(ctx, "dma_compute", "dma", operands, nsrcs=len(srcs), indirect=bool(indirect or dst._ap_base is not None))


def _dma_rmw(ctx: Any, dst: NkiTensor, srcs: list[NkiTensor], indirect: list[int], oob: int, unique: bool,
             operands: list[Any]) -> None:
    if len(srcs) != 2:
        raise NkiValidationError("indirect read-modify-write needs exactly 2 sources", operand="srcs",
                                 rule="argument")
    if not unique:
        raise NkiValidationError("unique_indices must be True with vector_offset (non-unique not supported)",
                                 operand="unique_indices", rule="argument")
    if len(indirect) != 1:
        raise NkiValidationError("exactly one source must be an indirect (vector_offset) view", operand="srcs",
                                 rule="argument")
    ind_src = srcs[indirect[0]]
    other = srcs[1 - indirect[0]]
    if dst._ap_base is not None:  # scatter RMW: dst(HBM)[idx] += src(SB)
        if ind_src.alloc is not dst.alloc or dst.buffer.kind != "hbm":
            raise NkiValidationError("scatter RMW: dst must be an indirect HBM view and one source the same view",
                                     operand="dst", rule="argument")
        offs, ok = _rows_of(dst, oob, "dst")
        vals = np.asarray(other.data, dtype=np.float32).reshape(offs.shape)
        flat = dst._ap_base.flat
        okb = np.broadcast_to(ok.reshape((-1,) + (1,) * (offs.ndim - 1)), offs.shape)
        cur = flat[np.where(okb, offs, 0)].astype(np.float32)
        new = dt.cast(cur + vals, dst.dtype, fp8_overflow=ctx.options.fp8_overflow, precise=ctx.options.precise_fp)
        flat[offs[okb]] = new[okb]
        note_write(dst.alloc)
        operands += [(dst._ap_base.index, "vector_offset", "r"), (other, "src", "r")]
        return
    # gather RMW: dst(SB) = dst(SB) + src(HBM)[idx]
    if dst.buffer.kind != "sbuf" or other.alloc is not dst.alloc or ind_src.buffer.kind != "hbm":
        raise NkiValidationError("gather RMW: dst must be SBUF, one source dst itself and the other an indirect HBM "
                                 "view", operand="srcs", rule="argument")
    offs, ok = _rows_of(ind_src, oob, "src")
    okb = np.broadcast_to(ok.reshape((-1,) + (1,) * (offs.ndim - 1)), offs.shape)
    if offs.size != dst.size:
        raise NkiValidationError(f"gathered {offs.size} elements but dst has {dst.size}", operand="dst",
                                 rule="shape-mismatch")
    g = np.where(okb, ind_src._ap_base.flat[np.where(okb, offs, 0)].astype(np.float32), np.float32(0))
    write(ctx, dst, (read(dst).reshape(offs.shape).astype(np.float32) + g).reshape(dst.shape))
    operands += [(ind_src._ap_base.index, "vector_offset", "r"), (ind_src, "src", "r")]
