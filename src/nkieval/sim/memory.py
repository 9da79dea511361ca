"""Memories (HBM, SBUF, PSUM), allocations and the on-chip allocator with capacity accounting."""

from __future__ import annotations

import bisect
import itertools
import math
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from nkieval.sim.errors import NkiValidationError, warn
from nkieval.sim.trace import AllocationRecord

if TYPE_CHECKING:
    from nkieval.sim.dtypes import DType


class Buffer:
    """A memory region: ``nl.sbuf``, ``nl.psum``, ``nl.hbm`` (= private_hbm), ``nl.shared_hbm``."""

    __slots__ = ("kernel_arg", "kind", "name", "on_chip", "shared")

    def __init__(self, name: str, kind: str, shared: bool = False, kernel_arg: bool = False) -> None:
        self.name = name
        self.kind = kind  # "sbuf" | "psum" | "hbm"
        self.shared = shared
        self.kernel_arg = kernel_arg
        self.on_chip = kind != "hbm"  # (an attribute, not a property: every allocation and operand check reads it)

    def __eq__(self, other: object) -> bool:
        """Identity, except that the kernel arguments' HBM equals both ``nl.hbm`` and ``nl.shared_hbm``: AWS's
        kernels assert either of ``x.buffer == nl.hbm`` / ``x.buffer == nl.shared_hbm`` of an input."""
        if self is other:
            return True
        if not isinstance(other, Buffer):
            return NotImplemented
        return (self.kernel_arg or other.kernel_arg) and self.kind == other.kind == "hbm"

    def __hash__(self) -> int:
        return hash(self.kind)

    def __repr__(self) -> str:
        return self.name

    __str__ = __repr__


SBUF = Buffer("sbuf", "sbuf")
PSUM = Buffer("psum", "psum")
PRIVATE_HBM = Buffer("private_hbm", "hbm")
SHARED_HBM = Buffer("shared_hbm", "hbm", shared=True)
KERNEL_ARG_HBM = Buffer("shared_hbm", "hbm", shared=True, kernel_arg=True)  # where kernel arguments live
BUFFERS = {b.name: b for b in (SBUF, PSUM, PRIVATE_HBM, SHARED_HBM)}
BUFFERS["hbm"] = PRIVATE_HBM


class IdCounter:
    """Allocation ids of a launch, from 1: ``next()`` is ``itertools.count``'s own ``__next__`` (one step under
    the interpreter lock, so each thread gets its own number), without a lock or a Python frame per allocation."""

    def __init__(self) -> None:
        self.next: Callable[[], int] = itertools.count(1).__next__


