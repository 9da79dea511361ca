"""The Beta-1 compiler's assignment-copy elision, applied to the trace after a launch.

``x[i] = nl.load(src)`` or ``x[i] = nl.exp(y)`` evaluates the right-hand side into a new tile and then
assigns it: run eagerly, that is the producing instruction (a DMA, an activation …) into a temporary
tile plus a Vector ``tensor_copy`` into ``x[i]``. Beta 1's compiler writes the result where it is
assigned: one DMA straight into ``x[i]``, no temporary, no copy (the tutorials' load idiom; the matrix
multiplication tutorial's 85 % HFU leaves no room for a copy per loaded tile on the Vector engine). The
simulator keeps the eager evaluation (its values are right either way); this pass rewrites the trace, the
performance model's input, to what the compiler emits.

A copy is elided only where that changes nothing a later instruction could observe:

* it copies a whole SBUF tile into SBUF, same shape (no reshaping) and the same dtype, or a different one
  when an elementwise compute instruction produced the tile: compute engines calculate in fp32 and cast on
  writing, so ``x_fp8[i] = nl.divide(a, s)`` is one instruction writing fp8 (a DMA does not cast: a load
  assigned to a tile of another dtype keeps its copy);
* exactly one instruction writes the temporary, writing just the region the copy reads (a plain write, not
  an accumulation), and nothing but the copy reads it;
* the destination was allocated before the producer ran, and no instruction between the producer and the
  copy touches it (moving the destination's write back to the producer reorders nothing).

The producer's operand then names the copy's destination, the copy leaves the trace and so does the
temporary's allocation; record positions (``seq``, ``alloc_seq``/``free_seq``) are renumbered.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from dataclasses import replace

from nkieval.sim.context import SimContext, kernel_recorder
from nkieval.sim.program.replay import register_note_hook
from nkieval.sim.trace import OperandAccess, Trace, TraceRecord

# producers that may write the destination's dtype instead of the temporary's: elementwise instructions of the
# compute engines, whose output dtype is free (ISA: arithmetic in fp32, cast on write). Instructions whose
# output has a fixed meaning or dtype (indices, statistics, random bits) are not listed.
_CASTING_PRODUCERS = frozenset({"activation", "tensor_scalar", "tensor_tensor", "scalar_tensor_tensor", "tensor_copy",
                                "tensor_reduce", "reciprocal", "exponential", "activation_reduce",
                                "tensor_scalar_reduce", "tensor_tensor_scan", "tensor_scalar_cumulative",
                                "affine_select", "tensor_copy_predicated", "select_reduce", "range_select"})


class _Elider:
    """A launch's ``after_run`` step: the records noted during the run (the records themselves)."""

    __slots__ = ("copies", "zeroings")

    def __init__(self) -> None:
        self.copies: list[TraceRecord] = []
        self.zeroings: list[TraceRecord] = []

    def __call__(self, trace: Trace) -> None:
        elide(trace, self.copies, self.zeroings)
        self.copies, self.zeroings = [], []


def _note(ctx: SimContext, opcode: str, kind: str) -> None:
    """Remember the ``opcode`` record the current program just recorded, as a ``kind`` hint of its launch's
    elision step (registered with the launch's first hint). A recorded program keeps the hint, so the judge's
    replay gives it again."""
    rec = kernel_recorder()
    if rec is not None:
        rec.note(f"beta1.elide.{kind}")
    if not ctx.options.record_trace:
        return
    launch = ctx.launch
    recs = ctx.trace.records
    # this program's newest record: other programs of an LNC-2 launch may have appended since
    for k in range(len(recs) - 1, -1, -1):
        rec = recs[k]
        if rec.program == ctx.program_id:
            break
    else:
        return
    if rec.opcode != opcode:
        return
    with launch.lock:
        step = next((f for f in launch.after_run if isinstance(f, _Elider)), None)
        if step is None:
            step = _Elider()
            launch.after_run.append(step)
        getattr(step, kind).append(rec)


def note_assignment_copy(ctx: SimContext) -> None:
    """The ``tensor_copy`` just recorded assigns an expression's result (``x[i] = value``)."""
    _note(ctx, "tensor_copy", "copies")


def note_psum_zeroing(ctx: SimContext) -> None:
    """The ``memset`` just recorded zeroes a PSUM tile for ``nl.zeros(..., buffer=nl.psum)``."""
    _note(ctx, "memset", "zeroings")


register_note_hook("beta1.elide.copies", note_assignment_copy)
register_note_hook("beta1.elide.zeroings", note_psum_zeroing)


def _by_role(rec: TraceRecord, role: str) -> OperandAccess | None:
    for o in rec.operands:
        if o.role == role:
            return o
    return None


def _same_region(a: OperandAccess, b: OperandAccess) -> bool:
    return (a.alloc == b.alloc and a.partition_start == b.partition_start and a.partitions == b.partitions
            and a.addr_lo == b.addr_lo and a.addr_hi == b.addr_hi and a.shape == b.shape and a.pattern == b.pattern
            and a.dtype == b.dtype)


