"""Per-program Beta-1 state: live ``affine_range`` loops and the write-conflict detector.

Beta 1 compiled ``nl.affine_range`` loops as parallel: iterations must not write the same
element of a tensor that outlives the iteration (the compiler's "Unexpected output
dependencies" error), except associative accumulation (``psum += nl.matmul(...)``). Our loops
run eagerly, so the detector keeps, per (tensor, loop), which iteration last wrote each
element, and raises when a different iteration writes it again.
"""

from __future__ import annotations

import itertools
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
    iteration: int = 0
    owners: dict[int, np.ndarray] = field(default_factory=dict)  # alloc id -> last writer iteration


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


def state() -> ProgramState | None:
    ctx = maybe_current()
    if ctx is None:
        return None
    st = _STATES.get(ctx)
    if st is None:
        st = _STATES[ctx] = ProgramState()
    return st


def enter_loop() -> AffineLoop | None:
    st = state()
    if st is None:
        return None
    loop = AffineLoop(next(_LOOP_IDS))
    st.loops.append(loop)
    st.loop_uids = None
    return loop


def exit_loop(loop: AffineLoop | None) -> None:
    st = state()
    if st is not None and loop is not None and loop in st.loops:
        st.loops.remove(loop)
        st.loop_uids = None


def note_allocation(t: NkiTensor) -> None:
    """Remember which affine loops a tensor was created in (tensors local to an iteration never conflict)."""
    st = state()
    if st is not None and st.loops:
        uids = st.loop_uids
        if uids is None:
            uids = st.loop_uids = frozenset(loop.uid for loop in st.loops)
        st.born_in[t.alloc.id] = uids


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
            owners = loop.owners[dst.alloc.id] = np.full(dst.alloc.storage.shape, -1, dtype=np.int32)
        w = flag_view(dst, owners)
        clash = (w >= 0) & (w != loop.iteration)
        if clash.any():
            prev = int(w[clash].reshape(-1)[0])
            name = dst.alloc.name or f"t{dst.alloc.id}"
            raise NkiValidationError(
                f"Unexpected output dependencies: iterations {prev} and {loop.iteration} of an nl.affine_range loop "
                f"both write tensor '{name}'{list(dst.alloc.shape)} ({what}); use nl.sequential_range for "
                "loop-carried dependencies, or allocate the tensor inside the loop", instruction=what,
                operand=name, rule="loop-dependency")
        w[...] = loop.iteration


def loop_frames() -> list[Any]:
    st = state()
    return list(st.loops) if st is not None else []
