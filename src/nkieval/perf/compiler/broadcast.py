"""Pass ``broadcast-lowering``: lower a partition broadcast (``nl.broadcast_to`` of a [1, F] tile to [P, F])
the way the documented instruction rules allow at least cost.

The simulator lowers it as: ``memset`` of a ones[1, P] stationary, per 512-column chunk one K = 1
``nc_matmul`` into PSUM and one ``tensor_copy`` of that chunk to an fp32 SBUF tile, then one more full
``tensor_copy`` of that tile to the result tile. The last copy is the simulator's, not the hardware's:
``nki.isa.tensor_copy`` casts to its destination's dtype, so each PSUM evacuation can write the result tile
directly. This pass therefore

* forwards the evacuations to the result tile and drops the full copy, when the intermediate tile is read by
  nothing else and the copy reads it whole, shape for shape (a free-dimension broadcast keeps the copy);
* places each evacuation on the least loaded engine allowed to read PSUM (Vector; Scalar from NeuronCore-v3):
  ``nl.broadcast_to`` has no ``engine=`` argument, so the kernel cannot have pinned these instructions.

A group is recognised only inside one source line (one ``nl.broadcast_to`` call): a memset of 1.0 into a
[1, P] SBUF tile, K = 1 matmuls with that tile stationary, the evacuations of their PSUM tiles, and the
full copy. A kernel that writes the same instructions as separate ``nisa`` calls is left alone.

The other documented way to broadcast across partitions, ``nc_stream_shuffle`` with a zero mask once per
32-partition quadrant (nki-library ``stream_shuffle_broadcast``), costs ``max(64, F)`` Vector cycles per
quadrant, more Vector time than one evacuation of F columns; it is not chosen.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from nkieval.hardware import get_target
from nkieval.perf.compiler.engine_balance import ENGINES, allowed_engines
from nkieval.perf.compiler.model import PassContext
from nkieval.perf.compiler.regions import dense
from nkieval.perf.costs import cost_of
from nkieval.perf.params import load_params
from nkieval.sim.trace import AllocationRecord, OperandAccess, TraceRecord

_ISZ = {"float32": 4, "int32": 4, "uint32": 4, "bfloat16": 2, "float16": 2, "int16": 2, "uint16": 2,
        "float8_e4m3": 1, "float8_e5m2": 1, "int8": 1, "uint8": 1}


@dataclass
class _Group:
    """One recognised partition broadcast: the ones tile, the PSUM tiles its matmuls wrote, the indices of the
    evacuation copies, the intermediate tile and the index of the full copy to the result."""

    ones: int
    site: tuple[str | None, int | None, int]
    psum: set[int] = field(default_factory=set)
    evacuations: list[int] = field(default_factory=list)
    staging: int | None = None
    final: int | None = None


def _site(r: TraceRecord) -> tuple[str | None, int | None, int]:
    return r.file, r.line, r.program


def _ones_memset(r: TraceRecord) -> OperandAccess | None:
    if r.opcode != "memset" or r.attrs.get("value") not in (1, 1.0) or r.attrs.get("mask"):
        return None
    w = r.writes()
    if len(w) != 1 or w[0].buffer != "sbuf" or w[0].partitions != 1:
        return None
    return w[0]


def _operand(r: TraceRecord, role: str) -> OperandAccess | None:
    return next((o for o in r.operands if o.role == role), None)


def _find_groups(records: list[TraceRecord]) -> list[_Group]:
    groups: list[_Group] = []
    open_: dict[tuple[str | None, int | None, int], _Group] = {}
    for i, r in enumerate(records):
        ones = _ones_memset(r)
        if ones is not None:
            open_[_site(r)] = _Group(ones.alloc, _site(r))
            continue
        g = open_.get(_site(r))
        if g is None:
            continue
        if r.opcode == "nc_matmul" and r.attrs.get("K") == 1:
            st, dst = _operand(r, "stationary"), _operand(r, "dst")
            if st is not None and dst is not None and st.alloc == g.ones and dst.buffer == "psum":
                g.psum.add(dst.alloc)
                continue
        if r.opcode == "tensor_copy" and not r.attrs.get("mask"):
            src, dst = _operand(r, "src"), _operand(r, "dst")
            if src is None or dst is None or dst.buffer != "sbuf":
                del open_[g.site]
                continue
            if src.alloc in g.psum and g.staging in (None, dst.alloc):
                g.staging = dst.alloc
                g.evacuations.append(i)
                continue
            if src.alloc == g.staging and g.evacuations:
                g.final = i
                groups.append(g)
        del open_[g.site]
    return groups


def _forward(evac: OperandAccess, staging: AllocationRecord, result: OperandAccess,
             result_alloc: AllocationRecord) -> OperandAccess | None:
    """The evacuation's destination moved from the staging tile to the same elements of the result tile."""
    s_isz, r_isz = _ISZ.get(staging.dtype), _ISZ.get(result_alloc.dtype)
    if s_isz is None or r_isz is None:
        return None
    lo = (evac.addr_lo - staging.address) // s_isz * r_isz + result_alloc.address
    hi = (evac.addr_hi - staging.address) // s_isz * r_isz + result_alloc.address
    return replace(evac, alloc=result.alloc, dtype=result.dtype, addr_lo=lo, addr_hi=hi,
                   partition_start=result.partition_start, nbytes=evac.nbytes // s_isz * r_isz,
                   contiguous_bytes=evac.contiguous_bytes // s_isz * r_isz, name=result.name)


def _forwardable(g: _Group, records: list[TraceRecord], allocs: dict[int, AllocationRecord]) -> bool:
    """Whether the full copy reads the staging tile whole, shape for shape, and nothing else reads it."""
    if g.final is None or g.staging is None or g.staging not in allocs:
        return False
    fin = records[g.final]
    src, dst = _operand(fin, "src"), _operand(fin, "dst")
    st = allocs[g.staging]
    if src is None or dst is None or dst.alloc not in allocs or not dense(src) or not dense(dst):
        return False
    if src.shape != dst.shape or tuple(src.shape) != tuple(st.shape) or src.partition_start != 0:
        return False
    if src.nbytes != st.bytes_per_partition * src.partitions:
        return False
    readers = [i for i, r in enumerate(records) for o in r.reads() if o.alloc == g.staging]
    return readers == [g.final]


def run(records: list[TraceRecord], ctx: PassContext) -> list[TraceRecord]:
    groups = _find_groups(records)
    if not groups:
        return records
    allocs = ctx.trace.allocations
    drop: set[int] = set()
    evacuations: set[int] = set()
    forwarded = 0
    out = list(records)
    for g in groups:
        evacuations.update(g.evacuations)
        if not _forwardable(g, out, allocs):
            continue
        fin = out[g.final]
        result = _operand(fin, "dst")
        moved = [_forward(_operand(out[i], "dst"), allocs[g.staging], result, allocs[result.alloc])
                 for i in g.evacuations]
        if any(m is None for m in moved):
            continue
        for i, m in zip(g.evacuations, moved):
            r = out[i]
            out[i] = replace(r, operands=[m if o.role == "dst" else o for o in r.operands])
        first = out[g.evacuations[0]].seq  # the result tile is now written from the first evacuation on
        ctx.extend_alloc[result.alloc] = min(first, ctx.extend_alloc.get(result.alloc, first))
        drop.add(g.final)
        forwarded += 1
    placed = _place(out, evacuations, ctx.trace.target)
    if forwarded:
        ctx.notes.append(f"{forwarded} partition broadcast(s): PSUM evacuated straight into the result tile "
                         f"({len(drop)} full copies removed)")
    if placed:
        ctx.notes.append(", ".join(f"{n} evacuation(s) {a}->{b}" for (a, b), n in sorted(placed.items())))
    ctx.changed += len(drop) + sum(placed.values())
    return [r for i, r in enumerate(out) if i not in drop]


def _place(records: list[TraceRecord], evacuations: set[int], target: str) -> dict[tuple[str, str], int]:
    """Put each evacuation on the allowed engine whose busy time so far plus its own cost there is least."""
    if not evacuations:
        return {}
    p = load_params(get_target(target))
    busy = dict.fromkeys(ENGINES, 0.0)
    moved: dict[tuple[str, str], int] = {}
    for i, r in enumerate(records):
        if r.engine not in ENGINES:
            continue
        choices = allowed_engines(r, target) if i in evacuations else (r.engine,)
        if len(choices) > 1:
            costs = {e: cost_of(r if e == r.engine else replace(r, engine=e), p)[0].occ for e in choices}
            best = min(choices, key=lambda e: (busy[e] + costs[e], e != r.engine))
            if best != r.engine:
                moved[(r.engine, best)] = moved.get((r.engine, best), 0) + 1
                records[i] = replace(r, engine=best)
            busy[best] += costs[best]
        else:
            busy[r.engine] += cost_of(r, p)[0].occ
    return moved
