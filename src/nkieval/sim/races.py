"""Races between the two programs of an LNC-2 pair: a store over shared memory that the other program stored
to, with other values, or a read of what it stored, since the pair last synchronised.

The two cores of an LNC-2 pair run at the same time and nothing orders their DMAs but a synchronisation
(``core_barrier``, ``sendrecv``). The simulator runs them access by access (``nkieval.sim.turns``), which is one
order the hardware can give; when two stores to the same elements are not ordered by a synchronisation, the
hardware may give the other order, and the elements then hold the other program's values. Such a kernel is
reported (a warning, rule ``race``, once per tensor): it passes here, and on hardware it depends on timing.

What is compared: per element of every shared-HBM tensor, which program stored to it last since the pair's last
synchronisation (an ``int8`` mark per element, made at the tensor's first store in an LNC-2 launch). A store
over elements the other program marked is a race if it changes any of their values; the same values stored by
both programs (both clearing a shared output, say) are not. A read of elements the other program marked is a
race (reported apart from stores, once per tensor). A completed ``core_barrier`` or ``sendrecv`` clears
every mark: whatever either program stored before it is ordered before what either stores after it (for a
``sendrecv``, an approximation that can only leave a race unreported). Not covered: a store after the other
program's read of the same elements (reads leave no mark), the indirect (scatter) and accumulating stores, and
grids of more than two programs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nkieval.sim.storage import flag_view


class RaceMarks:
    """Which program stored last to each element of the launch's shared-HBM tensors since the last
    synchronisation (``0``: none; ``p + 1``: program ``p``)."""

    def __init__(self) -> None:
        self._marks: dict[int, tuple[Any, np.ndarray]] = {}  # id(allocation) -> (allocation, marks)
        self._reported: set[int] = set()

    def check_store(self, ctx: Any, t: Any, values: np.ndarray | None) -> None:
        """``ctx``'s program is about to store ``values`` (of ``t``'s shape and storage dtype; None: values not
        known, e.g. a cast still to make) into ``t``: report a race if other values are replacing the other
        program's stores."""
        a = t.alloc
        entry = self._marks.get(id(a))
        if entry is None or id(a) in self._reported:
            return
        region = flag_view(t, entry[1])
        other = (region != 0) & (region != ctx.program_id + 1)
        if not other.any():
            return
        if values is not None:
            old = t.data[other]
            new = np.broadcast_to(values, t.shape)[other]
            if old.dtype == new.dtype and np.array_equal(old.view(np.uint8), np.ascontiguousarray(new).view(np.uint8)):
                return
        self._reported.add(id(a))
        peer = int(region[other].flat[0]) - 1
        n = int(other.sum())
        ctx.warn(f"program {ctx.program_id} stores to {n} element(s) of {_describe(a)} that "
                 f"program {peer} stored other values to, with no core_barrier or sendrecv between the two: the "
                 "two cores run at the same time, so which store lands last depends on their timing on hardware "
                 "(a race; here program " f"{ctx.program_id}'s lands last). Synchronise with nisa.core_barrier, "
                 "or have one program store each element", rule="race",
                 instruction=getattr(ctx, "instruction_name", None))

    def check_read(self, ctx: Any, t: Any) -> None:
        """``ctx``'s program is about to read ``t``: report a race if the other program stored to any of its
        elements since the pair last synchronised (on hardware the read may come first and see the old values)."""
        a = t.alloc
        entry = self._marks.get(id(a))
        if entry is None or -id(a) in self._reported:
            return
        region = flag_view(t, entry[1])
        other = (region != 0) & (region != ctx.program_id + 1)
        if not other.any():
            return
        self._reported.add(-id(a))  # (reads and stores are reported apart: ids are positive)
        peer = int(region[other].flat[0]) - 1
        ctx.warn(f"program {ctx.program_id} reads {int(other.sum())} element(s) of {_describe(a)} that program "
                 f"{peer} stored to, with no core_barrier or sendrecv between the two: the two cores run at the same "
                 "time, so on hardware the read may come before the store and see the old values (a race; here "
                 "the store came first). Synchronise with nisa.core_barrier between the store and the read",
                 rule="race", instruction=getattr(ctx, "instruction_name", None))

    def mark(self, ctx: Any, t: Any) -> None:
        """``ctx``'s program stored into ``t``."""
        a = t.alloc
        entry = self._marks.get(id(a))
        if entry is None:
            entry = self._marks[id(a)] = (a, np.zeros(a.storage.shape, np.int8))
        flag_view(t, entry[1])[...] = ctx.program_id + 1

    def synchronised(self) -> None:
        """The pair synchronised: every store so far is ordered before every later one."""
        for _, marks in self._marks.values():
            marks.fill(0)


def _describe(a: Any) -> str:
    """The shared tensor as a kernel author knows it: its name, else where the kernel made it."""
    if a.name:
        return f"{'kernel argument' if a.is_kernel_arg else 'shared tensor'} {a.name!r}"
    return f"the shared tensor made at {a.site}" if a.site else f"shared tensor #{a.id}"
