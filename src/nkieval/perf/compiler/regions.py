"""Where operands meet: overlap and covering tests on trace operands (allocation, partitions, bytes).

Operands of different allocations never alias (an allocation is one logical tensor), so every test
first compares allocation ids. On-chip byte ranges are per partition; HBM ranges are flat.
"""

from __future__ import annotations

from nkieval.sim.trace import OperandAccess, TraceRecord

ON_CHIP = ("sbuf", "psum")


def _partitions_overlap(a: OperandAccess, b: OperandAccess) -> bool:
    if a.buffer == "hbm":
        return True
    return a.partition_start < b.partition_start + b.partitions and b.partition_start < a.partition_start + a.partitions


def overlaps(a: OperandAccess, b: OperandAccess) -> bool:
    """Whether ``a`` and ``b`` may touch a common byte (bounding ranges: errs towards yes)."""
    return a.alloc == b.alloc and a.addr_lo < b.addr_hi and b.addr_lo < a.addr_hi and _partitions_overlap(a, b)


def dense(o: OperandAccess) -> bool:
    """Whether an on-chip operand touches every byte of its range in each of its partitions."""
    if o.buffer not in ON_CHIP or o.partitions <= 0:
        return False
    return o.nbytes == o.partitions * (o.addr_hi - o.addr_lo)


def covers(a: OperandAccess, b: OperandAccess) -> bool:
    """Whether writing ``a`` certainly overwrites every byte of ``b`` (``a`` dense and containing ``b``)."""
    return (a.alloc == b.alloc and dense(a) and a.addr_lo <= b.addr_lo and b.addr_hi <= a.addr_hi
            and a.partition_start <= b.partition_start
            and b.partition_start + b.partitions <= a.partition_start + a.partitions)


def same_region(a: OperandAccess, b: OperandAccess) -> bool:
    return (a.alloc, a.partition_start, a.partitions, a.addr_lo, a.addr_hi, a.pattern) == (
        b.alloc, b.partition_start, b.partitions, b.addr_lo, b.addr_hi, b.pattern)


def partial_writer(r: TraceRecord) -> bool:
    """Records whose ``w`` operand may leave some of its bytes unwritten (masks, indirect or dynamic
    destinations): never taken as overwriting anything."""
    a = r.attrs
    return bool(a.get("mask") is not None and a.get("mask") is not False) or bool(a.get("indirect")) \
        or r.opcode in ("tensor_copy_dynamic_dst", "tensor_copy_predicated")


def conflicts(a: TraceRecord, b: TraceRecord) -> bool:
    """Whether ``a`` and ``b`` must keep their order: one writes what the other reads or writes."""
    for x in a.operands:
        for y in b.operands:
            if ("w" in x.mode or "w" in y.mode) and overlaps(x, y):
                return True
    return False
