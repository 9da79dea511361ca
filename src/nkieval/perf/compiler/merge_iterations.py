"""Pass ``merge-iterations``: consecutive iterations of an ``affine_range`` loop that each run the same
elementwise instruction on adjacent slices of the same tiles become one wider instruction.

``affine_range`` declares that iterations carry no dependency, which is what lets the compiler
vectorise them; an instruction of k·N elements pays the fixed per-instruction cost once instead of k
times. A group of instances (same source line, opcode, attributes and operand layout, innermost loop
index i, i+1, ...) is merged only when, for every operand, the instances either read the very same
region or touch adjacent dense slices of the same allocation (instance i+1 starting where instance i
ends), and no instance conflicts with another or with the instructions it moves ahead of. Only plain
elementwise opcodes are merged (no scans, reductions into an accumulator, statistics or index-dependent
instructions); anything else stays as it ran.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from nkieval.perf.compiler.model import PassContext
from nkieval.perf.compiler.regions import conflicts, dense, same_region
from nkieval.sim.trace import OperandAccess, TraceRecord

MERGEABLE = ("tensor_copy", "tensor_scalar", "tensor_tensor", "scalar_tensor_tensor", "activation", "memset",
             "reciprocal")
ENGINES = ("vector", "scalar", "gpsimd")
WINDOW = 256  # the most records a member may move ahead over (bounds the dependency checks: O(n * WINDOW))


@dataclass
class _Group:
    first: int
    members: list[int] = field(default_factory=list)
    last_index: int = 0


def _key(r: TraceRecord) -> tuple | None:
    if r.engine not in ENGINES or r.opcode not in MERGEABLE or r.attrs.get("reduce") or r.attrs.get("mask"):
        return None
    if not r.loops or r.loops[-1][0] != "affine" or r.loops[-1][2] < 2:
        return None
    ops = tuple((o.role, o.mode, o.buffer, o.dtype, o.partition_start, o.partitions, o.shape, o.pattern)
                for o in r.operands)
    return (r.program, r.file, r.line, r.opcode, r.engine, repr(r.attrs), r.loops[:-1], r.loops[-1][2], ops)


def _follows(a: OperandAccess, b: OperandAccess) -> bool:
    """Whether operand ``b`` of the next instance continues operand ``a``: the same region read again, or
    the adjacent dense slice of the same allocation."""
    if same_region(a, b):
        return a.mode == "r"
    return (a.alloc == b.alloc and dense(a) and dense(b) and b.addr_lo == a.addr_hi
            and a.nbytes == b.nbytes)


def _merged(recs: list[TraceRecord]) -> TraceRecord:
    first, k = recs[0], len(recs)
    ops = []
    for p, o in enumerate(first.operands):
        last = recs[-1].operands[p]
        if same_region(o, last):
            ops.append(o)
            continue
        free = 1
        for s in o.shape[1:]:
            free *= s
        width = free * k
        ops.append(replace(o, shape=(o.shape[0], width), pattern=((1, width),), addr_hi=last.addr_hi,
                           nbytes=o.nbytes * k, contiguous_bytes=last.addr_hi - o.addr_lo))
    return replace(first, operands=ops, attrs={**first.attrs, "merged_iterations": k})


def run(records: list[TraceRecord], ctx: PassContext) -> list[TraceRecord]:
    group_of: dict[int, _Group] = {}  # member position -> its group
    open_groups: dict[tuple, _Group] = {}
    for i, r in enumerate(records):
        key = _key(r)
        if key is None:
            continue
        g = open_groups.get(key)
        if g is not None and _joins(records, g, i, group_of):
            g.members.append(i)
            g.last_index = r.loops[-1][1]
            group_of[i] = g
            continue
        g = _Group(i, [i], r.loops[-1][1])
        open_groups[key] = g
        group_of[i] = g
    merged = {g.first: g for g in group_of.values() if len(g.members) > 1}
    if not merged:
        return records
    moved = {m for g in merged.values() for m in g.members[1:]}
    out = []
    for i, r in enumerate(records):
        if i in moved:
            continue
        g = merged.get(i)
        out.append(_merged([records[m] for m in g.members]) if g is not None else r)
    ctx.notes.append(f"{len(moved) + len(merged)} instructions of {len(merged)} affine_range groups merged into "
                     f"{len(merged)} wider instruction(s)")
    ctx.changed += len(moved)
    return out


def _joins(records: list[TraceRecord], g: _Group, i: int, group_of: dict[int, _Group]) -> bool:
    r = records[i]
    prev = records[g.members[-1]]
    if r.loops[-1][1] != g.last_index + 1 or i - g.first > WINDOW:
        return False
    if not all(_follows(a, b) for a, b in zip(prev.operands, r.operands)):
        return False
    for m in g.members:
        if conflicts(records[m], r):
            return False
    for j in range(g.first + 1, i):
        other = group_of.get(j)
        if other is g or (other is not None and other.first < g.first):
            continue  # (a member of this group, or of one placed before it: the order with ``r`` is kept)
        if conflicts(records[j], r):
            return False
    return True
