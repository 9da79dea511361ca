"""The compiler's multi-buffering, modelled explicitly: rotation depth per allocation site.

The NKI compiler gives each tile allocated inside a loop several rotating buffers, so that
iteration ``i + 1`` can load while iteration ``i`` computes; SBUF/PSUM capacity bounds how
many (research note perf-model.md §5.4). From the trace's allocation records we find the
sites that allocate repeatedly, how many of their instances the kernel keeps alive at once (by
access live range, first to last access, as the simulator's capacity check counts),
and give each site ``k`` buffers: what the kernel needs (``need``, the instances live at once), and up to
``rotation_depth`` sets of ``need`` while the partition still fits (the site refilled most often first: most
instances per set, then the smaller tile; a set that does not fit whole gets the buffers that do). Instance ``j`` of a site then reuses
the buffer of instance ``j - k`` and must wait until that one is dead (a WAR edge), which is
what limits pipelining. Live tiles beyond the usable SBUF (the trace's own peak, not this plan's demand) are the
spill estimate's business (``perf/spill.py``).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import itemgetter

import numpy as np

from nkieval.perf.compiled import ENABLED as _NATIVE_DEFAULT
from nkieval.perf.compiled import module as _schedule_c  # the access-span pass compiled
from nkieval.sim.trace import Trace

_NATIVE = _NATIVE_DEFAULT  # tests switch the compiled pass off to hold it to the Python one


@dataclass(frozen=True)
class SiteRotation:
    site: str
    buffer: str
    program: int
    bytes_per_partition: int
    instances: int
    live_needed: int  # instances the kernel keeps alive at once
    depth: int  # buffers the model gives the site


@dataclass
class RotationPlan:
    """Per-site buffer counts and, per site, its instances in allocation order (instance ``j`` reuses the
    buffer of instance ``j - depth``)."""

    sites: list[SiteRotation] = field(default_factory=list)
    # per entry of ``sites``: (alloc_seq, free_seq, bytes per partition, alloc id, partition offset, address) of
    # each instance, in allocation order
    instances: list[list[tuple[int, int | None, int, int, int, int]]] = field(default_factory=list, repr=False)
    demand_bytes: dict[str, int] = field(default_factory=dict)  # buffer -> bytes per partition
    capacity_bytes: dict[str, int] = field(default_factory=dict)
    # buffer -> bytes per partition the extra rotation sets (beyond one set of what the kernel keeps alive) hold
    # when, with the single (long-lived) tiles, they do not fit: the spill estimate runs with the usable capacity
    # less this, so that it evicts what overflows, the trace's own peak plus these sets less the capacity
    # (``plan_rotation(..., spill_singles=True)``; 0 otherwise)
    spill_room_bytes: dict[str, int] = field(default_factory=dict)

    @property
    def reuse_of(self) -> dict[int, int]:
        """alloc id -> alloc id it must wait for (the instance ``depth`` before it at its site)."""
        out: dict[int, int] = {}
        for s, inst in zip(self.sites, self.instances):
            ids = [i[3] for i in inst]
            out.update(zip(ids[s.depth:], ids))
        return out


_SEQ = itemgetter(0)


def _max_live(alloc_seqs: Sequence[int], free_seqs: Sequence[int | None], end_seq: int) -> int:
    """Most allocations alive at once: frees at a sequence number count before allocations at it.

    ``alloc_seqs[i]`` / ``free_seqs[i]``: where allocation ``i`` is allocated / freed (None: never, i.e. after
    ``end_seq``). The live count peaks right after an allocation: after the k-th allocation (in sequence
    order) it is k minus the frees at or before that allocation's sequence number.
    """
    n = len(alloc_seqs)
    fr_list = [end_seq + 1 if f is None else f for f in free_seqs] if None in free_seqs else list(free_seqs)
    if n >= 64:
        # kind="stable": the sequence numbers come nearly sorted, which that sort handles in about linear time
        al = np.sort(np.array(alloc_seqs, dtype=np.int64), kind="stable")
        fr = np.sort(np.array(fr_list, dtype=np.int64), kind="stable")
        return max(0, int((np.arange(1, n + 1) - np.searchsorted(fr, al, side="right")).max()))
    al_s = sorted(alloc_seqs)
    fr_list.sort()
    best = 0
    for k, s in enumerate(al_s, 1):
        live = k - bisect_right(fr_list, s)
        if live > best:
            best = live
    return best


def _access_spans(trace: Trace) -> tuple[dict[int, int], dict[int, int]]:
    """Per on-chip allocation: the trace positions of its first and of its last access (the compiled loop where
    built; this one is the reference)."""
    if _NATIVE and _schedule_c is not None and isinstance(trace.records, list):
        try:
            return _schedule_c.access_spans(trace.records)
        except OverflowError:  # an allocation id beyond the compiled pass's array: the loop below
            pass
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for i, r in enumerate(trace.records):
        for o in r.operands:
            if o.buffer != "hbm":
                a = o.alloc
                if a not in first:
                    first[a] = i
                last[a] = i
    return first, last


def plan_rotation(trace: Trace, depth: int, capacity: dict[str, int], spill_singles: bool = False) -> RotationPlan:
    """Rotation depth per site for ``trace`` with at most ``depth`` buffers per site (≥ what the kernel needs).

    ``spill_singles``: the extra sets may also take the room of tiles allocated once (long-lived buffers, which
    the kernel touches a slice at a time); the bytes so taken are ``spill_room_bytes``, room the spill estimate
    must then make by evicting (``SchedulePolicy.rotation_room="spill"``)."""
    # per site: (alloc_seq, free_seq, bytes per partition, id, partition offset, address) of each instance, read
    # in one pass over the allocation records (a trace can hold many of them: each is visited once, and makes
    # one tuple)
    groups: dict[tuple[int, str, str], list[tuple]] = defaultdict(list)
    singles: dict[tuple[int, str], int] = defaultdict(int)
    for a in trace.allocations.values():
        if a.buffer not in ("sbuf", "psum") or a.kernel_arg:
            continue
        if a.site is None:
            singles[(a.program, a.buffer)] += a.bytes_per_partition
            continue
        groups[(a.program, a.buffer, a.site)].append((a.alloc_seq, a.free_seq, a.bytes_per_partition, a.id,
                                                      a.partition_offset, a.address))
    plan = RotationPlan(capacity_bytes=dict(capacity))
    end_seq = len(trace.records)
    first, last = _access_spans(trace)
    per_prog: dict[tuple[int, str], list[list]] = defaultdict(list)  # [size, need, depth, key]
    for key, rows in groups.items():
        prog, buf, _site = key
        size = max(r[2] for r in rows)
        if len(rows) == 1:
            singles[(prog, buf)] += size
            continue
        # Instances alive at once by access live range (first to last access, as the compiler allocates and
        # the simulator's capacity check counts), not by Python object lifetime: a loop tile rebound after the
        # instruction that makes its successor outlives its last use, and tiles kept in a list are all live.
        ids = [r[3] for r in rows if r[3] in first]
        need = max(1, _max_live([first[i] for i in ids], [last[i] + 1 for i in ids], end_seq))
        per_prog[(prog, buf)].append([size, need, need, key])
    for pb in set(per_prog) | set(singles):
        prog, buf = pb
        cap = int(capacity.get(buf, 0))
        items = per_prog.get(pb, [])
        fixed = 0 if spill_singles else singles.get(pb, 0)
        demand = fixed + sum(s * d for s, _, d, _ in items)
        sets_needed = sum(s * d for s, _, d, _ in items)
        for level in range(2, depth + 1):
            # the site refilled most often first (instances per set of live ones: another set lets each
            # refill overlap the use of the set before, so this one hides the most waits), then the smaller
            # tile: a kernel's long-lived accumulators, refilled a few times, come after its streamed loads
            for it in sorted(items, key=lambda x: (-len(groups[x[3]]) / x[1], x[0])):
                size, need, have = it[0], it[1], it[2]
                # a level is one more set of what the kernel keeps alive at once: a loop that builds a list of
                # 16 tiles is double-buffered by 16 more, so the next iteration's list can load while this
                # one's is read; what the capacity leaves of a set is still given (its first tiles prefetch)
                want = level * need - have
                if want <= 0:
                    continue
                fit = min(want, (cap - demand) // size) if size else want
                if fit > 0:
                    demand += size * fit
                    it[2] = have + fit
        total = demand - fixed + singles.get(pb, 0)
        plan.demand_bytes[buf] = max(plan.demand_bytes.get(buf, 0), total)
        if spill_singles and total > cap:
            # The extra sets are held throughout, so the room the kernel's own tiles may use is the capacity less
            # all of them. (Reserving only the overflow, total - cap, let a kernel whose own peak is well below the
            # capacity keep every extra set and spill nothing, however far the sum overflowed.)
            plan.spill_room_bytes[buf] = max(plan.spill_room_bytes.get(buf, 0), demand - sets_needed)
        for size, need, k, key in items:
            rows = sorted(groups[key], key=_SEQ)  # allocation order (stable for equal sequence numbers)
            plan.sites.append(SiteRotation(key[2], buf, prog, size, len(rows), need, k))
            plan.instances.append(rows)
    return plan
