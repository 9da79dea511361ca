"""Running an instruction whose operands are indirect views: ``.indirect()`` operands gathered into dense
operands before it and scattered back after it; DMA indirect views passed through to the DMA instructions."""

from __future__ import annotations

import inspect
import math
from typing import Any

import numpy as np

from nkieval.sim.errors import NkiValidationError
from nkieval.sim.indirect_views import IndirectAccess, OutOfBoundsView, TensorIndirection
from nkieval.sim.memory import Allocation
from nkieval.sim.placed import claim_for_write
from nkieval.sim.storage import drop_f32, flag_view, read_bits, settle
from nkieval.sim.tensor import NkiTensor

# -- tensor indirection (.indirect(), NeuronCore-v4 compute instructions) ------------------------------
#: partitions that share one list of offsets, per engine (documented: 16 for V/S/G, 32 for the PE array)
TI_GROUP = {"vector": 16, "scalar": 16, "gpsimd": 16, "tensor": 32}
#: instructions that resolve ``.ap(vector_offset=)`` / ``vector_select`` views themselves
DMA_INDIRECT = frozenset({"dma_copy", "dma_compute", "dma_transpose"})


def _ti_positions(ctx: Any, ti: TensorIndirection, group: int, role: str) -> tuple[np.ndarray, ...]:
    """Fancy-index tuple into ``ti.base.data`` for the [P, num_elem] dense operand."""
    base = ti.base
    p = base.shape[0]
    offs = read_bits(ti.index).reshape(p, -1)[:, :ti.num_elem]
    a = base.alloc
    row = a.row_bytes or base.data.dtype.itemsize
    p0 = a.partition_offset + ((base.data.__array_interface__["data"][0] - a.base_ptr) // row)
    absolute = p0 + np.arange(p)
    for g in np.unique(absolute // group):
        rows = offs[absolute // group == g]
        if (rows != rows[0]).any():
            raise NkiValidationError(
                f"{role}: partitions {int(g) * group}-{int(g) * group + group - 1} form one tensor-indirection group "
                f"of {group} partitions and must use the same offsets, but their index rows differ",
                operand=role, rule="argument")
    free_shape = base.shape[1:]
    nfree = int(math.prod(free_shape))
    bad = (offs < 0) | (offs >= nfree)
    if bad.any():
        r, c = (int(v[0]) for v in np.nonzero(bad))
        raise NkiValidationError(f"{role}: offset {int(offs[r, c])} (partition {r}, position {c}) is outside the "
                                 f"{nfree} free elements of the data view (undefined on hardware)", operand=role,
                                 rule="out-of-bounds")
    parts = np.broadcast_to(np.arange(p)[:, None], offs.shape)
    return (parts, *np.unravel_index(offs, free_shape))


def _dense_operand(ctx: Any, ti: TensorIndirection, pos: tuple[np.ndarray, ...]) -> NkiTensor:
    base = ti.base
    a = base.alloc
    if a.slot is not None:  # (a tile placed over others: its storage must hold its own values)
        settle(base, reading=False)
    vals = np.ascontiguousarray(base.data[pos])
    row = a.row_bytes or base.data.dtype.itemsize
    p0 = (base.data.__array_interface__["data"][0] - a.base_ptr) // row
    tmp = Allocation(id=a.id, buffer=a.buffer, name=a.name, dtype=a.dtype, shape=vals.shape, storage=vals,
                     site=a.site, program=a.program, address=a.address, partition_offset=a.partition_offset + p0,
                     written=a.written)
    if a.mm_written is not None:
        tmp.mm_written = np.ascontiguousarray(flag_view(base, a.mm_written)[pos])
        tmp.other_written = np.ascontiguousarray(flag_view(base, a.other_written)[pos])
    return NkiTensor(vals, tmp, base.dtype)


def _scatter_back(ti: TensorIndirection, pos: tuple[np.ndarray, ...], dense: NkiTensor) -> None:
    base = ti.base
    a = base.alloc
    base.data[pos] = dense.data
    if a.slot is not None:
        claim_for_write(a, None)
    drop_f32(a)  # the storage changed under any cached fp32 copy
    if dense.alloc.written:
        a.written = True
        if a.elem_written is not None:
            flag_view(base, a.elem_written)[pos] = True
    if a.mm_written is not None:
        flag_view(base, a.mm_written)[pos] = dense.alloc.mm_written
        flag_view(base, a.other_written)[pos] = dense.alloc.other_written


def _is_output(role: str) -> bool:
    return role.startswith("dst") or role.endswith("_dst") or role == "reduce_res"


_SIGNATURES: dict[Any, Any] = {}


def indirect_call(ctx: Any, name: str, engine: str, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Run instruction ``fn`` with its indirect operands resolved.

    ``.indirect()`` operands become dense [P, num_elem] operands gathered before the instruction
    and (outputs) scattered back after it. DMA-style indirect views (``.ap(vector_offset=)``,
    ``vector_select``) go through to the DMA instructions that resolve them and are refused elsewhere."""

    sig = _SIGNATURES.get(fn)
    if sig is None:
        sig = _SIGNATURES[fn] = inspect.signature(fn)
    try:
        bound = sig.bind(ctx, *args, **kwargs)
    except TypeError as e:
        raise NkiValidationError(str(e), rule="argument") from None
    names = list(bound.arguments)
    resolved: list[tuple[str, TensorIndirection, tuple[np.ndarray, ...], NkiTensor]] = []
    for role in names[1:]:
        val = bound.arguments[role]
        items = val if isinstance(val, list | tuple) else (val,)
        for v in items:
            if not isinstance(v, NkiTensor) or v._ap_base is None:
                continue
            ind = v._ap_base
            if isinstance(ind, OutOfBoundsView):
                if name not in DMA_INDIRECT:
                    raise NkiValidationError(f"{role}: {ind.message}", operand=role, rule="out-of-bounds")
                continue
            if isinstance(ind, IndirectAccess):
                if name not in DMA_INDIRECT:
                    raise NkiValidationError(
                        f"{role} is a DMA indirect view (.ap(vector_offset=...) / vector_select); only dma_copy, "
                        "dma_compute and dma_transpose resolve it (compute instructions take .indirect() views on "
                        "trn3)",
                        operand=role, rule="indexing")
                continue
            if engine == "dma" or name in DMA_INDIRECT:
                raise NkiValidationError(f"{role} is a tensor-indirection view (.indirect()); DMA instructions take "
                                         "vector_select / .ap(vector_offset=...) views instead", operand=role,
                                         rule="indexing")
            if not isinstance(val, NkiTensor):
                raise NkiValidationError(f"{role}: .indirect() views are not supported inside a list of operands",
                                         operand=role, rule="indexing")
            eng = bound.arguments.get("engine")
            eng = getattr(eng, "name", eng)
            group = TI_GROUP.get(str(eng), TI_GROUP.get(engine, 16)) if eng not in (None, "unknown", 0) else \
                TI_GROUP.get(engine, 16)
            if name in ("nc_matmul", "nc_matmul_mx"):
                tp = bound.arguments.get("tile_position")
                if tp not in (None, ()) and tuple(int(x) for x in tp) != (0, 0):
                    raise NkiValidationError(f"{role}: with .indirect() operands tile_position must be (0, 0), got "
                                             f"{tuple(tp)}", operand="tile_position", rule="argument")
            pos = _ti_positions(ctx, ind, group, role)
            dense = _dense_operand(ctx, ind, pos)
            bound.arguments[role] = dense
            resolved.append((role, ind, pos, dense))
    if not resolved:
        return fn(*bound.args, **bound.kwargs)
    result = fn(*bound.args, **bound.kwargs)
    for role, ind, pos, dense in resolved:
        if _is_output(role):
            _scatter_back(ind, pos, dense)
    recs = ctx.trace.records if ctx.options.record_trace else []
    if recs and recs[-1].opcode == name:
        recs[-1].attrs["tensor_indirection"] = [r for r, *_ in resolved]
    return result
