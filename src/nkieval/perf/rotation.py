"""The compiler's multi-buffering, modelled explicitly: rotation depth per allocation site.

The NKI compiler gives each tile allocated inside a loop several rotating buffers, so that
iteration ``i + 1`` can load while iteration ``i`` computes; SBUF/PSUM capacity bounds how
many (research note perf-model.md §5.4). From the trace's allocation records we find the
sites that allocate repeatedly, how many of their instances the kernel keeps alive at once,
and give each site ``k`` buffers: at least what the kernel needs, up to ``rotation_depth``
while the partition still fits (smallest tiles first, then the sites with most instances). Instance ``j`` of a site then reuses
the buffer of instance ``j - k`` and must wait until that one is dead (a WAR edge), which is
what limits pipelining. Demand beyond capacity is reported as a spill estimate.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from dataclasses import dataclass, field
from operator import attrgetter

import numpy as np

from nkieval.sim.trace import AllocationRecord, Trace


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
    """Per-site buffer counts and, per allocation, the earlier allocation whose buffer it reuses."""

    sites: list[SiteRotation] = field(default_factory=list)
    # alloc id -> alloc id it must wait for; per site in allocation order (a reused instance comes first)
    reuse_of: dict[int, int] = field(default_factory=dict)
    demand_bytes: dict[str, int] = field(default_factory=dict)  # buffer -> bytes per partition
    capacity_bytes: dict[str, int] = field(default_factory=dict)
    excess_bytes: dict[str, int] = field(default_factory=dict)  # bytes per partition beyond capacity


_ALLOC_SEQ = attrgetter("alloc_seq")
_BYTES_PER_PARTITION = attrgetter("bytes_per_partition")


def _max_live(allocs: list[AllocationRecord], end_seq: int) -> int:
    """Most allocations alive at once: frees at a sequence number count before allocations at it.

    The live count peaks right after an allocation: after the k-th allocation (in sequence order) it
    is k minus the frees at or before that allocation's sequence number.
    """
    n = len(allocs)
    if n >= 64:
        al = np.sort(np.fromiter([a.alloc_seq for a in allocs], np.int64, n))
        fr = np.sort(np.fromiter([end_seq + 1 if a.free_seq is None else a.free_seq for a in allocs], np.int64, n))
        return max(0, int((np.arange(1, n + 1) - np.searchsorted(fr, al, side="right")).max()))
    al = sorted([a.alloc_seq for a in allocs])
    fr = sorted([end_seq + 1 if a.free_seq is None else a.free_seq for a in allocs])
    best = 0
    for k, s in enumerate(al, 1):
        live = k - bisect_right(fr, s)
        if live > best:
            best = live
    return best


def plan_rotation(trace: Trace, depth: int, capacity: dict[str, int]) -> RotationPlan:
    """Rotation depth per site for ``trace`` with at most ``depth`` buffers per site (≥ what the kernel needs)."""
    groups: dict[tuple[int, str, str], list[AllocationRecord]] = defaultdict(list)
    singles: dict[tuple[int, str], int] = defaultdict(int)
    for a in trace.allocations.values():
        if a.buffer not in ("sbuf", "psum") or a.kernel_arg:
            continue
        if a.site is None:
            singles[(a.program, a.buffer)] += a.bytes_per_partition
            continue
        groups[(a.program, a.buffer, a.site)].append(a)
    plan = RotationPlan(capacity_bytes=dict(capacity))
    end_seq = len(trace.records)
    per_prog: dict[tuple[int, str], list[list]] = defaultdict(list)  # [size, need, depth, key]
    for key, allocs in groups.items():
        prog, buf, _site = key
        size = max(map(_BYTES_PER_PARTITION, allocs))
        if len(allocs) == 1:
            singles[(prog, buf)] += size
            continue
        # The simulator frees a loop tile after allocating its successor, so it sees one extra.
        need = max(1, _max_live(allocs, end_seq) - 1)
        per_prog[(prog, buf)].append([size, need, need, key])
    for pb in set(per_prog) | set(singles):
        prog, buf = pb
        cap = int(capacity.get(buf, 0))
        items = per_prog.get(pb, [])
        demand = singles.get(pb, 0) + sum(s * d for s, _, d, _ in items)
        for level in range(2, depth + 1):
            # smallest tiles first; among equal sizes, the site with more instances (the one whose
            # loads repeat most, so double-buffering hides the most transfers)
            for it in sorted(items, key=lambda x: (x[0], -len(groups[x[3]]))):
                if it[2] >= level:
                    continue
                extra = it[0] * (level - it[2])
                if demand + extra <= cap:
                    demand += extra
                    it[2] = level
        plan.demand_bytes[buf] = max(plan.demand_bytes.get(buf, 0), demand)
        if cap and demand > cap:
            plan.excess_bytes[buf] = max(plan.excess_bytes.get(buf, 0), demand - cap)
        for size, need, k, key in items:
            allocs = sorted(groups[key], key=_ALLOC_SEQ)
            plan.sites.append(SiteRotation(key[2], buf, prog, size, len(allocs), need, k))
            ids = [a.id for a in allocs]
            plan.reuse_of.update(zip(ids[k:], ids))  # instance j reuses instance j - k
    return plan