def _moved(dst: OperandAccess, out: OperandAccess) -> OperandAccess:
    """``dataclasses.replace(dst, role=out.role, mode=out.mode, name=out.name)``, built directly (``replace`` walks
    the fields by name: a few microseconds per elided copy, of which a flash-attention kernel has thousands)."""
    return OperandAccess(out.role, out.mode, dst.buffer, dst.alloc, dst.shape, dst.dtype, dst.partition_start,
                         dst.partitions, dst.addr_lo, dst.addr_hi, dst.nbytes, dst.contiguous_bytes, dst.pattern,
                         out.name)


def _touched_between(positions: list[int], lo: int, hi: int) -> bool:
    """Whether any of the sorted ``positions`` lies strictly between ``lo`` and ``hi``."""
    return bisect_right(positions, lo) < bisect_left(positions, hi)


def elide(trace: Trace, copies: list[TraceRecord], zeroings: list[TraceRecord] = ()) -> int:
    """Remove the elidable ``copies`` and ``zeroings`` from ``trace`` (see module docstring); returns how many
    records were removed."""
    if not copies and not zeroings:
        return 0
    recs = trace.records
    n = len(recs)

    def positions(hints: list[TraceRecord]) -> list[int]:
        # a record's ``seq`` is its position (Trace.append); a hint no longer there is skipped
        return sorted(r.seq for r in hints if 0 <= r.seq < n and recs[r.seq] is r)

    at_copies, at_zeroings = positions(copies), positions(zeroings)
    # who reads, writes and touches the allocations the hinted records name (only those are asked about)
    wanted = {o.alloc for i in (*at_copies, *at_zeroings) for o in recs[i].operands}
    readers: dict[int, list[int]] = defaultdict(list)
    writers: dict[int, list[int]] = defaultdict(list)
    touches: dict[int, list[int]] = defaultdict(list)
    for i, r in enumerate(recs):
        for o in r.operands:
            a = o.alloc
            if a not in wanted:
                continue
            if "r" in o.mode:
                readers[a].append(i)
            if "w" in o.mode:
                writers[a].append(i)
            t = touches[a]
            if not t or t[-1] != i:
                t.append(i)
    dropped: list[int] = []
    gone: set[int] = set()
    for i in at_copies:
        c = recs[i]
        if c.opcode != "tensor_copy" or len(c.operands) != 2:
            continue
        dst, src = _by_role(c, "dst"), _by_role(c, "src")
        if (dst is None or src is None or dst.mode != "w" or src.mode != "r" or dst.buffer != "sbuf"
                or src.buffer != "sbuf" or dst.shape != src.shape or dst.alloc == src.alloc):
            continue
        tmp = src.alloc
        if readers[tmp] != [i] or len(writers[tmp]) != 1:
            continue
        p = writers[tmp][0]
        prod = recs[p]
        outs = [o for o in prod.operands if o.alloc == tmp]
        if p >= i or len(outs) != 1 or outs[0].mode != "w" or not _same_region(outs[0], src):
            continue
        if dst.dtype != src.dtype and prod.opcode not in _CASTING_PRODUCERS:
            continue  # (a DMA, or an instruction with a fixed output dtype, cannot write the destination's)
        dst_alloc = trace.allocations.get(dst.alloc)
        if dst_alloc is None or dst_alloc.alloc_seq > p or _touched_between(touches[dst.alloc], p, i):
            continue  # (a destination allocated after the producer ran would be written before it exists)
        out = outs[0]
        moved = _moved(dst, out)
        prod.operands = [moved if o is out else o for o in prod.operands]
        # the destination is now written at p instead of i (what later copies' checks must see)
        for table in (writers, touches):  # (sorted lists: bisect, then one memmove each)
            t = table[dst.alloc]
            del t[bisect_left(t, i)]
            k = bisect_left(t, p)
            if k == len(t) or t[k] != p:
                t.insert(k, p)
        dropped.append(i)
        gone.add(tmp)
    for i in at_zeroings:
        z = recs[i]
        dst = _by_role(z, "dst")
        if z.opcode != "memset" or dst is None or dst.buffer != "psum" or z.attrs.get("value") not in (0, 0.0):
            continue
        t = touches[dst.alloc]
        k = bisect_right(t, i)
        if k == len(t):
            continue
        nxt = recs[t[k]]
        outs = [o for o in nxt.operands if o.alloc == dst.alloc]
        if nxt.opcode != "nc_matmul" or len(outs) != 1 or outs[0].role != "dst":
            continue
        acc = outs[0]
        if (acc.partition_start, acc.partitions, acc.addr_lo, acc.addr_hi) != (
                dst.partition_start, dst.partitions, dst.addr_lo, dst.addr_hi):
            continue
        if acc.mode != "w":  # the group's first matmul now initialises the region
            nxt.operands = [replace(acc, mode="w") if o is acc else o for o in nxt.operands]
        del t[k - 1]  # (position i itself, just before the matmul's)
        dropped.append(i)
    if not dropped:
        return 0
    dropped.sort()
    drop = set(dropped)
    trace.records = [r for k, r in enumerate(recs) if k not in drop]
    for k, r in enumerate(trace.records):
        r.seq = k
    for a in gone:
        trace.allocations.pop(a, None)
    for a in trace.allocations.values():
        a.alloc_seq -= bisect_left(dropped, a.alloc_seq)
        if a.free_seq is not None:
            a.free_seq -= bisect_left(dropped, a.free_seq)
    return len(dropped)
