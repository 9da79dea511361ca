"""Per-program Beta-1 state: live ``affine_range`` loops and the write-conflict detector.

Beta 1 compiled ``nl.affine_range`` loops as parallel: iterations must not write the same
element of a tensor that outlives the iteration (the compiler's "Unexpected output
dependencies" error), except associative accumulation (``psum += nl.matmul(...)``). Our loops
run eagerly, so the detector keeps, per (tensor, loop), which iteration last wrote each
element, and raises when a different iteration writes it again.
"""

from __future__ import annotations

import itertools
import math
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nkieval.hardware import Target, get_target
from nkieval.sim.context import SimContext, maybe_current
from nkieval.sim.errors import NkiValidationError
from nkieval.sim.isa.core import flag_view
from nkieval.sim.tensor import NkiTensor

_LOOP_IDS = itertools.count(1)


@dataclass(eq=False)
class AffineLoop:
    """One running ``affine_range`` loop instance."""

    uid: int
    iteration: int = 0  # the ordinal of the running iteration (0, 1, ...), whatever the range's values
    dtype: type = np.int32  # of a dense record of iteration ordinals (WriteOwners), where -1 is "unwritten"
    start: int = 0  # the range's first value and step: an ordinal's loop value, for messages
    step: int = 1
    owners: dict[int, WriteOwners] = field(default_factory=dict)  # alloc id -> last writer iteration

    def value(self, ordinal: int) -> int:
        """The loop value of iteration ``ordinal``."""
        return self.start + ordinal * self.step


@dataclass(eq=False)
class ProgramState:
    loops: list[AffineLoop] = field(default_factory=list)
    # alloc id -> uids of the affine loops that were running when it was allocated
    born_in: dict[int, frozenset[int]] = field(default_factory=dict)
    # nki.compiler direct allocation: (buffer, bank, partition, byte address) -> physical tile placed there
    placed: dict[tuple[str, int, int, int], NkiTensor] = field(default_factory=dict)
    direct: set[int] = field(default_factory=set)  # alloc ids placed by the kernel: it owns their hazards
    # PSUM region (alloc, partitions, byte range) -> trace length after the last matmul that `psum += ...` /
    # `psum[...] = matmul` wrote there (the running accumulation group)
    groups: dict[tuple[int, int, int, int, int], int] = field(default_factory=dict)
    # the uids of ``loops`` as born_in stores them (one frozenset shared by every tile of an iteration);
    # None after a loop starts or ends
    loop_uids: frozenset[int] | None = None


_STATES: weakref.WeakKeyDictionary[SimContext, ProgramState] = weakref.WeakKeyDictionary()


def target() -> Target:
    """The running kernel's target (its hardware facts), else the default target."""
    ctx = maybe_current()
    return ctx.target if ctx is not None else get_target()


# this thread's last (context, state) pair, both weakly held (a finished run's state, with its placed tiles, is
# not kept alive by it): every Beta-1 call asks for the state, and a WeakKeyDictionary lookup is several calls
_LAST = threading.local()


def state() -> ProgramState | None:
    ctx = maybe_current()
    if ctx is None:
        return None
    last = getattr(_LAST, "pair", None)
    if last is not None and last[0]() is ctx:
        st = last[1]()
        if st is not None:
            return st
    st = _STATES.get(ctx)
    if st is None:
        st = _STATES[ctx] = ProgramState()
    _LAST.pair = (weakref.ref(ctx), weakref.ref(st))
    return st


def enter_loop(count: int = 1 << 31, start: int = 0, step: int = 1) -> AffineLoop | None:
    """A new running loop of ``count`` iterations over ``start, start + step, ...``; its owners record ordinals
    (a loop value may be negative, and -1 marks an element no iteration wrote)."""
    st = state()
    if st is None:
        return None
    loop = AffineLoop(next(_LOOP_IDS), dtype=iteration_dtype(count), start=start, step=step)
    st.loops.append(loop)
    st.loop_uids = None
    return loop


def exit_loop(loop: AffineLoop | None) -> None:
    st = state()
    if st is not None and loop is not None and loop in st.loops:
        st.loops.remove(loop)
        st.loop_uids = None


