"""Tensors: storage (an Allocation) plus a strided view, with NKI's indexing rules.

An ``NkiTensor`` is a view: ``data`` is a NumPy view into its allocation's storage, so
slicing, ``reshape``, ``permute``, ``broadcast`` and ``.ap()`` all alias memory exactly as
NKI's tensor views do. Element address = ``offset + Σ strides[k]·i_k`` within the storage.
"""

from __future__ import annotations

import functools
import math
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from nkieval.sim import dtypes as dt
from nkieval.sim.context import RECORDING, current, kernel_recorder, location_str, maybe_current
from nkieval.sim.device_values import NkiScalar, VirtualRegister
from nkieval.sim.errors import NkiIndexError, NkiValidationError
from nkieval.sim.indirect_views import IndirectAccess, OutOfBoundsView, TensorIndirection
from nkieval.sim.memory import PSUM, SBUF, SHARED_HBM, Allocation, Buffer, track_lifetime
from nkieval.sim.pages import zero_pages
from nkieval.sim.placed import PlacedSlot, slot_for
from nkieval.sim.storage import read_bits, refuse_indirect_read
from nkieval.sim.trace import OperandAccess


@dataclass(frozen=True)
class DynSlice:
    """``nl.ds(start, size)``: the slice ``start:start+size`` (start may be a loop index).

    ``runtime`` holds a start known only on device (a ``[1, 1]`` integer tensor, a register or an
    ``NkiScalar``, NKI 0.7+); ``start`` is then 0 and the window is placed when the view is made."""

    start: int
    size: int
    step: int = 1
    runtime: Any = None

    def to_slice(self) -> slice:
        return slice(int(self.start), int(self.start) + int(self.size) * self.step, self.step)


def _is_runtime_index(x: Any) -> bool:
    """Whether ``x`` is a value only the device knows: a tensor, a register or an ``NkiScalar``."""
    return isinstance(x, NkiTensor | VirtualRegister | NkiScalar)


def ds(start: Any, size: int, step: int = 1) -> DynSlice:
    if type(start) is int and type(size) is int and type(step) is int:  # the common, compile-time case
        return DynSlice(start, size, step)
    if _is_runtime_index(size):
        raise NkiValidationError(f"nl.ds size must be a compile-time int (the access pattern needs a static element "
                                 f"count), got {type(size).__name__}", instruction="ds", operand="size",
                                 rule="argument")
    if _is_runtime_index(start):
        return DynSlice(0, int(size), int(step), runtime=start)
    return DynSlice(int(start), int(size), int(step))


def as_buffer(buffer: Any) -> Buffer:
    if isinstance(buffer, Buffer):
        return buffer
    if buffer is None:
        return SBUF
    if isinstance(buffer, str):
        raise NkiValidationError(
            f"buffer must be an nl buffer object (nl.sbuf, nl.psum, nl.hbm, nl.shared_hbm), not the string {buffer!r}",
            rule="argument")
    inner = getattr(buffer, "buffer", None)  # Beta-1 allocator objects carry a buffer
    if isinstance(inner, Buffer):
        return inner
    raise NkiValidationError(f"unknown buffer {buffer!r}", rule="argument")


def _shape_tuple(shape: Any) -> tuple[int, ...]:
    # (a tuple, the common case, skips the union isinstance: it is slow)
    if type(shape) is not tuple and isinstance(shape, int | np.integer):
        return (int(shape),)
    try:
        return tuple(map(int, shape))
    except TypeError:
        raise NkiValidationError(f"shape must be a tuple of ints, got {shape!r}", rule="argument") from None


def allocate(shape: Any, dtype: Any, buffer: Any = None, name: str = "", address: Any = None,
             instruction: str = "ndarray", fill: Any = None, defer_fill: bool = False,
             zeroed_pages: bool = False) -> NkiTensor:
    """Allocate a tensor in the current program's memory; contents are sentinels unless ``fill``.

    ``defer_fill``: an on-chip tile's sentinels are written only when something first touches its storage
    (:func:`fill_deferred`), or never when it is first written whole (:func:`cover_deferred_fill`): for tiles a
    front end makes that are often dropped untouched or overwritten at once. The values read are the same.

    ``zeroed_pages`` (an on-chip tile without ``fill`` or ``address``): its storage (and a PSUM tile's flags) are
    zero pages of their own (:func:`nkieval.sim.pages.zero_pages`) and no sentinel is written: for a replay that
    writes each region's sentinels itself before the region is first touched and gives its pages back after
    the last (:mod:`nkieval.sim.program.regions`)."""
    ctx = current()
    shp = _shape_tuple(shape)
    d = dt.to_dtype(dtype)
    buf = as_buffer(buffer)
    t = _allocate(ctx, shp, d, buf, name, address, instruction, fill, defer_fill, zeroed_pages)
    if ctx.recorder is not None:
        ctx.recorder.allocation(t, shp, d, buf, name, address, fill, instruction)
    return t


def check_on_chip_rank(shp: tuple[int, ...], buf: Buffer, name: str, instruction: str) -> None:
    """An SBUF or PSUM tensor has a partition dimension and at least one free dimension (Beta 1 said
    "Insufficient rank!" for a 1-D one)."""
    if buf.on_chip and len(shp) < 2:
        raise NkiValidationError(
            f"{buf.kind.upper()} tensor {name or ''}{list(shp)} must have at least 2 dimensions "
            f"(partition dimension first), e.g. {[*(shp or (1,)), 1]}", instruction=instruction,
            operand=name or None, rule="indexing")


def _allocate(ctx: Any, shp: tuple[int, ...], d: dt.DType, buf: Buffer, name: str, address: Any,
              instruction: str, fill: Any, defer_fill: bool = False, zeroed_pages: bool = False) -> NkiTensor:
    if shp and min(shp) <= 0:
        raise NkiValidationError(f"shape {list(shp)} has a non-positive dimension", instruction=instruction,
                                 operand=name or None, rule="argument")
    if buf.on_chip:
        check_on_chip_rank(shp, buf, name, instruction)
        pmax = ctx.target.partitions
        if shp[0] > pmax:
            raise NkiValidationError(
                f"partition dimension {shp[0]} exceeds maximum {pmax}", instruction=instruction,
                operand=name or "tensor", rule="partition-limit")
    if buf is SHARED_HBM and ctx.launch.num_programs > 1:
        with ctx.launch.lock:
            shared = _shared_hbm(ctx, shp, d, name, instruction)
            if shared is None:
                shared = _new_tensor(ctx, shp, d, buf, name, address, instruction, fill)
                ctx.launch.shared_allocs.append(shared.alloc)
            return shared
    return _new_tensor(ctx, shp, d, buf, name, address, instruction, fill, defer_fill, zeroed_pages)


def _new_tensor(ctx: Any, shp: tuple[int, ...], d: dt.DType, buf: Buffer, name: str, address: Any,
                instruction: str, fill: Any, defer_fill: bool = False, zeroed_pages: bool = False) -> NkiTensor:
    opts = ctx.options
    sd = d.storage if opts.precise_fp else dt.storage_dtype(d, False)  # (dt.storage_dtype without its call)
    deferred = None  # the sentinel this tile's storage still owes (defer_fill)
    if opts.max_bytes is not None:
        _check_memory_budget(ctx, int(math.prod(shp)) * np.dtype(sd).itemsize, buf, instruction)
    slot = None
    if fill is None and address is not None and buf.on_chip:  # (also record-only: the same warnings)
        slot, storage = _placed_storage(ctx, shp, d, sd, buf, address)
    elif fill is None and ctx.dry:  # a record-only run: memory reads as zeros (np.zeros maps pages lazily)
        storage = np.zeros(shp, dtype=sd)
    elif fill is None and zeroed_pages and buf.on_chip:  # (the caller writes the sentinels, region by region)
        storage = zero_pages(shp, sd)
    elif fill is None:
        storage = np.empty(shp, dtype=sd)
        if opts.fill_uninitialized:
            if defer_fill and buf.on_chip:
                deferred = np.nan if d.is_float else 4
            else:
                _fill_sentinel(storage, np.nan if d.is_float else 4)
    else:
        storage = np.empty(shp, dtype=sd)
        storage[...] = dt.cast(np.asarray(fill, dtype=np.float64) if not isinstance(fill, np.ndarray) else fill, d,
                               fp8_overflow=opts.fp8_overflow, precise=opts.precise_fp)
    # (positional: Allocation's fields id, buffer, name, dtype, shape, storage, site, program)
    alloc = Allocation(ctx.launch.ids.next(), buf, name or "", d, shp, storage, location_str(_SITE_DEPTH),
                       ctx.program_id)
    if slot is not None:
        alloc.slot = slot
        if slot.owner is None:  # new storage, filled for this tile
            slot.owner = weakref.ref(alloc)
        alloc.mm_written = slot.mm_written
        alloc.other_written = slot.other_written
    elif buf.kind == "psum" and deferred is None:  # (a deferred tile gets its flags when first touched)
        _psum_flags(alloc, zeroed_pages)
    if buf.on_chip:
        allocator = ctx.sbuf if buf.kind == "sbuf" else ctx.psum
        allocator.allocate(alloc, address, instruction)
        track_lifetime(alloc, allocator)
    else:
        _record_hbm(ctx, alloc)
    if deferred is not None:
        alloc.unfilled = deferred
        ctx.unfilled.add(alloc.id)
    t = NkiTensor(storage, alloc, d)
    t._off = 0
    return t