@dataclass(eq=False)
class Allocation:
    """One allocated tensor's storage. Views (NkiTensor) share it; it is freed when none remain."""

    id: int
    buffer: Buffer
    name: str
    dtype: DType
    shape: tuple[int, ...]
    storage: np.ndarray
    site: str | None
    program: int
    address: int = 0  # on-chip: byte offset within each partition; HBM: 0
    partition_offset: int = 0
    written: bool = False
    is_kernel_arg: bool = False
    fixed_address: bool = False
    # PSUM only: which elements hold a matmul result (accumulation-group state), and which
    # were last written by a non-matmul instruction (memset/copy) — accumulation onto those is UB.
    mm_written: np.ndarray | None = None
    other_written: np.ndarray | None = None
    # Which elements some instruction has written, per element; kept only for a tile that asked for it while
    # nothing had written it yet (track_element_writes: a Beta-1 loop_reduce destination), None for every other.
    elem_written: np.ndarray | None = field(default=None, init=False, repr=False)
    # Trace-operand caches of this allocation's views, keyed by view geometry (see NkiTensor.access).
    views: dict = field(default_factory=dict, init=False, repr=False)
    # SBUF only: fp32 conversions of views read by the engines, by view geometry (isa.core.read_f32),
    # dropped by every write (isa.core.mark_written / note_write); f32_elems counts their elements.
    f32: dict | None = field(default=None, init=False, repr=False)
    f32_elems: int = field(default=0, init=False, repr=False)
    # A tile placed at an explicit address shares its storage with the live tiles of the same geometry placed
    # there (nkieval.sim.placed.PlacedSlot); None for every other tile.
    slot: Any = field(default=None, repr=False)
    # The sentinel this tile's storage still owes (allocated with ``defer_fill``; nkieval.sim.tensor.fill_deferred),
    # None once written or filled.
    unfilled: Any = field(default=None, init=False, repr=False)
    _base_ptr: int | None = field(default=None, init=False, repr=False)
    _row_bytes: int | None = field(default=None, init=False, repr=False)
    # the on-chip allocator holding this tile's block until it is released (track_lifetime), None after
    _allocator: Any = field(default=None, init=False, repr=False)
    __weakref__: object = field(default=None, init=False, repr=False)

    def release(self) -> None:
        """Free this tile's on-chip block, once: when its last view goes (``__del__``, also in a garbage cycle)
        or when a replayed program frees it; nothing for a tile that holds no block."""
        allocator = self._allocator
        if allocator is not None:
            self._allocator = None
            allocator.release(self.id)

    def track_element_writes(self) -> np.ndarray | None:
        """Start (if nothing has written this tile yet) or continue keeping which of its elements are written;
        None where that is no longer knowable: a tile written before it was asked for, or one sharing its
        storage with others placed at its address."""
        if self.elem_written is None and not self.written and self.slot is None:
            self.elem_written = np.zeros(self.shape, dtype=bool)
        return self.elem_written

    # (a finaliser, not a weak reference with a callback per tile: nothing to make or register per allocation)
    __del__ = release

    @property
    def row_bytes(self) -> int:
        """Bytes per partition (on-chip) — the free-dim footprint (fixed, so computed once)."""
        rb = self._row_bytes
        if rb is None:
            # the dtype's bytes, also when a float format is held in fp32 storage (NKI_PRECISE_FP=0)
            rb = self._row_bytes = int(math.prod(self.shape[1:])) * self.dtype.itemsize if self.shape else 0
        return rb

    @property
    def base_ptr(self) -> int:
        ptr = self._base_ptr
        if ptr is None:  # storage is never reallocated, so its address is fixed
            ptr = self._base_ptr = self.storage.__array_interface__["data"][0]
        return ptr


