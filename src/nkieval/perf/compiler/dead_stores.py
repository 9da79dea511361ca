"""Pass ``dead-stores``: remove on-chip writes nothing reads, and fold a zeroing memset into the
accumulating matmul that follows it.

* A compute-engine instruction whose only output is an SBUF/PSUM region that is overwritten in full
  (by a dense, unmasked write) or never read again before the trace ends does not change the result;
  the compiler's dead-code elimination drops it. The typical case: ``nl.zeros`` (a memset) of a tile that
  the next instruction overwrites whole.
* ``memset(0)`` of a PSUM region followed first by a matmul that accumulates into exactly that region:
  the Tensor engine starts a new accumulation group instead (the matmul writes rather than adds), so the
  memset disappears and the matmul's output is a plain write.

Conservative: only instructions with exactly one output, on Vector/Scalar/GpSimd (and ``memset`` on any
engine); a read that may touch the region (bounding ranges) keeps the write; DMA, matmul and
multi-output instructions are never removed.
"""

from __future__ import annotations

from dataclasses import replace

from nkieval.perf.compiler.model import PassContext
from nkieval.perf.compiler.regions import ON_CHIP, covers, dense, overlaps, partial_writer, same_region
from nkieval.sim.trace import OperandAccess, TraceRecord

REMOVABLE_ENGINES = ("vector", "scalar", "gpsimd")
#: opcodes with no effect but their output (an opcode not listed may have others, and is kept)
PURE = ("memset", "tensor_copy", "tensor_scalar", "tensor_tensor", "scalar_tensor_tensor", "activation",
        "reciprocal", "iota", "tensor_reduce")


def _removable(r: TraceRecord) -> OperandAccess | None:
    """The one on-chip output of an instruction that may be removed when dead, else None."""
    if r.opcode not in PURE or (r.engine not in REMOVABLE_ENGINES and r.opcode != "memset"):
        return None
    writes = [o for o in r.operands if "w" in o.mode]
    if len(writes) != 1 or writes[0].mode != "w" or writes[0].buffer not in ON_CHIP:
        return None
    return writes[0]


def _zero_memset(r: TraceRecord) -> bool:
    return r.opcode == "memset" and r.attrs.get("value") in (0, 0.0)


MAX_SWEEPS = 16  # removing a dead write can make the writes it read dead: sweep until nothing changes


def run(records: list[TraceRecord], ctx: PassContext) -> list[TraceRecord]:
    removed: dict[str, int] = {}
    folds = 0
    for _ in range(MAX_SWEEPS):
        records, dead_ops, folded = _sweep(records)
        if not dead_ops and not folded:
            break
        folds += folded
        for op, n in dead_ops.items():
            removed[op] = removed.get(op, 0) + n
    if removed:
        ctx.notes.append("removed " + ", ".join(f"{n} {op}" for op, n in sorted(removed.items()))
                         + " whose output was overwritten or never read")
    if folds:
        ctx.notes.append(f"{folds} zeroing memset(s) folded into the first accumulating matmul")
    ctx.changed += sum(removed.values()) + folds
    return records


def _sweep(records: list[TraceRecord]) -> tuple[list[TraceRecord], dict[str, int], int]:
    """One forward pass: the records without the dead writes found, the removed opcodes, the folds."""
    dead: set[int] = set()
    folded: dict[int, TraceRecord] = {}  # index -> the matmul rewritten to start its accumulation group
    pending: dict[int, list[tuple[int, OperandAccess]]] = {}  # alloc -> unread removable writes
    for i, r in enumerate(records):
        for o in r.operands:
            if "r" not in o.mode or o.buffer not in ON_CHIP or o.alloc not in pending:
                continue
            keep = []
            for j, w in pending[o.alloc]:
                if not overlaps(o, w):
                    keep.append((j, w))
                elif (o.mode == "rw" and r.opcode == "nc_matmul" and _zero_memset(records[j])
                      and same_region(o, w) and dense(w) and i not in folded):
                    dead.add(j)
                    folded[i] = replace(r, operands=[replace(x, mode="w") if x is o else x for x in r.operands])
            pending[o.alloc] = keep
        for o in r.operands:
            if o.mode == "w" and o.buffer in ON_CHIP and o.alloc in pending and not partial_writer(r):
                keep = []
                for j, w in pending[o.alloc]:
                    if covers(o, w):
                        dead.add(j)
                    else:
                        keep.append((j, w))
                pending[o.alloc] = keep
        out = _removable(r)
        if out is not None and not partial_writer(r):
            pending.setdefault(out.alloc, []).append((i, out))
    for lst in pending.values():  # never read again
        dead.update(j for j, _ in lst)
    if not dead:
        return records, {}, 0
    ops: dict[str, int] = {}
    for j in dead:
        ops[records[j].opcode] = ops.get(records[j].opcode, 0) + 1
    return [folded.get(i, r) for i, r in enumerate(records) if i not in dead], ops, len(folded)