def _psum_flags(alloc: Allocation, zeroed_pages: bool = False) -> None:
    """A PSUM tile's per-element state: none of it written yet, by a matmul or by another instruction
    (``zeroed_pages``: in zero pages of their own, as the tile's storage)."""
    zeros = zero_pages if zeroed_pages else np.zeros
    alloc.mm_written = zeros(alloc.shape, bool)
    alloc.other_written = zeros(alloc.shape, bool)


def _settle_deferred(alloc: Allocation) -> None:
    """An allocation made with ``defer_fill`` is about to be touched: it owes nothing more afterwards (a PSUM
    tile's flags, which nothing reads before, are made now)."""
    alloc.unfilled = None
    if alloc.buffer.kind == "psum" and alloc.mm_written is None:
        _psum_flags(alloc)
    ctx = maybe_current()
    if ctx is not None:
        ctx.unfilled.discard(alloc.id)


def fill_deferred(alloc: Allocation) -> None:
    """Write the sentinels an allocation made with ``defer_fill`` still owes its storage (before anything reads
    it or writes part of it)."""
    value = alloc.unfilled
    if value is None:
        return
    _settle_deferred(alloc)
    _fill_sentinel(alloc.storage, value)


def fill_around(t: NkiTensor) -> None:
    """``t``'s elements were just stored into a storage whose fill is deferred: fill the rest of it (the
    elements of ``t`` keep the values stored)."""
    a = t.alloc
    if a.unfilled is None:
        return
    if t._byte_offset() == 0 and _covers(t.data, a.storage):
        _settle_deferred(a)
        return
    kept = t.data.copy()
    fill_deferred(a)
    t.data[...] = kept


def cover_deferred_fill(t: NkiTensor) -> None:
    """``t`` is about to be written in every element, without being read: if it covers its allocation's whole
    storage, the deferred sentinels are never needed (the write replaces them all); otherwise they are written
    now, so the elements the write leaves keep their sentinels."""
    a = t.alloc
    if a.unfilled is None:
        return
    if t._byte_offset() == 0 and _covers(t.data, a.storage):
        _settle_deferred(a)
    else:
        fill_deferred(a)


def _covers(view: np.ndarray, storage: np.ndarray) -> bool:
    """Whether ``view``, starting at ``storage``'s first byte, holds each of its elements exactly once: its
    strides, smallest first, are those of a contiguous layout of its extents in some order (a transpose of the
    whole storage covers it; a view with overlapping or gapped strides does not)."""
    if view.size != storage.size or view.dtype != storage.dtype:
        return False
    if view.flags.c_contiguous:  # (the common case: the whole tile as allocated)
        return True
    expected = view.itemsize
    for stride, n in sorted(zip(view.strides, view.shape, strict=True)):
        if n == 1:  # (any stride: never stepped)
            continue
        if stride != expected:
            return False
        expected *= n
    return True


# the first frame above _new_tensor that may be the kernel's: allocate's caller (location_str's frame is 1,
# _new_tensor 2, _allocate 3, allocate 4): the walk to the kernel line skips this module's own frames
_SITE_DEPTH = 5


def _placed_storage(ctx: Any, shp: tuple[int, ...], d: dt.DType, sd: Any, buf: Buffer,
                    address: Any) -> tuple[PlacedSlot | None, np.ndarray]:
    """Storage of a tile placed at ``address``: shared with the live tiles of its geometry there
    (nkieval.sim.placed); a new slot's storage is filled with sentinels."""
    try:
        key = (int(address[0]), int(address[1]), shp, np.dtype(sd), d.name)
    except (TypeError, ValueError, IndexError):  # not a place: the allocator refuses it with its rule
        storage = np.zeros(shp, dtype=sd) if ctx.dry else np.empty(shp, dtype=sd)
        if ctx.options.fill_uninitialized and not ctx.dry:
            _fill_sentinel(storage, np.nan if d.is_float else 4)
        return None, storage
    allocator = ctx.sbuf if buf.kind == "sbuf" else ctx.psum
    fill = ctx.options.fill_uninitialized and not ctx.dry  # (a record-only run's memory reads as zeros)
    sentinel = np.asarray(np.nan if d.is_float else 4).astype(sd) if fill else None

    def make() -> np.ndarray:
        storage = np.zeros(shp, dtype=sd) if ctx.dry else np.empty(shp, dtype=sd)
        if fill:
            _fill_sentinel(storage, np.nan if d.is_float else 4)
        return storage

    slot, _ = slot_for(allocator.placed, key, make, sentinel, buf.kind == "psum")
    return slot, slot.storage


def _check_memory_budget(ctx: Any, nbytes: int, buf: Buffer, instruction: str) -> None:
    """Refuse a tensor that would take the run's live bytes past SimOptions.max_bytes (HBM tensors are held to
    the end of the run; on-chip tiles until freed)."""
    launch = ctx.launch
    live = launch.hbm_bytes + ctx.sbuf.live_bytes + ctx.psum.live_bytes + nbytes
    if live > ctx.options.max_bytes:
        raise NkiValidationError(
            f"a new {buf.kind.upper()} tensor of {nbytes} bytes takes the run's live tensors to {live} bytes, past its "
            f"{ctx.options.max_bytes}-byte budget (SimOptions.max_bytes)", instruction=instruction,
            rule="memory-budget")
    if not buf.on_chip:
        launch.hbm_bytes += nbytes


_UINT_OF_SIZE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def write_sentinels(region: np.ndarray, d: dt.DType) -> None:
    """Write into ``region`` (of a tile allocated with ``zeroed_pages``) the sentinels allocating it would have
    written, where the running kernel's options ask for them."""
    ctx = maybe_current()
    if ctx is None or ctx.options.fill_uninitialized:
        _fill_sentinel(region, np.nan if d.is_float else 4)


def _fill_sentinel(storage: np.ndarray, value: Any) -> None:
    """``storage[...] = value``, through an unsigned-integer view of the value's bit pattern: ~3x
    faster than assigning a Python float to an ml_dtypes array, and bit-identical. The pattern is
    worked out once per (dtype, sentinel): every fresh tile is filled."""
    sd = storage.dtype
    key = (sd, value) if value == value else (sd, "nan")  # (NaN is not equal to itself: it cannot key a dict)
    word = _SENTINEL_WORDS.get(key)
    if word is None:
        v = np.asarray(value).astype(sd)
        u = _UINT_OF_SIZE.get(sd.itemsize)
        word = _SENTINEL_WORDS[key] = (v, None if u is None else (u, v.reshape(1).view(u)[0]))
    v, bits = word
    if bits is None or not storage.flags.c_contiguous:
        storage[...] = v
    else:
        storage.view(bits[0]).fill(bits[1])


_SENTINEL_WORDS: dict[Any, Any] = {}  # (storage dtype, sentinel) -> (value, (uint view dtype, bit pattern))