def note_allocation(t: NkiTensor, st: ProgramState | None = None) -> None:
    """Remember which affine loops a tensor was created in (tensors local to an iteration never conflict);
    ``st``: the program's state, when the caller has it."""
    if st is None:
        st = state()
    if st is not None and st.loops:
        uids = st.loop_uids
        if uids is None:
            uids = st.loop_uids = frozenset(loop.uid for loop in st.loops)
        st.born_in[t.alloc.id] = uids


class WriteOwners:
    """Which iteration of one loop entry last wrote each element of one tensor.

    Iterations run in order, so a write can only clash with an earlier iteration's. Kept, cheapest first:
    the writes so far as boxes in the tensor's index space while each iteration's bounding box (of all its
    writes) meets no earlier iteration's (the common case, each iteration writing its own slice: nothing per
    element, whatever the number of writes); else, while few, while no box meets a box of another iteration;
    else as a dense per-element array of iterations (the smallest integer type that holds the loop's), into
    which the writes so far are replayed in order. A dense array per (loop entry, tensor) from the first write
    cost a fill of the whole tensor every time a loop was entered, and a large kernel's block tensors several
    times their own size (one array per loop level)."""

    __slots__ = ("current", "current_box", "dense", "done_boxes", "done_union", "dtype", "shape", "writes")
    MAX_BOXES = 64  # past this many writes whose bounding boxes met, the dense array (each is checked against all)
    MAX_WRITES = 1 << 18  # writes remembered for the replay; past this, the dense array (bounded memory)

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype | type = np.int32) -> None:
        self.shape = shape
        self.dtype = dtype
        self.writes: list[tuple[tuple[tuple[int, int], ...], tuple[Any, ...], int]] | None = []
        self.dense: np.ndarray | None = None
        self.current: int | None = None  # the iteration writing now; its bounding box so far
        self.current_box: tuple[tuple[int, int], ...] | None = None
        self.done_boxes: list[tuple[tuple[int, int], ...]] = []  # earlier iterations' bounding boxes
        self.done_union: tuple[tuple[int, int], ...] | None = None  # and theirs

    def write(self, dst: NkiTensor, iteration: int) -> np.ndarray | None:
        """Note that iteration ``iteration`` (an ordinal) writes ``dst``; returns the earlier iterations' ordinals at
        the elements a different iteration already wrote (empty when none), or ``None`` when no box overlapped."""
        if self.writes is not None:
            geo = _flag_geometry(dst)
            if 0 in geo[1]:
                return None
            box = _storage_box(geo, self.shape) if dst.data.dtype.itemsize == dst.alloc.storage.itemsize else None
            if box is not None and len(self.writes) < self.MAX_WRITES and self._apart(box, iteration, geo):
                return None
            self._go_dense()
        assert self.dense is not None
        w = flag_view(dst, self.dense)
        clash = (w >= 0) & (w != iteration)
        prev = w[clash]
        w[...] = iteration
        return prev

    def _apart(self, box: tuple[tuple[int, int], ...], iteration: int, geo: tuple[Any, ...]) -> bool:
        """Record the write if it provably meets no element an earlier iteration wrote."""
        assert self.writes is not None
        if iteration != self.current:
            if self.current_box is not None:
                self.done_boxes.append(self.current_box)
                self.done_union = _union(self.done_union, self.current_box)
            self.current, self.current_box = iteration, None
        grown = _union(self.current_box, box)
        near = (self.done_union is not None and _boxes_meet(grown, self.done_union)
                and any(_boxes_meet(grown, b) for b in self.done_boxes))
        if near and (len(self.writes) >= self.MAX_BOXES or any(
                it != iteration and _boxes_meet(box, other) for other, _, it in self.writes)):
            return False
        self.current_box = grown
        self.writes.append((box, geo, iteration))
        return True

    def _go_dense(self) -> None:
        assert self.writes is not None
        self.dense = np.full(self.shape, -1, dtype=self.dtype)
        for _, g, it in self.writes:
            _dense_view(self.dense, g)[...] = it
        self.writes = None


def iteration_dtype(bound: int) -> type:
    """The smallest signed integer type that holds iteration ordinals below ``bound`` (and -1)."""
    return np.int8 if bound <= 127 else np.int16 if bound <= 32767 else np.int32


