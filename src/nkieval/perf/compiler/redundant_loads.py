"""Pass ``redundant-loads``: a load that repeats, in the next iteration of its innermost loop, the load
of the previous iteration (same HBM bytes, unchanged since) is hoisted out of that loop: the first
iteration's tile is kept and read by the later iterations, and the repeated DMAs disappear.

Conservative, so that it only does what loop-invariant code motion certainly may:

* the load is a plain DMA (not indirect) from one HBM region into a whole SBUF allocation that nothing
  else ever writes, and the same holds for the load it repeats;
* both come from the same source line and their loop nests differ only in the innermost loop's index
  (an ``affine_range`` loop): a load invariant in an *outer* loop is left alone, as the compiler would
  need to keep a whole inner loop's tiles alive to hoist it (the NKI matmul tutorial's "hoist loads" step
  is such a manual rewrite, and its published speed-up shows the compiler did not do it);
* nothing writes the source allocation between the two loads.

The kept tile lives until the last read of the tiles it replaces.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from nkieval.perf.compiler.model import PassContext
from nkieval.sim.trace import OperandAccess, TraceRecord


def _load(r: TraceRecord) -> tuple[OperandAccess, OperandAccess] | None:
    """(source, destination) of a plain HBM -> SBUF DMA, else None."""
    if r.engine != "dma" or r.attrs.get("indirect") or r.opcode != "dma_copy" or len(r.operands) != 2:
        return None
    dst, src = (r.operands if r.operands[0].mode == "w" else r.operands[::-1])
    if dst.mode != "w" or src.mode != "r" or src.buffer != "hbm" or dst.buffer != "sbuf":
        return None
    return src, dst


def _outer(loops: tuple[tuple[str, int, int], ...]) -> tuple | None:
    """The loop nest without the innermost index, if the innermost loop is an ``affine_range``."""
    if not loops or loops[-1][0] != "affine":
        return None
    kind, _, trips = loops[-1]
    return (*loops[:-1], (kind, trips))


def run(records: list[TraceRecord], ctx: PassContext) -> list[TraceRecord]:
    allocs = ctx.trace.allocations
    writes: Counter[int] = Counter(o.alloc for r in records for o in r.operands if "w" in o.mode)
    hbm_writes: Counter[int] = Counter()  # writes seen so far, per HBM allocation
    last: dict[tuple, tuple[int, int, int]] = {}  # load key -> (kept alloc, innermost index, hbm writes then)
    alias: dict[int, int] = {}  # dropped tile's alloc -> kept tile's alloc
    dropped: set[int] = set()
    for i, r in enumerate(records):
        ld = _load(r)
        if ld is not None:
            src, dst = ld
            a = allocs.get(dst.alloc)
            whole = (a is not None and writes[dst.alloc] == 1 and dst.partition_start == a.partition_offset
                     and dst.addr_lo == a.address and dst.addr_hi == a.address + a.bytes_per_partition
                     and dst.partitions == a.shape[0] and dst.nbytes == dst.partitions * a.bytes_per_partition)
            outer = _outer(r.loops)
            if whole and outer is not None:
                key = (r.program, r.file, r.line, outer, src.alloc, src.addr_lo, src.addr_hi, src.pattern,
                       src.shape, src.dtype, dst.shape, dst.dtype, dst.pattern, repr(r.attrs))
                idx = r.loops[-1][1]
                prev = last.get(key)
                if prev is not None and prev[1] == idx - 1 and prev[2] == hbm_writes[src.alloc]:
                    alias[dst.alloc] = prev[0]
                    dropped.add(i)
                    last[key] = (prev[0], idx, prev[2])
                else:
                    last[key] = (dst.alloc, idx, hbm_writes[src.alloc])
        for o in r.operands:
            if "w" in o.mode and o.buffer == "hbm":
                hbm_writes[o.alloc] += 1
    if not dropped:
        return records
    out = []
    saved = 0
    for i, r in enumerate(records):
        if i in dropped:
            saved += sum(o.nbytes for o in r.operands if "w" in o.mode)
            continue
        if any(o.alloc in alias for o in r.operands):
            ops = []
            for o in r.operands:
                k = alias.get(o.alloc)
                if k is None:
                    ops.append(o)
                    continue
                old, new = allocs[o.alloc], allocs[k]
                ops.append(replace(o, alloc=k, addr_lo=o.addr_lo - old.address + new.address,
                                   addr_hi=o.addr_hi - old.address + new.address,
                                   partition_start=o.partition_start - old.partition_offset + new.partition_offset))
                ctx.extend_free[k] = max(ctx.extend_free.get(k, 0), r.seq)
            r = replace(r, operands=ops)
        out.append(r)
    ctx.notes.append(f"{len(dropped)} loop-invariant load(s) hoisted out of their innermost affine_range loop "
                     f"({saved} bytes not moved again)")
    ctx.changed += len(dropped)
    return out