def _shared_hbm(ctx: Any, shp: tuple[int, ...], d: dt.DType, name: str, instruction: str) -> NkiTensor | None:
    """The k-th shared_hbm allocation of every program is one tensor (LNC / SPMD programs share it).

    Called with the launch lock held."""
    k = ctx.shared_count
    ctx.shared_count += 1
    lst = ctx.launch.shared_allocs
    if k < len(lst):
        a = lst[k]
        if a.shape != shp or a.dtype != d:
            raise NkiValidationError(
                f"programs disagree on shared_hbm tensor #{k}: {list(a.shape)} {a.dtype} vs {list(shp)} {d}",
                instruction=instruction, operand=name or None, rule="kernel")
        return NkiTensor(a.storage, a, d)
    if k > len(lst):
        raise NkiValidationError("shared_hbm allocations out of order between programs", instruction=instruction,
                                 rule="kernel")
    return None


def _record_hbm(ctx: Any, alloc: Allocation) -> None:
    from nkieval.sim.trace import AllocationRecord

    tr = ctx.trace
    with tr._lock:
        tr.allocations[alloc.id] = AllocationRecord(
            id=alloc.id, buffer="hbm", name=alloc.name, shape=alloc.shape, dtype=alloc.dtype.name, address=0,
            partition_offset=0, bytes_per_partition=alloc.storage.nbytes, site=alloc.site, program=ctx.program_id,
            alloc_seq=tr.next_seq(), kernel_arg=alloc.is_kernel_arg)


def wrap_hbm(array: np.ndarray, name: str, dtype: Any = None, buffer: Buffer = SHARED_HBM) -> NkiTensor:
    """Wrap a host array (kernel argument) as an HBM tensor; its storage is a private copy."""
    ctx = current()
    d = dt.to_dtype(dtype if dtype is not None else array.dtype)
    sd = dt.storage_dtype(d, ctx.options.precise_fp)
    if ctx.dry:  # a record-only run: the kernel argument's values are never read
        storage = np.zeros(np.shape(array), dtype=sd)
    else:
        storage = np.array(array, dtype=sd, copy=True, order="C")
    if storage.ndim == 0:
        storage = storage.reshape(1)
    alloc = Allocation(id=ctx.launch.ids.next(), buffer=buffer, name=name, dtype=d, shape=tuple(storage.shape),
                       storage=storage, site=None, program=ctx.program_id, is_kernel_arg=True)
    _record_hbm(ctx, alloc)
    return NkiTensor(storage, alloc, d)


def _recorded_view(method: Any) -> Any:
    """While a kernel is recorded, a view placed by a runtime value (or derived from one) keeps how it was
    made, so the judge's replay makes it again with the device's value (``nkieval.sim.program``)."""
    name = method.__name__

    @functools.wraps(method)
    def wrapper(self: NkiTensor, *args: Any, **kwargs: Any) -> Any:
        if self._ap_base is not None:
            _refuse_view_of_indirect(self, name)
        out = method(self, *args, **kwargs)
        if RECORDING[0]:
            _note_recipe(self, out, name, args, kwargs)
        return out

    return wrapper


_STATIC = frozenset({int, float, str, slice, bool, type(None), type(Ellipsis)})


def _is_runtime(x: Any) -> bool:
    """Whether ``x`` (an index, offset or key) holds a value only the device knows."""
    t = type(x)
    if t in _STATIC:
        return False
    if t is tuple or t is list:  # (a loop, not any() over a generator: this runs for every view a kernel makes)
        for v in x:
            if type(v) not in _STATIC and _is_runtime(v):
                return True
        return False
    if t is DynSlice:
        return x.runtime is not None
    if t is dict:
        return any(_is_runtime(v) for v in x.values())
    return _is_runtime_index(x)


_UNSET: Any = object()

#: How many views have been given a recipe in this process (by ``_note_recipe``, the one place that sets one): while
#: none has, no view has one, and the recorder's hooks need not read the unset slot (an AttributeError each time).
RECIPES = [0]
#: How many views have been placed by a runtime index in this process (the two places that set ``_dyn``): while none
#: has, no view has one, and hot paths need not read the unset slot.
DYN_VIEWS = [0]


