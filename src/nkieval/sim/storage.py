"""A tensor's storage as the instruction framework reads it, below the framework and the indirect views that
both use it: the bit-exact integer read, the per-element flag views, dropping cached fp32 copies, and the
warning for a read before any write."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

import numpy as np

from nkieval.sim.context import dry_run, maybe_current
from nkieval.sim.errors import NkiValidationError
from nkieval.sim.placed import claim_for_read

if TYPE_CHECKING:
    from nkieval.sim.tensor import NkiTensor


_WARNED_UNINIT: weakref.WeakSet[Any] = weakref.WeakSet()
_WARNED_DISPLACED: weakref.WeakSet[Any] = weakref.WeakSet()


def settle(t: NkiTensor, reading: bool = True) -> None:
    """Before ``t`` is accessed: if its storage is shared with the tiles placed at its address, make it hold
    ``t``'s values (nkieval.sim.placed); a read of values another tile placed there wrote since warns."""
    a = t.alloc
    if claim_for_read(a) and reading and a not in _WARNED_DISPLACED:
        _WARNED_DISPLACED.add(a)
        ctx = maybe_current()
        if ctx is not None:
            nm = a.name or f"t{a.id}"
            ctx.warn(f"reads {a.buffer.kind.upper()} tensor '{nm}'{list(a.shape)} after another tensor placed at "
                     f"the same address (partition {a.partition_offset}, byte {a.address}) wrote there: it reads "
                     "that tensor's values, as on hardware", rule="uninitialized",
                     instruction=getattr(ctx, "instruction_name", None))


def _check_initialized(t: NkiTensor) -> None:
    if t._ap_base is not None:  # (an indirect view's own array is a placeholder: its rows are chosen at run time)
        refuse_indirect_read(t)
    a = t.alloc
    if a.slot is not None:
        settle(t)
    if a.buffer.shared:
        ctx = maybe_current()
        if ctx is not None and ctx.launch.races is not None:  # (an LNC-2 pair: nkieval.sim.races)
            ctx.launch.races.check_read(ctx, t)
    if a.written or a.is_kernel_arg or a in _WARNED_UNINIT:
        return
    _WARNED_UNINIT.add(a)
    ctx = maybe_current()
    if ctx is not None:
        nm = a.name or f"t{a.id}"
        ctx.warn(f"reads {a.buffer.kind.upper()} tensor '{nm}'{list(a.shape)} before anything wrote it (garbage on "
                 "hardware; NaN / 4 sentinels in the simulator)", rule="uninitialized",
                 instruction=getattr(ctx, "instruction_name", None))


def refuse_indirect_read(t: NkiTensor) -> None:
    """A read of an indirect view's values by what does not resolve it (its own array is a placeholder): refused,
    with the out-of-bounds error where the view is one (an access pattern that leaves its tensor)."""
    from nkieval.sim.indirect_views import OutOfBoundsView

    ctx = maybe_current()
    name = getattr(ctx, "instruction_name", None) if ctx is not None else None
    if isinstance(t._ap_base, OutOfBoundsView):
        raise NkiValidationError(t._ap_base.message, instruction=name, rule="out-of-bounds")
    raise NkiValidationError(
        f"reads an indirect view of `{t.alloc.name or 'tensor'}` (.ap(vector_offset=...), vector_select or "
        ".indirect()), whose rows are chosen when the instruction runs: only DMA instructions (dma_copy, "
        "dma_compute, dma_transpose) resolve one", instruction=name, rule="indexing")


def read_bits(t: NkiTensor) -> np.ndarray:
    """Integer operands as exact int64 values (bitvec operators treat elements as bit patterns)."""
    _check_initialized(t)
    if dry_run():  # a record-only run: the values are not used
        return np.zeros(t.data.shape, np.int64)
    return np.asarray(t.data).astype(np.int64)


def drop_f32(alloc: Any) -> None:
    """Forget ``alloc``'s cached fp32 copies (:func:`read_f32`): its storage changed."""
    alloc.f32 = None
    alloc.f32_elems = 0


def flag_view(t: NkiTensor, flags: np.ndarray) -> np.ndarray:
    """The view of a per-element flag array (same shape as storage) matching ``t``'s view."""
    data = t.data
    isz = data.dtype.itemsize
    fsz = flags.itemsize
    off = t._byte_offset() // isz
    strides = tuple((s // isz) * fsz for s in data.strides)
    try:
        if flags.flags.c_contiguous:
            return np.ndarray(data.shape, flags.dtype, flags, off * fsz, strides)
    except (ValueError, TypeError):
        pass
    return np.lib.stride_tricks.as_strided(flags.reshape(-1)[off:], shape=data.shape, strides=strides)
