"""Tiles placed at one explicit ``address=`` share their storage, as they share memory on the device.

Kernels that manage addresses themselves (the NKI Library's modular allocator) allocate one tile per
logical block — every query group of every section — over a few physical slots, and keep the whole
nested list alive while they walk it. Each tile with its own storage makes the simulator's memory the
logical size (past 5 GB and growing for a 16k-token attention case), not the device's. A tile placed where
a live tile of the same geometry (memory, program, partition offset, address, shape, dtype) already is
therefore shares that tile's storage, and PSUM's per-element accumulation state with it.

Values stay as before for every kernel that reads a tile only while no other tile at its address has
written since — which is what the device requires. The storage holds one tile's values at a time, its
*owner*:

* a fresh tile still reads NaN / 4 sentinels: its first write (or its first read, which already warns
  ``uninitialized``) takes the storage over and refills what it did not write with sentinels;
* a tile read after another tile at its address wrote there reads that tile's values, as on the device,
  with a warning (rule ``uninitialized``), once per tile.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np


class PlacedSlot:
    """One physical slot's storage (and PSUM accumulation state), shared by the tiles placed on it."""

    __slots__ = ("__weakref__", "mm_written", "other_written", "owner", "sentinel", "storage")

    def __init__(self, storage: np.ndarray, sentinel: Any, psum: bool) -> None:
        self.storage = storage
        self.sentinel = sentinel  # the fill value in the storage dtype, or None (fill_uninitialized off)
        self.mm_written = np.zeros(storage.shape, dtype=bool) if psum else None
        self.other_written = np.zeros(storage.shape, dtype=bool) if psum else None
        self.owner: weakref.ref[Any] | None = None  # the allocation whose values the storage holds


def slot_for(slots: weakref.WeakValueDictionary[Any, PlacedSlot], key: Any, make: Any,
             sentinel: Any, psum: bool) -> tuple[PlacedSlot, bool]:
    """The live slot at ``key``, or a new one with ``make()``'s storage; and whether it is new."""
    slot = slots.get(key)
    if slot is not None:
        return slot, False
    slot = PlacedSlot(make(), sentinel, psum)
    slots[key] = slot
    return slot, True


def _owner(slot: PlacedSlot) -> Any:
    ref = slot.owner
    return None if ref is None else ref()


def _take_over(alloc: Any, slot: PlacedSlot) -> None:
    """``alloc`` becomes the slot's owner: the previous owner's fp32 copies no longer match the storage."""
    prev = _owner(slot)
    if prev is not None and prev is not alloc and prev.f32 is not None:
        prev.f32 = None
        prev.f32_elems = 0
    slot.owner = weakref.ref(alloc)


def _refill(slot: PlacedSlot) -> None:
    if slot.sentinel is not None:
        slot.storage[...] = slot.sentinel
    if slot.mm_written is not None:
        slot.mm_written[...] = False
        slot.other_written[...] = False


def claim_for_read(alloc: Any) -> bool:
    """Before ``alloc`` is read. Returns whether another tile at its address wrote since ``alloc`` did (the
    read sees that tile's values, as on the device)."""
    slot = alloc.slot
    if _owner(slot) is alloc:
        return False
    if not alloc.written:  # never written: it reads sentinels, as every fresh tile does
        _refill(slot)
        _take_over(alloc, slot)
        return False
    return True


def claim_for_write(alloc: Any, written: np.ndarray | None) -> None:
    """After a store into ``alloc`` (``written``: the view it stored, or None when the store's extent is not
    a view): on its first store, what the store did not write reads as sentinels again."""
    slot = alloc.slot
    if _owner(slot) is alloc:
        return
    if not alloc.written and written is not None:
        kept = written.copy()
        _refill(slot)
        written[...] = kept
    _take_over(alloc, slot)


def owned(alloc: Any) -> bool:
    """Whether ``alloc``'s storage holds its own values (always, for a tile that shares no slot)."""
    slot = alloc.slot
    return slot is None or _owner(slot) is alloc