class OnChipAllocator:
    """First-fit byte allocator for one on-chip memory (per NeuronCore program).

    Capacity is accounted per partition: an allocation of a [P, F] tensor occupies
    ``F * itemsize`` bytes (rounded up to the alignment) in partitions
    ``[partition_offset, partition_offset + P)``. The live total per partition is checked
    against the target's size; the peak is kept for reports. Allocations placed at an explicit
    ``address=`` occupy exactly that range: they count once however many live tensors share it
    (kernels that manage addresses themselves re-create tiles over the same banks).
    """

    def __init__(self, kind: str, capacity: int, alignment: int, mode: str, on_event=None,
                 defer: bool = False, *, partitions: int, bank_bytes: int) -> None:
        # defer: judge first-fit tiles after the run by live range (nkieval.sim.capacity), as the
        # compiler allocates; only explicitly placed tiles are checked here.
        self.defer = defer
        self.kind = kind
        self.capacity = capacity
        self.alignment = alignment
        self.mode = mode
        self.partitions = partitions  # the target's (hardware/data)
        self.bank_bytes = bank_bytes  # the PSUM bank an explicit PSUM address must align to
        # a live tile's one record, the trace's AllocationRecord (its block: ``address`` to ``address +
        # bytes_per_partition`` in partitions from ``partition_offset``), with its storage bytes
        self.live: dict[int, tuple[AllocationRecord, int]] = {}
        # (start, end, alloc id) of the live blocks, kept sorted so first-fit is one scan, not a sort per allocation
        self._spans: list[tuple[int, int, int]] = []
        # Live bytes of the first-fit blocks. Every first-fit block starts at partition 0 (only an explicit
        # ``address=`` moves a block's partitions), so partition 0 holds the most of them: their per-partition
        # peak is this plain sum, kept as a Python int instead of a per-partition array updated per tile.
        self.auto_bytes = 0
        self.fixed: dict[int, AllocationRecord] = {}  # live blocks at explicit addresses (counted as a union)
        # how many live fixed blocks cover each (first partition, end partition, start, end) rectangle: the
        # union is taken over distinct rectangles (kernels re-create many tiles over a few slots)
        self._rects: dict[tuple[int, int, int, int], int] = {}
        self.peak_bytes = 0
        self.live_bytes = 0  # storage bytes of the live tiles, all partitions (SimOptions.max_bytes)
        self._on_event = on_event
        self._lock = threading.Lock()
        # storage of the tiles placed at explicit addresses, by geometry (nkieval.sim.placed)
        self.placed: weakref.WeakValueDictionary[Any, Any] = weakref.WeakValueDictionary()

    def allocate(self, alloc: Allocation, address: tuple[int, int] | None, instruction: str) -> None:
        a = self.alignment
        size = max(a, (alloc.row_bytes + a - 1) // a * a)  # the row, rounded up to the alignment
        p0 = 0
        nparts = alloc.shape[0] if alloc.shape else 1
        with self._lock:
            if address is not None:
                p0, start = int(address[0]), int(address[1])
                if p0 < 0 or p0 + nparts > self.partitions:
                    raise NkiValidationError(
                        f"address partition offset {p0} with {nparts} partitions exceeds {self.partitions} partitions",
                        instruction=instruction, operand=alloc.name, rule="out-of-bounds")
                if self.kind == "psum" and start % self.bank_bytes:
                    raise NkiValidationError(
                        f"PSUM address {start} is not aligned to a {self.bank_bytes}-byte bank",
                        instruction=instruction, operand=alloc.name, rule="psum-alignment")
                if start < 0 or (start + alloc.row_bytes > self.capacity and self.mode != "off"):
                    msg = (f"address range [{start}, {start + alloc.row_bytes}) exceeds {self.kind.upper()} "
                           f"size of {self.capacity} bytes per partition")
                    # The direct-allocation guide bounds byte_addr by the partition (less the compiler's
                    # reserve); the Beta-1 simulator does not check placed addresses, so "warn" (its front
                    # end's default) only warns. A negative address is never a place.
                    if start < 0 or self.mode == "error":
                        raise NkiValidationError(msg, instruction=instruction, operand=alloc.name,
                                                 rule=f"{self.kind}-capacity")
                    warn(msg, rule=f"{self.kind}-capacity", instruction=instruction)
            else:
                start = self._first_fit(size)
            # the tile's one record: the trace's (its alloc_seq is set when the context publishes it, after the
            # capacity check below) and this allocator's live block
            rec = AllocationRecord(alloc.id, self.kind, alloc.name, tuple(alloc.shape), alloc.dtype.name, start, p0,
                                   size, alloc.site, alloc.program, 0, None, False, address is not None)
            nbytes = alloc.storage.nbytes
            self.live[alloc.id] = (rec, nbytes)
            self.live_bytes += nbytes
            bisect.insort(self._spans, (start, start + size, alloc.id))
            if address is None:
                self.auto_bytes += size
            else:
                self.fixed[alloc.id] = rec
                rect = (p0, p0 + nparts, start, start + size)
                self._rects[rect] = self._rects.get(rect, 0) + 1
            total = self._total() if self.fixed else self.auto_bytes
            if total > self.peak_bytes:
                self.peak_bytes = total
            alloc.address = start
            alloc.partition_offset = p0
            alloc.fixed_address = address is not None
        if total > self.capacity and self.mode != "off" and not (self.defer and address is None):
            blocks = sorted((b for b, _ in self.live.values()), key=lambda b: -b.bytes_per_partition)
            listing = ", ".join(
                f"{b.name or 'tensor'}{list(b.shape)} {b.dtype} {b.bytes_per_partition} B"
                + (f" @ {b.site}" if b.site else "")
                for b in blocks[:6]
            )
            more = f" and {len(blocks) - 6} more" if len(blocks) > 6 else ""
            msg = (f"live {self.kind.upper()} allocations need {total} bytes per partition, exceeding the "
                   f"{self.capacity}-byte {self.kind.upper()} partition; {len(blocks)} live: {listing}{more}")
            if self.mode == "error":
                self.release(alloc.id)
                raise NkiValidationError(msg, instruction=instruction, operand=alloc.name, rule=f"{self.kind}-capacity")
            warn(msg, rule=f"{self.kind}-capacity", instruction=instruction)
        if self._on_event:
            self._on_event("alloc", rec)

    def _total(self) -> int:
        """Most live bytes in any partition: first-fit blocks summed, explicitly placed blocks as a union."""
        if not self.fixed:
            return self.auto_bytes
        rects = list(self._rects)
        cuts = sorted({0, self.partitions, *(r[0] for r in rects), *(r[1] for r in rects)})
        total = 0
        for lo, hi in itertools.pairwise(cuts):
            spans = sorted((a, e) for p0, p1, a, e in rects if p0 <= lo and hi <= p1)
            union, reach = 0, -1
            for a, e in spans:
                if e > reach:
                    union += e - max(a, reach)
                    reach = e
            total = max(total, self._auto_bytes_at(lo) + union)
        return total

    def _auto_bytes_at(self, partition: int) -> int:
        """Live first-fit bytes in ``partition``; first-fit blocks cover partitions [0, n), so in a range of
        partitions the first holds the most."""
        if partition == 0:  # every first-fit block covers partition 0
            return self.auto_bytes
        return sum(b.bytes_per_partition for b, _ in self.live.values()
                   if not b.fixed_address and b.partition_offset + _parts(b) > partition)

    def _first_fit(self, size: int) -> int:
        pos = 0
        for start, end, _ in self._spans:
            if start - pos >= size:
                return pos
            if end > pos:
                pos = end
        return pos

    def release(self, alloc_id: int) -> None:
        with self._lock:
            live = self.live.pop(alloc_id, None)
            if live is None:
                return
            b, nbytes = live
            self.live_bytes -= nbytes
            start, end = b.address, b.address + b.bytes_per_partition
            spans = self._spans
            del spans[bisect.bisect_left(spans, (start, end, alloc_id))]
            if self.fixed.pop(alloc_id, None) is None:
                self.auto_bytes -= end - start
            else:
                rect = (b.partition_offset, b.partition_offset + _parts(b), start, end)
                n = self._rects[rect] - 1
                if n:
                    self._rects[rect] = n
                else:
                    del self._rects[rect]
        if self._on_event:
            self._on_event("free", b)


def _parts(rec: AllocationRecord) -> int:
    """How many partitions a live block spans (its tile's first dimension)."""
    return rec.shape[0] if rec.shape else 1


def track_lifetime(alloc: Allocation, allocator: OnChipAllocator) -> None:
    """Free ``alloc``'s block when its last view is garbage-collected (or when a replayed program frees it:
    ``alloc.release()``, which runs the same release once).

    The allocation's finaliser frees it (``Allocation.__del__``), which runs when its reference count falls to
    zero and, for an allocation that dies in a garbage cycle, when the collector finds it (PEP 442): the moments
    a weak reference's callback ran, without a weak reference, a release object and a registry entry per tile.
    The allocation holds its allocator, so the block is freed also after the program's context is gone."""
    alloc._allocator = allocator