def _union(a: tuple[tuple[int, int], ...] | None, b: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    if a is None:
        return b
    return tuple((min(alo, blo), max(ahi, bhi)) for (alo, ahi), (blo, bhi) in zip(a, b))


def _storage_box(geo: tuple[int, tuple[int, ...], tuple[int, ...]],
                 shape: tuple[int, ...]) -> tuple[tuple[int, int], ...] | None:
    """The bounding box, as index ranges per dimension of a C-ordered array of ``shape``, of a view (offset,
    shape, strides, in elements); ``None`` where a view dimension's steps are no whole number of steps of one
    array dimension, or carry into the next (the box would not bound the view). Several view dimensions may
    step along one array dimension (a free dim split in two, ``128 * i + j``): the box then bounds the view, and
    the conflict check that reads it stays sound (boxes apart means elements apart)."""
    off, vshape, vstrides = geo
    cstrides = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        cstrides[d] = cstrides[d + 1] * shape[d + 1]
    if not 0 <= off < math.prod(shape):
        return None
    start = []
    rem = off
    for c in cstrides:
        start.append(rem // c)
        rem %= c
    lo, hi = list(start), list(start)
    for n, st in zip(vshape, vstrides):
        if n == 1:
            continue
        d = next((d for d, c in enumerate(cstrides) if c <= abs(st)), None)
        if d is None or st % cstrides[d]:
            return None
        reach = (n - 1) * (st // cstrides[d])
        if reach < 0:
            lo[d] += reach
        else:
            hi[d] += reach
    if any(a < 0 or b >= n for a, b, n in zip(lo, hi, shape)):
        return None
    return tuple(zip(lo, hi))


def _boxes_meet(a: tuple[tuple[int, int], ...], b: tuple[tuple[int, int], ...]) -> bool:
    return all(alo <= bhi and blo <= ahi for (alo, ahi), (blo, bhi) in zip(a, b))


def _flag_geometry(t: NkiTensor) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """``t``'s view of its storage in elements: offset, shape, strides (as ``flag_view`` maps it)."""
    data = t.data
    isz = data.dtype.itemsize
    return t._byte_offset() // isz, data.shape, tuple(s // isz for s in data.strides)


def _dense_view(flags: np.ndarray, geo: tuple[int, tuple[int, ...], tuple[int, ...]]) -> np.ndarray:
    off, shape, strides = geo  # (the mapping of nkieval.sim.storage.flag_view)
    fsz = flags.itemsize
    fstrides = tuple(s * fsz for s in strides)
    try:
        return np.ndarray(shape, flags.dtype, flags, off * fsz, fstrides)
    except (ValueError, TypeError):
        return np.lib.stride_tricks.as_strided(flags.reshape(-1)[off:], shape=shape, strides=fstrides)


def note_write(dst: NkiTensor, *, accumulate: bool = False, what: str = "write") -> None:
    """Check a write against the running affine loops; ``accumulate`` writes are exempt."""
    st = state()
    if st is None or not st.loops or accumulate or dst._ap_base is not None:
        return
    if dst.alloc.id in st.direct:
        return
    born = st.born_in.get(dst.alloc.id, frozenset())
    for loop in st.loops:
        if loop.uid in born:
            continue
        owners = loop.owners.get(dst.alloc.id)
        if owners is None:
            owners = loop.owners[dst.alloc.id] = WriteOwners(dst.alloc.storage.shape, loop.dtype)
        prev = owners.write(dst, loop.iteration)
        if prev is not None and prev.size:
            name = dst.alloc.name or f"t{dst.alloc.id}"
            raise NkiValidationError(
                f"Unexpected output dependencies: iterations {loop.value(int(prev.reshape(-1)[0]))} and "
                f"{loop.value(loop.iteration)} of an "
                f"nl.affine_range loop both write tensor '{name}'{list(dst.alloc.shape)} ({what}); use "
                "nl.sequential_range for loop-carried dependencies, or allocate the tensor inside the loop",
                instruction=what, operand=name, rule="loop-dependency")


def loop_frames() -> list[Any]:
    st = state()
    return list(st.loops) if st is not None else []