def _note_recipe(base: NkiTensor, out: Any, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    # (every view a recorded kernel makes comes here, and almost none is placed by a runtime value: the tests that
    # rule a view out cheaply come first, the recorder's lookup last)
    if out is base or not isinstance(out, NkiTensor):
        return
    if (out._ap_base is None and (not RECIPES[0] or getattr(base, "_recipe", None) is None)
            and (not DYN_VIEWS[0] or getattr(out, "_dyn", None) is None) and not _is_runtime(args)
            and not (kwargs and _is_runtime(kwargs))):
        return
    if kernel_recorder() is not None:
        RECIPES[0] += 1
        out._recipe = (method, base, args, kwargs)


def _refuse_view_of_indirect(t: NkiTensor, how: str) -> None:
    """A view of an indirect view would lose what makes it one (its rows are chosen when the instruction runs) and
    read the placeholder the indirect view holds instead: refused."""
    raise NkiValidationError(
        f"`{how}` of an indirect view of `{t.alloc.name or 'tensor'}` (.ap(vector_offset=...), vector_select, "
        ".indirect() or a run-time scalar_offset): an indirect view is used as it is made; put the selection in its "
        "access pattern (or index the base tensor before making it)", instruction=how, rule="indexing")


def _refuse_host_read(t: NkiTensor, how: str) -> None:
    if kernel_recorder() is None:
        return
    raise NkiValidationError(
        f"{how} reads the values of `{t.alloc.name or 'tensor'}` {list(t.shape)} in Python: tensor values exist "
        "only on the device. A kernel is traced from its inputs' shapes and dtypes alone and its instructions "
        "run later on the data; compute with NKI instructions instead", rule="trace-time-value",
        location=location_str())


class NkiTensor:
    """A view of an allocation. Attributes mirror NKI's ``NkiTensor``."""

    # ``_dyn`` (set only on views made by a runtime-index select) and ``_recipe`` (set only while a kernel is
    # recorded as a program, on views placed by a runtime value) are deliberately left unset by __init__; read
    # them with getattr(t, "_dyn", None).
    __slots__ = ("_acc", "_ap_base", "_dyn", "_dyn_ds", "_off", "_recipe", "_subs", "alloc", "data", "dtype")
    api_generation = "current"  # the front end whose rules apply (a Beta-1 tensor says "beta1")
    __array_priority__ = 1000  # make numpy defer to our operators (Beta-1 front end overloads them)

    def __init__(self, data: np.ndarray, alloc: Allocation, dtype: dt.DType) -> None:
        self.data = data
        self.alloc = alloc
        self.dtype = dtype
        self._ap_base = None
        self._acc: dict[Any, Any] | None = None
        self._off: int | None = None  # byte offset of ``data`` in the storage (computed lazily)
        self._subs: dict[Any, Any] | None = None  # fast-path sub-views by key (see _index)

    def _byte_offset(self) -> int:
        """Byte offset of this view's first element within its allocation's storage.

        Propagated by indexing; otherwise read once from NumPy (``__array_interface__`` is slow)."""
        off = self._off
        if off is None:
            off = self._off = self.data.__array_interface__["data"][0] - self.alloc.base_ptr
        return off

    # -- attributes -------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self.data.shape

    @property
    def ndim(self) -> int:
        return self.data.ndim

    @property
    def size(self) -> int:
        return int(self.data.size)

    @property
    def buffer(self) -> Buffer:
        return self.alloc.buffer

    @property
    def name(self) -> str:
        return self.alloc.name

    @property
    def itemsize(self) -> int:
        return self.data.dtype.itemsize

    @property
    def strides(self) -> tuple[int, ...]:
        """Strides in elements of the storage."""
        isz = self.data.dtype.itemsize
        return tuple(s // isz for s in self.data.strides)

    @property
    def offset(self) -> int:
        """Element offset of this view within its storage."""
        return self._byte_offset() // self.data.dtype.itemsize

    @property
    def is_on_chip(self) -> bool:
        return self.alloc.buffer.on_chip

    def __repr__(self) -> str:
        nm = self.alloc.name or f"t{self.alloc.id}"
        return f"NkiTensor({nm}{list(self.shape)}, {self.dtype}, {self.buffer})"

    def __len__(self) -> int:
        return self.shape[0]

    def __bool__(self) -> bool:
        # A tensor object is truthy (``if params.bias:`` tests that an optional tensor was given, as NKI Library
        # kernels do); the current API has no tensor comparisons whose truth could be data-dependent control flow.
        # The Beta-1 front end, whose tiles have comparison operators, refuses bool() on its tiles.
        return True

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        # Only used by host-side code (tests, device_print); engines read .data directly.
        if RECORDING[0]:
            _refuse_host_read(self, "np.asarray()")
        if self._ap_base is not None:
            refuse_indirect_read(self)
        if self.alloc.unfilled is not None:
            fill_deferred(self.alloc)
        arr = self.data.astype(np.float32) if self.dtype.is_float else self.data
        return arr.astype(dtype) if dtype is not None else arr

    def numpy(self) -> np.ndarray:
        if RECORDING[0]:
            _refuse_host_read(self, ".numpy()")
        if self._ap_base is not None:
            refuse_indirect_read(self)
        if self.alloc.unfilled is not None:
            fill_deferred(self.alloc)
        return np.array(self.data, copy=True)

    # -- indexing ---------------------------------------------------------------
    def __getitem__(self, key: Any) -> NkiTensor:
        if self._ap_base is not None:
            _refuse_view_of_indirect(self, "__getitem__")
        sig = key_signature(key)
        if sig is not None:
            # (ints, int slices and int nl.ds, what kernels write in loops: the memoised view, a fresh tensor placed
            # by no runtime value, which a recording notes only when its base has a recipe)
            out = self._index(key, sig)
            if RECIPES[0] and RECORDING[0]:
                _note_recipe(self, out, "__getitem__", (key,), {})
            return out
        if isinstance(key, DynSlice | tuple) and any(
                isinstance(k, DynSlice) and k.runtime is not None for k in (key if isinstance(key, tuple) else (key,))):
            out = self._runtime_window(key)
        else:
            out = self._index(key, None)
        if RECORDING[0]:
            _note_recipe(self, out, "__getitem__", (key,), {})
        return out

    def _oob(self, dim: int, lo: int, hi: int) -> NkiValidationError:
        nm = self.alloc.name or "tensor"
        return NkiValidationError(
            f"Out-of-bound access for tensor `{nm}` on dimension {dim}: index range [{lo}, {hi}] exceed "
            f"dimension size of {self.shape[dim]}", operand=nm, rule="out-of-bounds")

    def _runtime_window(self, key: Any) -> NkiTensor:
        """``t[..., nl.ds(runtime_start, size), ...]``: the window placed at the start read now (on device:
        at run time). Like a runtime ``select``: once per view, never on an on-chip partition dim."""
        keys = key if isinstance(key, tuple) else (key,)
        if any(k is Ellipsis for k in keys):
            raise NkiValidationError("nl.ds with a runtime start cannot be combined with ...", instruction="ds",
                                     rule="indexing")
        if getattr(self, "_dyn", None) is not None or self._ap_base is not None:
            raise NkiValidationError("a view can take a runtime index only once (and not an indirect view)",
                                     instruction="ds", operand="start", rule="indexing")
        dims = [d for d, k in enumerate(keys) if isinstance(k, DynSlice) and k.runtime is not None]
        if len(dims) > 1:
            raise NkiValidationError("only one nl.ds with a runtime start per index expression", instruction="ds",
                                     operand="start", rule="indexing")
        d = dims[0]
        k = keys[d]
        if self.is_on_chip and d == 0:
            raise NkiValidationError("nl.ds with a runtime start on the partition dimension of an on-chip tensor is "
                                     "not allowed", instruction="ds", operand="start", rule="indexing")
        if d >= self.ndim:
            raise NkiValidationError(f"too many indices ({len(keys)}) for tensor of rank {self.ndim}",
                                     rule="indexing")
        i = _runtime_index(k.runtime, "ds", self.is_on_chip)
        n = self.shape[d]
        last = i + (k.size - 1) * k.step
        if k.size <= 0 or k.step <= 0 or i < 0 or last >= n:
            nm = self.alloc.name or "tensor"
            raise NkiValidationError(f"runtime window nl.ds({i}, {k.size}) covers [{i}, {last}], outside dimension "
                                     f"{d} of size {n} of `{nm}`", instruction="ds", operand="start",
                                     rule="out-of-bounds")
        fixed = list(keys)
        fixed[d] = slice(i, i + k.size * k.step, k.step)
        out = self._index(tuple(fixed))
        DYN_VIEWS[0] += 1
        out._dyn = d
        out._dyn_ds = True
        return out

    def _index(self, key: Any, sig: Any = _UNSET) -> NkiTensor:
        # Fast path: keys made of plain ints, int slices and nl.ds with int fields (what kernels
        # write in loops) have their normalisation memoised per (shape, on-chip, key). ``sig``: the key's
        # key_signature, where the caller has it.
        if sig is _UNSET:
            sig = key_signature(key)
        if sig is not None:
            subs = self._subs
            if subs is None:
                subs = self._subs = {}
            else:
                hit = subs.get(sig)
                if hit is not None:  # this key was used on this view before: a new view of the same data
                    t = NkiTensor(hit[0], self.alloc, self.dtype)
                    t._off = hit[1]
                    t._acc = hit[2]
                    return t
            data = self.data
            alloc = self.alloc
            ck = (data.shape, alloc.buffer.kind != "hbm", sig)
            hit = _INDEX_CACHE.get(ck)
            if hit is None:
                norm = self._normalize(key)
                hit = (norm, _starts(norm))
                if len(_INDEX_CACHE) >= _INDEX_CACHE_MAX:
                    _INDEX_CACHE.clear()
                _INDEX_CACHE[ck] = hit
            norm, starts = hit
            t = NkiTensor(data[norm], alloc, self.dtype)
            if starts is not None:
                off = self._off
                if off is None:
                    off = self._byte_offset()
                for s_, st in zip(starts, data.strides):
                    off += s_ * st
                t._off = off
                if len(subs) >= _SUBS_MAX:
                    subs.clear()
                subs[sig] = (t.data, off, t._view_cache())
            return t
        return NkiTensor(self.data[self._normalize(key)], self.alloc, self.dtype)

    def _normalize(self, key: Any) -> tuple[Any, ...]:
        """The NumPy index for an NKI key (bounds and NKI's rank rules checked)."""
        if not isinstance(key, tuple):
            key = (key,)
        if any(k is Ellipsis for k in key):
            i = next(j for j, k in enumerate(key) if k is Ellipsis)
            fill = self.ndim - (len(key) - 1)
            key = key[:i] + (slice(None),) * fill + key[i + 1:]
        if len(key) > self.ndim:
            raise NkiValidationError(f"too many indices ({len(key)}) for tensor of rank {self.ndim}",
                                     operand=self.alloc.name or None, rule="indexing")
        on_chip = self.is_on_chip
        norm: list[Any] = []
        ints_free = 0
        for dim, k in enumerate(key):
            n = self.shape[dim]
            if isinstance(k, DynSlice):
                k = k.to_slice()
            if isinstance(k, slice):
                start, stop, step = k.start, k.stop, k.step
                step = 1 if step is None else int(step)
                if step == 0:
                    raise NkiValidationError("slice step cannot be zero", rule="indexing")
                if step > 0:
                    start = 0 if start is None else int(start)
                    stop = n if stop is None else int(stop)
                    if start < 0:
                        start += n
                    if stop < 0:
                        stop += n
                    if start < 0 or stop > n or start > stop:
                        raise self._oob(dim, start, stop - 1)
                    if start == stop and on_chip:
                        # HBM views may be empty (a shard with no rows, as in nl.ds(off, 0)); an
                        # instruction refuses them as operands (nkieval.sim.isa.core.tensor_arg).
                        raise NkiValidationError(f"empty slice {start}:{stop} on dimension {dim}",
                                                 operand=self.alloc.name or None, rule="indexing")
                    norm.append(slice(start, stop, step))
                else:
                    norm.append(slice(start, stop, step))
            elif isinstance(k, int | np.integer):
                i = int(k)
                if i < 0:
                    i += n
                if not 0 <= i < n:
                    raise self._oob(dim, int(k), int(k))
                norm.append(i)
                if dim > 0:
                    ints_free += 1
            elif isinstance(k, NkiTensor):
                raise NkiValidationError(
                    "indexing with a tensor is only supported through .ap(vector_offset=...) / "
                    "select(dim, tensor) in the current API", operand=self.alloc.name or None, rule="indexing")
            else:
                raise NkiValidationError(f"unsupported index {k!r}", operand=self.alloc.name or None, rule="indexing")
        if on_chip:
            # partition int keeps a size-1 dim; free ints drop dims while the result stays >= 2-D
            remaining = self.ndim
            out: list[Any] = []
            for dim, k in enumerate(norm):
                if isinstance(k, int):
                    if dim == 0:
                        out.append(slice(k, k + 1))
                    elif remaining - 1 >= 2:
                        out.append(k)
                        remaining -= 1
                    else:
                        out.append(slice(k, k + 1))
                else:
                    out.append(k)
            norm = out
        if len(norm) == self.ndim and all(isinstance(k, int) for k in norm):
            # every dimension indexed by an integer: keep a 1-element *view* (not a NumPy scalar copy)
            last = norm[-1]
            norm[-1] = slice(last, last + 1)
        return tuple(norm)

    # -- view methods -------------------------------------------------------------
    def _new(self, data: np.ndarray) -> NkiTensor:
        return NkiTensor(data, self.alloc, self.dtype)

    @_recorded_view
    def slice(self, dim: int, start: int, end: int, step: int = 1) -> NkiTensor:
        key = [slice(None)] * self.ndim
        key[dim] = slice(start, end, step)
        return self._index(tuple(key))

    @_recorded_view
    def select(self, dim: int, index: Any) -> NkiTensor:
        """Drop dimension ``dim`` at ``index``: an int, or (a runtime index) a [1, 1] integer tensor
        or a register — the latter once per view, and never on dim 0 of an on-chip tensor."""
        if not isinstance(index, int | np.integer):
            return dynamic_select(self, dim, index)
        if self.is_on_chip and dim == 0:
            raise NkiValidationError("select on the partition dimension of an on-chip tensor is not allowed",
                                     rule="indexing")
        key: list[Any] = [slice(None)] * self.ndim
        key[dim] = int(index)
        n = self.shape[dim]
        if not 0 <= int(index) < n:
            raise self._oob(dim, int(index), int(index))
        if self.is_on_chip and self.ndim == 2:  # on-chip tensors stay 2-D
            key[dim] = slice(int(index), int(index) + 1)
        return self._new(self.data[tuple(key)])

    @_recorded_view
    def reshape(self, *shape: Any) -> NkiTensor:
        shp = _shape_tuple(shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape)
        if -1 in shp:
            known = math.prod(s for s in shp if s != -1)
            shp = tuple(self.size // known if s == -1 else s for s in shp)
        if math.prod(shp) != self.size:
            raise NkiValidationError(f"cannot reshape {list(self.shape)} ({self.size} elements) to {list(shp)}",
                                     operand=self.alloc.name or None, rule="indexing")
        if self.is_on_chip and shp[0] != self.shape[0]:
            raise NkiValidationError(
                f"reshape of an on-chip tensor cannot change the partition dimension ({self.shape[0]} -> {shp[0]})",
                operand=self.alloc.name or None, rule="indexing")
        try:
            v = self.data.view()
            v.shape = shp  # raises if a copy would be needed (non-contiguous)
        except AttributeError:
            raise NkiValidationError(f"reshape of non-contiguous view {list(self.shape)} to {list(shp)} needs a copy",
                                     operand=self.alloc.name or None, rule="indexing") from None
        t = self._new(v)
        t._off = self._off  # (the same first element: no need to ask NumPy, whose __array_interface__ is slow)
        return t

    @_recorded_view
    def view(self, dtype: Any) -> NkiTensor:
        d = dt.to_dtype(dtype)
        if self.data.strides[-1] != self.data.dtype.itemsize:
            raise NkiValidationError("view(dtype) needs a contiguous last dimension", rule="indexing")
        if self.data.dtype != self.dtype.storage:  # all-fp32 storage (NKI_PRECISE_FP=0): reinterpret the
            if d == self.dtype:  # logical bits, not the fp32 storage's
                return NkiTensor(self.data, self.alloc, d)
            return self._bit_view_copy(d)
        try:
            v = self.data.view(d.storage)
        except ValueError as e:
            raise NkiValidationError(f"cannot view {list(self.shape)} {self.dtype} as {d}: {e}", rule="indexing") from None
        return NkiTensor(v, self.alloc, d)

    reinterpret_cast = view

    def _bit_view_copy(self, d: dt.DType) -> NkiTensor:
        """``view(d)`` of a tensor held in fp32 storage for a narrower float format: the bit reinterpretation
        of its logical values, as a read-only copy (writing through it would not reach the tensor)."""
        try:
            v = np.ascontiguousarray(self.data.astype(self.dtype.storage)).view(d.storage)
        except ValueError as e:
            raise NkiValidationError(f"cannot view {list(self.shape)} {self.dtype} as {d}: {e}", rule="indexing") from None
        if v.dtype != dt.storage_dtype(d, precise=False):
            v = v.astype(dt.storage_dtype(d, precise=False))
        v.flags.writeable = False
        out = NkiTensor(v, self.alloc, d)
        logical_off = self._byte_offset() // self.data.dtype.itemsize * self.dtype.itemsize
        out._off = logical_off // d.itemsize * v.dtype.itemsize  # the trace places it where the viewed bytes are
        return out

    @_recorded_view
    def permute(self, dims: Any) -> NkiTensor:
        dims = tuple(int(d) for d in dims)
        if sorted(dims) != list(range(self.ndim)):
            raise NkiValidationError(f"permute dims {dims} is not a permutation of {self.ndim} dims", rule="indexing")
        if self.is_on_chip and dims[0] != 0:
            raise NkiValidationError("the partition dimension of an on-chip tensor cannot be permuted", rule="indexing")
        return self._new(self.data.transpose(dims))

    @_recorded_view
    def broadcast(self, dim: int, size: int) -> NkiTensor:
        if self.shape[dim] != 1:
            raise NkiValidationError(f"broadcast needs size 1 on dimension {dim}, got {self.shape[dim]}", rule="indexing")
        if self.is_on_chip and dim == 0:
            raise NkiValidationError("the partition dimension of an on-chip tensor cannot be broadcast", rule="indexing")
        shp = list(self.shape)
        shp[dim] = int(size)
        st = list(self.data.strides)
        st[dim] = 0
        return self._new(np.lib.stride_tricks.as_strided(self.data, shape=shp, strides=st))

    @_recorded_view
    def broadcast_to(self, shape: Any) -> NkiTensor:
        out = self
        for d_, (a, b) in enumerate(zip(self.shape, _shape_tuple(shape), strict=True)):
            if a != b:
                out = out.broadcast(d_, b)
        return out

    @_recorded_view
    def expand_dim(self, dim: int) -> NkiTensor:
        return self._new(np.expand_dims(self.data, dim))

    expand_dims = expand_dim

    @_recorded_view
    def squeeze_dim(self, dim: int) -> NkiTensor:
        if self.shape[dim] != 1:
            raise NkiValidationError(f"squeeze_dim needs size 1 on dimension {dim}, got {self.shape[dim]}", rule="indexing")
        return self._new(np.squeeze(self.data, dim))

    @_recorded_view
    def reshape_dim(self, dim: int, shape: Any) -> NkiTensor:
        """Split dimension ``dim`` into ``shape`` (a view: the split dims get derived strides).

        The partition dimension of an on-chip tensor cannot be split."""
        d = int(dim) % self.ndim
        parts = _shape_tuple(shape)
        n = self.shape[d]
        if -1 in parts:
            known = math.prod(s for s in parts if s != -1)
            parts = tuple(n // known if s == -1 else s for s in parts)
        if math.prod(parts) != n:
            raise NkiValidationError(f"reshape_dim: {list(parts)} does not have the {n} elements of dimension {d}",
                                     operand=self.alloc.name or None, rule="indexing")
        if self.is_on_chip and d == 0 and len(parts) != 1:
            raise NkiValidationError("the partition dimension of an on-chip tensor cannot be split", rule="indexing")
        st = self.data.strides[d]
        new_strides = []
        for k in range(len(parts)):
            new_strides.append(st * math.prod(parts[k + 1:]))
        shp = self.shape[:d] + parts + self.shape[d + 1:]
        strides = self.data.strides[:d] + tuple(new_strides) + self.data.strides[d + 1:]
        return self._new(np.lib.stride_tricks.as_strided(self.data, shape=shp, strides=strides))

    @_recorded_view
    def flatten_dims(self, start: int, end: int) -> NkiTensor:
        """Merge dimensions ``start``..``end`` (inclusive) into one; they must be mergeable as a
        view (each dim's stride equals the next one's stride times its size)."""
        a, b = int(start) % self.ndim, int(end) % self.ndim
        if a > b:
            raise NkiValidationError(f"flatten_dims: start {a} is after end {b}", rule="indexing")
        if self.is_on_chip and a == 0 and b > 0:
            raise NkiValidationError("the partition dimension of an on-chip tensor cannot be merged with free "
                                     "dimensions", rule="indexing")
        st, sh = self.data.strides, self.shape
        for k in range(a, b):
            if sh[k + 1] != 1 and sh[k] != 1 and st[k] != st[k + 1] * sh[k + 1]:
                raise NkiValidationError(f"flatten_dims({a}, {b}) of a view with shape {list(sh)} and strides "
                                         f"{list(self.strides)} needs a copy (dimensions {k} and {k + 1} are not "
                                         "contiguous)", operand=self.alloc.name or None, rule="indexing")
        merged = math.prod(sh[a:b + 1])
        inner = [st[k] for k in range(a, b + 1) if sh[k] != 1]
        stride = inner[-1] if inner else st[b]
        shp = (*sh[:a], merged, *sh[b + 1:])
        strides = (*st[:a], stride, *st[b + 1:])
        return self._new(np.lib.stride_tricks.as_strided(self.data, shape=shp, strides=strides))

    @_recorded_view
    def rearrange(self, pattern: str, **sizes: int) -> NkiTensor:
        """einops-style view, e.g. ``t.rearrange("p (a b) -> p b a", a=4)``: split groups on the
        left, permute, merge groups on the right. Only views (no copies) are possible."""
        from nkieval.sim.rearrange import rearrange_view

        return rearrange_view(self, pattern, sizes)

    def is_contiguous(self) -> bool:
        return bool(self.data.flags["C_CONTIGUOUS"])

    @_recorded_view
    def ap(self, pattern: Any, offset: int | None = None, scalar_offset: Any = None, vector_offset: Any = None,
           indirect_dim: int = 0, dtype: Any = None) -> NkiTensor:
        """An access pattern over the underlying storage: ``[[stride, count], ...]`` in elements.

        For on-chip tensors the first pair is the partition dimension (stride = storage free size).
        ``vector_offset`` (an SBUF [P, 1] index tensor) makes an indirect view resolved by DMA.
        """
        return make_ap(self, pattern, offset, scalar_offset, vector_offset, indirect_dim, dtype)

    def get_pattern(self) -> list[list[int]]:
        """The view's access pattern ``[[stride, count], ...]`` in elements (dim 0 first)."""
        ind = self._ap_base
        if ind is not None and hasattr(ind, "pattern"):
            return [list(p) for p in ind.pattern]
        return [[s, n] for s, n in zip(self.strides, self.shape)]

    def is_indirect(self) -> bool:
        """Whether the view is resolved at run time (vector_select, .ap(vector_offset=), .indirect(), and a window
        ``nl.ds(runtime_start, size)``)."""
        return self._ap_base is not None or getattr(self, "_dyn_ds", False)

    @_recorded_view
    def vector_select(self, dim: int, offsets: Any) -> NkiTensor:
        """Rows ``self[offsets[r]]`` (dim 0 of an HBM tensor), gathered or scattered by DMA at run time."""
        return vector_select(self, dim, offsets)

    @_recorded_view
    def indirect(self, index: Any, num_elem: int | None = None) -> NkiTensor:
        """Tensor indirection (trn3): a [P, num_elem] operand of a compute instruction made of the
        columns at the uint16 offsets in ``index`` (one offset list per partition group)."""
        return make_indirect(self, index, num_elem)

    # -- operand description for the trace ----------------------------------------
    def access(self, role: str, mode: str) -> OperandAccess:
        """This view as a trace operand. Cached: a view's geometry never changes, and trace
        records treat operands as immutable, so one ``OperandAccess`` per (role, mode) is shared."""
        cache = self._acc
        if cache is None:
            cache = self._acc = self._view_cache()
        hit = cache.get((role, mode))
        if hit is not None:
            return hit
        geo = cache.get(None)
        if geo is None:
            geo = cache[None] = self._geometry(cache["view"])
        acc = OperandAccess(role, mode, *geo)
        cache[(role, mode)] = acc
        return acc

    def _view_cache(self) -> dict[Any, Any]:
        """The operand cache shared by every view of this allocation with the same geometry
        (byte offset, shape, strides, dtype): fresh slice views such as ``t[0:rows]`` made on
        every loop iteration reuse the geometry and ``OperandAccess`` objects of the first."""
        data = self.data
        views = self.alloc.views
        key = (self._byte_offset(), data.shape, data.strides, self.dtype.name, data.dtype.itemsize)
        cache = views.get(key)
        if cache is None:
            if len(views) >= _VIEW_CACHE_MAX:
                views.clear()
            cache = views[key] = {"view": key}  # (its key, which _geometry's key extends)
        return cache

    def _geometry(self, view_key: tuple[Any, ...]) -> tuple[Any, ...]:
        """The trace fields that depend only on the view (everything but role and mode); ``view_key``: the view's
        key in its allocation's operand caches (byte offset, shape, strides, dtype, storage item size).

        Tiles allocated afresh on every loop iteration land at the same address with the same views, so
        the layout arithmetic is shared across allocations by layout (``_GEOMETRY_CACHE``); only the
        allocation's id and name are its own."""
        a = self.alloc
        kind = a.buffer.kind
        key = (kind, a.address, a.partition_offset, a.row_bytes, view_key)
        hit = _GEOMETRY_CACHE.get(key)
        if hit is None:
            hit = self._layout()
            if len(_GEOMETRY_CACHE) >= _GEOMETRY_CACHE_MAX:
                _GEOMETRY_CACHE.clear()
            _GEOMETRY_CACHE[key] = hit
        shape, dtype_name, pstart, nparts, lo, hi, nbytes, run, pattern = hit
        return (kind, a.id, shape, dtype_name, pstart, nparts, lo, hi, nbytes, run, pattern, a.name)

    def _layout(self) -> tuple[Any, ...]:
        """The geometry fields that follow from the view's layout alone (see ``_geometry``)."""
        a = self.alloc
        data = self.data
        isz = data.dtype.itemsize
        off = self._byte_offset()
        shape = data.shape
        strides = data.strides
        lsz = self.dtype.itemsize
        if lsz != isz:  # a float format held in fp32 storage (NKI_PRECISE_FP=0): the trace counts its real bytes
            off = off // isz * lsz
            strides = tuple(st // isz * lsz for st in strides)
            isz = lsz
        buf = a.buffer
        if buf.kind != "hbm":
            row = a.row_bytes or isz
            p0 = off // row
            lo = off - p0 * row
            free_shape, free_strides = shape[1:], strides[1:]
            pstart, nparts = p0 + a.partition_offset, (shape[0] if shape else 1)
            lo += a.address
        else:
            lo = off
            free_shape, free_strides = shape, strides
            pstart = nparts = 0
        hi = lo + isz
        for n, s in zip(free_shape, free_strides):
            if s > 0:
                hi += (n - 1) * s
            else:
                lo += (n - 1) * s
        # innermost contiguous run
        run = isz
        for n, s in zip(reversed(free_shape), reversed(free_strides)):
            if s == run:
                run *= n
            else:
                break
        pattern = tuple((s // isz, n) for n, s in zip(free_shape, free_strides))
        return (shape, self.dtype.name, int(pstart), int(nparts), int(lo), int(hi), int(data.size * isz), int(run),
                pattern)


_INDEX_CACHE: dict[Any, Any] = {}
_GEOMETRY_CACHE: dict[Any, Any] = {}  # view layout -> its trace geometry (NkiTensor._geometry)
# -- view builders: access patterns (.ap), run-time indexed views (vector_select, a run-time select) and tensor
# indirection (.indirect()); the descriptors they attach live in indirect_views.py
def _pattern(pattern: Any) -> tuple[tuple[int, int], ...]:
    try:
        pat = tuple((int(p[0]), int(p[1])) for p in pattern)
    except (TypeError, IndexError, ValueError):
        raise NkiValidationError(f"access pattern must be a list of [stride, count] pairs, got {pattern!r}",
                                 instruction="ap", rule="argument") from None
    if not pat:
        raise NkiValidationError("access pattern is empty", instruction="ap", rule="argument")
    for _stride, c in pat:
        if c <= 0:
            raise NkiValidationError(f"access pattern count {c} must be positive", instruction="ap", rule="argument")
    return pat


_INT64_INDEX = ("an nl.int64 tensor cannot be a run-time index or offset directly: a 64-bit value reaches the "
                "sequencer only through nisa.scalar_load (\"Unlike the compute instructions, scalar_load accepts "
                "nl.int64\"); pass the loaded NkiScalar (64-bit offsets address HBM only)")


def _scalar_value(x: Any, on_chip: bool = False) -> int:
    if isinstance(x, NkiScalar):
        if on_chip and x.bits > 32:
            raise NkiValidationError(f"scalar_offset on an SBUF/PSUM operand must be an int32 NkiScalar, got "
                                     f"{x.dtype} (64-bit offsets address HBM only)", instruction="ap",
                                     operand="scalar_offset", rule="dtype")
        return x.get("scalar_offset")
    if isinstance(x, NkiTensor):
        if x.size != 1:
            raise NkiValidationError(f"scalar_offset tensor must be [1, 1], got {list(x.shape)}",
                                     instruction="ap", rule="argument")
        if x.dtype.itemsize > 4 and x.dtype.is_int:
            raise NkiValidationError(_INT64_INDEX, instruction="ap", operand="scalar_offset", rule="dtype")
        return int(np.asarray(x.data, dtype=np.float64).reshape(-1)[0])
    if hasattr(x, "value"):  # virtual register
        return int(x.value)
    return int(x)


def make_ap(t: NkiTensor, pattern: Any, offset: int = 0, scalar_offset: Any = None, vector_offset: Any = None,
            indirect_dim: int = 0, dtype: Any = None) -> NkiTensor:
    a = t.alloc
    flat = a.storage.reshape(-1)
    d = t.dtype
    if dtype is not None:
        d = dt.to_dtype(dtype)
        try:
            flat = flat.view(dt.storage_dtype(d))
        except ValueError as e:
            raise NkiValidationError(f"cannot reinterpret storage as {d}: {e}", instruction="ap", rule="indexing") from None
    pat = _pattern(pattern)
    base_shape = a.shape
    off = t.offset if offset is None else int(offset)

    def row_elems(dim: int) -> int:
        """Elements one step of the base tensor's dim ``dim`` moves: the stride of the tensor ``.ap`` is
        called on (for a reshaped HBM view, its own shape, not the allocation's: the DMA scales an
        index by the stride of indirect_dim)."""
        if t.data.dtype.itemsize == flat.dtype.itemsize:
            return int(t.strides[dim])
        return int(math.prod(base_shape[dim + 1:]))

    if scalar_offset is not None or vector_offset is not None:
        if isinstance(indirect_dim, bool) or not isinstance(indirect_dim, int | np.integer) \
                or not 0 <= int(indirect_dim) < t.ndim:
            raise NkiValidationError(f"indirect_dim {indirect_dim!r} is not a dimension of the {t.ndim}-D "
                                     "base tensor", instruction="ap", operand="indirect_dim", rule="argument")
    if scalar_offset is not None:
        off += _scalar_value(scalar_offset, a.buffer.on_chip) * row_elems(int(indirect_dim))
    if a.buffer.on_chip:
        row = int(math.prod(base_shape[1:])) * (a.storage.dtype.itemsize // flat.dtype.itemsize or 1)
        if len(pat) < 2 and vector_offset is None:
            raise NkiValidationError("an on-chip access pattern needs a partition pair and at least one free pair",
                                     instruction="ap", rule="indexing")
        if pat[0][1] > 1 and pat[0][0] != row and vector_offset is None:
            raise NkiValidationError(
                f"partition stride {pat[0][0]} must equal the storage free size {row} (partitions are contiguous)",
                instruction="ap", rule="indexing")
    n = flat.size
    if vector_offset is not None:
        if indirect_dim != 0:
            raise NkiValidationError("vector_offset supports only indirect_dim=0", instruction="ap", rule="argument")
        if not isinstance(vector_offset, NkiTensor) or not vector_offset.is_on_chip:
            raise NkiValidationError("vector_offset must be an on-chip [P, 1] index tensor", instruction="ap",
                                     rule="argument")
        ind = IndirectAccess(flat, tuple(t.shape), pat, off, vector_offset, indirect_dim, row_stride=row_elems(0))
        # The data view is the first row's pattern; DMA resolves rows through `_ap_base`.
        shape = tuple(c for _, c in pat)
        view = np.zeros(shape, dtype=flat.dtype)
        out = NkiTensor(view, a, d)
        out._ap_base = ind
        out._off = off * flat.dtype.itemsize  # (``view`` is scratch: the trace's addresses start at the offset)
        return out
    lo = off + sum((c - 1) * s for s, c in pat if s < 0)
    hi = off + sum((c - 1) * s for s, c in pat if s > 0)
    if lo < 0 or hi >= n:
        msg = (f"access pattern {[list(p) for p in pat]} with offset {off} reaches elements [{lo}, {hi}] outside "
               f"storage of {n} elements")
        # The view itself is legal: what uses it is not. A run-time start is checked by the DMA when it runs
        # (oob_mode); a static one by whatever instruction uses the view (kernels make views that a condition
        # then leaves unused, e.g. the last, incomplete tile of a loop).
        runtime = scalar_offset is not None and not a.buffer.on_chip
        out = NkiTensor(np.zeros(tuple(c for _, c in pat), dtype=flat.dtype), a, d)
        where = location_str()
        out._ap_base = OutOfBoundsView(msg + (" (run-time scalar_offset)" if runtime else
                                              f" (the .ap() view made at {where})" if where else " (an .ap() view)"),
                                       static=not runtime)
        out._off = 0
        _mark_indirect()
        return out
    isz = flat.dtype.itemsize
    shape, strides = tuple(c for _, c in pat), tuple(s * isz for s, _ in pat)
    try:  # (the ndarray constructor over the contiguous storage: 1 µs, where as_strided takes 4-5 µs per view)
        view = np.ndarray(shape, flat.dtype, flat, off * isz, strides)
    except (ValueError, TypeError):
        view = np.lib.stride_tricks.as_strided(flat[off:], shape=shape, strides=strides)
    return NkiTensor(view, a, d)


# -- dynamic views: vector_select, select(dim, tensor) ---------------------------------------------
def _mark_indirect(name: str = "") -> None:
    """Tell this program's instruction wrapper to look for indirect operands (it skips the scan otherwise)."""
    ctx = maybe_current()
    if ctx is not None:
        ctx.has_indirect = True


def vector_select(t: NkiTensor, dim: int, offsets: Any) -> NkiTensor:
    """``t.vector_select(0, offsets)``: row ``r`` of the view is ``t[offsets[r], ...]``, resolved by DMA
    at run time (an HBM gather/scatter operand; ``oob_mode`` applies). Dim 0 of HBM tensors only."""
    if isinstance(dim, bool) or not isinstance(dim, int | np.integer) or int(dim) != 0:
        raise NkiValidationError(f"vector_select supports only dim 0, got {dim!r}", instruction="vector_select",
                                 operand="dim", rule="indexing")
    if t.is_on_chip:
        raise NkiValidationError(f"vector_select needs an HBM tensor; {t.buffer.kind.upper()} tensors cannot be "
                                 "indexed by a vector of offsets (use .indirect() on trn3 compute instructions)",
                                 instruction="vector_select", rule="indexing")
    if t._ap_base is not None:
        raise NkiValidationError("vector_select of a view that is already indirect", instruction="vector_select",
                                 rule="indexing")
    if not isinstance(offsets, NkiTensor) or offsets.buffer.kind != "sbuf":
        raise NkiValidationError("offsets must be an SBUF [P, 1] index tensor", instruction="vector_select",
                                 operand="offsets", rule="argument")
    if not offsets.dtype.is_int:
        raise NkiValidationError(f"offsets dtype must be an integer type, got {offsets.dtype}",
                                 instruction="vector_select", operand="offsets", rule="dtype")
    if offsets.ndim < 2 or offsets.size != offsets.shape[0]:
        raise NkiValidationError(f"offsets must be a [P, 1] tensor, got {list(offsets.shape)}",
                                 instruction="vector_select", operand="offsets", rule="shape-mismatch")
    rows = offsets.shape[0]
    pattern = ((t.strides[0], rows), *((s, n) for s, n in zip(t.strides[1:], t.shape[1:], strict=True)))
    a = t.alloc
    ind = IndirectAccess(a.storage.reshape(-1), tuple(t.shape), pattern, t.offset, offsets, 0,
                         row_stride=t.strides[0], rows=t.shape[0])
    out = NkiTensor(np.zeros((rows, *t.shape[1:]), dtype=t.data.dtype), a, t.dtype)
    out._ap_base = ind
    out._off = t._byte_offset()
    _mark_indirect()
    return out


def _runtime_index(x: Any, what: str, on_chip: bool = False) -> int:
    if isinstance(x, NkiTensor):
        if not x.is_on_chip:
            raise NkiValidationError(f"a runtime index tensor must be in SBUF or PSUM, not {x.buffer.kind}",
                                     instruction=what, operand="index", rule="buffer")
        if not x.dtype.is_int:
            raise NkiValidationError(f"a runtime index tensor must have an integer dtype, got {x.dtype}",
                                     instruction=what, operand="index", rule="dtype")
        if x.dtype.itemsize > 4:
            raise NkiValidationError(_INT64_INDEX, instruction=what, operand="index", rule="dtype")
        if x.size != 1:
            raise NkiValidationError(f"a runtime index tensor must be [1, 1], got {list(x.shape)}",
                                     instruction=what, operand="index", rule="shape-mismatch")
        return int(read_bits(x).reshape(-1)[0])
    if isinstance(x, NkiScalar):
        if on_chip and x.bits > 32:
            raise NkiValidationError(f"a run-time index into an SBUF/PSUM tensor must be an int32 NkiScalar, got "
                                     f"{x.dtype} (\"on an SBUF or PSUM operand the offset must be nl.int32\")",
                                     instruction=what, operand="index", rule="dtype")
        return x.get("index")
    get = getattr(x, "get", None)
    if callable(get) and hasattr(x, "frozen"):  # VirtualRegister
        return int(get("index"))
    raise NkiValidationError(f"index must be an int, a [1, 1] tensor, a register or an NkiScalar, got "
                             f"{type(x).__name__}",
                             instruction=what, operand="index", rule="argument")


def dynamic_select(t: NkiTensor, dim: int, index: Any) -> NkiTensor:
    """``t.select(dim, tensor_or_register)``: drop ``dim`` at an index read at run time.

    The simulator reads the index when the view is made (kernels make such views right before
    the instruction that uses them). Allowed once per view, and never on the partition dim of
    an on-chip tensor."""
    nd = t.ndim
    d = int(dim)
    if not -nd <= d < nd:
        raise NkiValidationError(f"select dim {dim} out of range for rank {nd}", instruction="select",
                                 operand="dim", rule="indexing")
    d %= nd
    if t.is_on_chip and d == 0:
        raise NkiValidationError("dynamic select on the partition dimension of an on-chip tensor is not allowed",
                                 instruction="select", operand="dim", rule="indexing")
    if getattr(t, "_dyn", None) is not None:
        raise NkiValidationError("a view can be selected with a runtime index only once", instruction="select",
                                 operand="index", rule="indexing")
    if t._ap_base is not None:
        raise NkiValidationError("dynamic select of an indirect view", instruction="select", rule="indexing")
    i = _runtime_index(index, "select", t.is_on_chip)
    n = t.shape[d]
    if not 0 <= i < n:
        nm = t.alloc.name or "tensor"
        raise NkiIndexError(f"index {i} is out of bounds for axis {d} with size {n} (runtime index of `{nm}`)",
                            instruction="select", operand="index")
    key: list[Any] = [slice(None)] * nd
    key[d] = i
    if t.is_on_chip and nd == 2:  # on-chip tensors stay 2-D
        key[d] = slice(i, i + 1)
    out = t._new(t.data[tuple(key)])
    DYN_VIEWS[0] += 1
    out._dyn = d
    return out


def make_indirect(t: NkiTensor, index: Any, num_elem: Any = None) -> NkiTensor:
    ctx = current()
    if not ctx.target.has("indirect"):
        raise NkiValidationError(f"tensor indirection (.indirect()) needs trn3 (NeuronCore-v4); target is "
                                 f"{ctx.target.name}", instruction="indirect", rule="generation")
    if not t.is_on_chip:
        raise NkiValidationError("tensor indirection applies to SBUF/PSUM tensors; index HBM tensors with "
                                 "vector_select(0, offsets) or .ap(vector_offset=...) and DMA",
                                 instruction="indirect", rule="buffer")
    if t._ap_base is not None:
        raise NkiValidationError("the view is already indirect", instruction="indirect", rule="indexing")
    if not isinstance(index, NkiTensor) or index.buffer.kind != "sbuf":
        raise NkiValidationError("index must be an SBUF tensor of uint16 offsets", instruction="indirect",
                                 operand="index", rule="argument" if not isinstance(index, NkiTensor) else "buffer")
    if index.dtype.name != "uint16":
        raise NkiValidationError(f"index dtype must be uint16, got {index.dtype}", instruction="indirect",
                                 operand="index", rule="dtype")
    if index.shape[0] != t.shape[0]:
        raise NkiValidationError(f"index has {index.shape[0]} partitions, the data view {t.shape[0]}",
                                 instruction="indirect", operand="index", rule="partition-mismatch")
    k = index.size // index.shape[0]
    if num_elem is None:
        n = k
    elif isinstance(num_elem, bool) or not isinstance(num_elem, int | np.integer) or not 1 <= int(num_elem) <= k:
        raise NkiValidationError(f"num_elem must be an int in [1, {k}] (offsets per partition in index), got "
                                 f"{num_elem!r}", instruction="indirect", operand="num_elem", rule="argument")
    else:
        n = int(num_elem)
    out = NkiTensor(np.zeros((t.shape[0], n), dtype=t.data.dtype), t.alloc, t.dtype)
    out._ap_base = TensorIndirection(t, index, n)
    out._off = t._byte_offset()
    ctx.has_indirect = True
    return out


_GEOMETRY_CACHE_MAX = 1 << 16
_INDEX_CACHE_MAX = 1 << 16
_VIEW_CACHE_MAX = 1 << 12  # distinct view geometries remembered per allocation
_SUBS_MAX = 1 << 10  # sub-views remembered per view


def key_signature(key: Any) -> tuple[Any, ...] | None:
    """A hashable form of an index key made only of ints, int slices and int ``nl.ds``; None
    for anything else (Ellipsis, NumPy integers, loop registers …), which takes the full path."""
    items = key if type(key) is tuple else (key,)
    sig: list[Any] = []
    for k in items:
        tk = type(k)
        if tk is int:
            sig.append(k)
        elif tk is slice:
            a, b, c = k.start, k.stop, k.step
            if (a is None or type(a) is int) and (b is None or type(b) is int) and (c is None or type(c) is int):
                sig.append((a, b, c))
            else:
                return None
        elif tk is DynSlice:
            a, n, c = k.start, k.size, k.step
            if k.runtime is None and type(a) is int and type(n) is int and type(c) is int:
                sig.append((a, a + n * c, c))
            else:
                return None
        else:
            return None
    return tuple(sig)


def _starts(norm: tuple[Any, ...]) -> tuple[int, ...] | None:
    """Per-dimension first index of a normalised key (None if a slice runs backwards)."""
    out = []
    for k in norm:
        if type(k) is int:
            out.append(k)
        elif k.step is None or k.step > 0:
            out.append(k.start or 0)
        else:
            return None
    return tuple(out)


def is_tensor(x: Any) -> bool:
    return isinstance(x, NkiTensor)


__all__ = ["PSUM", "SBUF", "DynSlice", "NkiTensor", "allocate", "as_buffer", "ds", "wrap_hbm"]
