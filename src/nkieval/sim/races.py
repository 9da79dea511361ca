"""Races between the two programs of an LNC-2 pair: a store or a read of shared memory that meets the other
program's store or read of the same elements with no synchronisation between them.

The two cores of an LNC-2 pair run at the same time and nothing orders their DMAs but a synchronisation
(``core_barrier``, ``sendrecv``). The simulator runs them access by access (``nkieval.sim.turns``), which is one
order the hardware can give; when two accesses to the same elements, one of them a store, are not ordered by a
synchronisation, the hardware may give the other order and another result. Such a kernel is reported (a
warning, rule ``race``, once per tensor and kind): it passes here, and on hardware it depends on timing.

Three kinds, each since the pair last synchronised:

* a store over elements the other program stored to, changing their values (the same values stored by both
  programs, e.g. both clearing a shared output, are no race);
* a read of elements the other program stored to (on hardware the read may come first and see the old values);
* a store, changing their values, over elements the other program read (on hardware the store may land first
  and the read see the new values). Only for the shared tensors the kernel makes: reads of its arguments (the
  inputs, most of what a kernel reads) leave no mark, which keeps the cost of the inputs' reads at nothing.

What is kept: per element of the shared-HBM tensors, which program stored to it last (an ``int8`` per element,
made at the tensor's first store in an LNC-2 launch that computes values) and which programs read it (a bit per
program, for the tensors the kernel makes, at their first read). A completed ``core_barrier`` or a received
``sendrecv`` clears every mark: whatever either program did before it is ordered before what either does after it
(for a ``sendrecv``, an approximation that can only leave a race unreported). Not covered: the indirect (scatter)
and accumulating stores, and grids of more than two programs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nkieval.sim.storage import flag_view


class RaceMarks:
    """The accesses of an LNC-2 pair's programs to shared-HBM tensors since their last synchronisation."""

    def __init__(self) -> None:
        # id(allocation) -> (allocation, marks): the program that stored last (``p + 1``; 0: none)
        self._stores: dict[int, tuple[Any, np.ndarray]] = {}
        # id(allocation) -> (allocation, marks): the programs that read (bit ``1 << p``), kernel-made tensors only
        self._reads: dict[int, tuple[Any, np.ndarray]] = {}
        self._reported: set[tuple[str, int]] = set()

    def check_store(self, ctx: Any, t: Any, values: np.ndarray) -> None:
        """``ctx``'s program is about to store ``values`` (of ``t``'s shape and storage dtype) into ``t``: report a
        race if they change elements the other program stored to or read."""
        me = ctx.program_id
        key = id(t.alloc)
        stored = self._stores.get(key)
        if stored is not None and ("store", key) not in self._reported:
            hit, peer = _stored_by_peer(t, stored[1], me)
            if hit.any() and _changes(t, values, hit):
                self._report(ctx, "store", key,
                             f"program {me} stores to {int(hit.sum())} element(s) of {_describe(t.alloc)} that program "
                             f"{peer} stored other values to, with no core_barrier or sendrecv between the two: the two "
                             "cores run at the same time, so which store lands last depends on their timing on "
                             f"hardware (a race; here program {me}'s lands last). Synchronise with nisa.core_barrier, "
                             "or have one program store each element")
        read = self._reads.get(key)
        if read is not None and ("after-read", key) not in self._reported:
            hit = (flag_view(t, read[1]) & ~np.uint8(1 << me)) != 0
            if hit.any() and _changes(t, values, hit):
                self._report(ctx, "after-read", key,
                             f"program {me} stores to {int(hit.sum())} element(s) of {_describe(t.alloc)} that program "
                             f"{1 - me} read, with no core_barrier or sendrecv between the two: the two cores run at "
                             "the same time, so on hardware the store may land before that read, which would see the "
                             "new values (a race; here the read came first). Synchronise with nisa.core_barrier "
                             "between the read and the store")

    def check_read(self, ctx: Any, t: Any) -> None:
        """``ctx``'s program is about to read ``t``: report a race if the other program stored to any of its
        elements, and mark the read (on a tensor the kernel made)."""
        me = ctx.program_id
        a = t.alloc
        key = id(a)
        stored = self._stores.get(key)
        if stored is not None and ("read", key) not in self._reported:
            hit, peer = _stored_by_peer(t, stored[1], me)
            if hit.any():
                self._report(ctx, "read", key,
                             f"program {me} reads {int(hit.sum())} element(s) of {_describe(a)} that program {peer} "
                             "stored to, with no core_barrier or sendrecv between the two: the two cores run at the "
                             "same time, so on hardware the read may come before the store and see the old values (a "
                             "race; here the store came first). Synchronise with nisa.core_barrier between the store "
                             "and the read")
        if not a.is_kernel_arg:
            read = self._reads.get(key)
            if read is None:
                read = self._reads[key] = (a, np.zeros(a.storage.shape, np.uint8))
            region = flag_view(t, read[1])
            region |= np.uint8(1 << me)

    def _report(self, ctx: Any, kind: str, key: int, message: str) -> None:
        """Warn of a race of ``kind`` on the allocation ``key`` (each kind once per allocation)."""
        self._reported.add((kind, key))
        ctx.warn(message, rule="race", instruction=getattr(ctx, "instruction_name", None))

    def mark(self, ctx: Any, t: Any) -> None:
        """``ctx``'s program stored into ``t``."""
        a = t.alloc
        entry = self._stores.get(id(a))
        if entry is None:
            entry = self._stores[id(a)] = (a, np.zeros(a.storage.shape, np.int8))
        flag_view(t, entry[1])[...] = ctx.program_id + 1

    def synchronised(self) -> None:
        """The pair synchronised: every access so far is ordered before every later one."""
        for marks in (*self._stores.values(), *self._reads.values()):
            marks[1].fill(0)


def _stored_by_peer(t: Any, marks: np.ndarray, me: int) -> tuple[np.ndarray, int]:
    """Which elements of ``t`` program ``me``'s peer stored to last (by the store marks ``marks``), and that peer."""
    region = flag_view(t, marks)
    hit = (region != 0) & (region != me + 1)
    return hit, 1 - me


def _changes(t: Any, values: np.ndarray, where: np.ndarray) -> bool:
    """Whether storing ``values`` into ``t`` changes any element where ``where`` holds (bit for bit)."""
    old = t.data[where]
    new = np.ascontiguousarray(np.broadcast_to(values, t.shape)[where])
    return old.dtype != new.dtype or not np.array_equal(old.view(np.uint8), new.view(np.uint8))


def _describe(a: Any) -> str:
    """The shared tensor as a kernel author knows it: its name, else where the kernel made it."""
    if a.name:
        return f"{'kernel argument' if a.is_kernel_arg else 'shared tensor'} {a.name!r}"
    return f"the shared tensor made at {a.site}" if a.site else f"shared tensor #{a.id}"
