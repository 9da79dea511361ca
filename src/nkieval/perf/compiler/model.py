"""The compiler model's driver: which passes run, what each did, and the rewritten trace.

A pass reads the trace records (never the simulator) and returns the records the compiled
program would execute. Records keep their original ``seq`` while passes run, so that
:func:`rebuild` can move every allocation's ``alloc_seq``/``free_seq`` to the new positions.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from nkieval.sim.trace import AllocationRecord, Trace, TraceRecord


class CompilerOptionError(ValueError):
    """A compiler-pass option naming no pass, or a setting other than on/off."""


@dataclass
class PassContext:
    """What a pass may change besides the records: allocation lifetimes it extends (``extend_free``: alloc id ->
    the original ``seq`` of its new last use; ``extend_alloc``: alloc id -> that of its new first use) and its
    notes for the report."""

    trace: Trace
    extend_free: dict[int, int] = field(default_factory=dict)
    extend_alloc: dict[int, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    changed: int = 0  # records the running pass removed, merged away or rewritten


PassFn = Callable[[list[TraceRecord], PassContext], list[TraceRecord]]


@dataclass(frozen=True)
class CompilerPass:
    """One documented transformation: ``name`` (the switch), ``what`` it does, ``source`` (the public
    Neuron documentation it follows), whether it is on by default, and the function."""

    name: str
    what: str
    source: str
    default_on: bool
    run: PassFn


@dataclass(frozen=True)
class PassReport:
    """What one pass did: instructions and DMA bytes before and after, and notes (one per kind of change)."""

    name: str
    enabled: bool
    instructions_before: int
    instructions_after: int
    dma_bytes_before: int
    dma_bytes_after: int
    changed: int  # records removed, merged away or rewritten
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "enabled": self.enabled, "instructions_before": self.instructions_before,
                "instructions_after": self.instructions_after, "dma_bytes_before": self.dma_bytes_before,
                "dma_bytes_after": self.dma_bytes_after, "changed": self.changed, "notes": list(self.notes)}


@dataclass(frozen=True)
class CompilerReport:
    """What the compiler model did to one trace, pass by pass (the profile's "what the compiler did")."""

    passes: tuple[PassReport, ...]

    @property
    def enabled(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.passes if p.enabled)

    def to_dict(self) -> dict[str, Any]:
        return {"passes": [p.to_dict() for p in self.passes]}


def dma_bytes(records: list[TraceRecord]) -> int:
    """Bytes the DMA records write (what the profile's DMA total counts)."""
    return sum(o.nbytes for r in records if r.engine == "dma" for o in r.operands if "w" in o.mode)


@dataclass(frozen=True)
class CompilerOptions:
    """Which passes run: ``enabled`` maps a pass name to on/off; a pass not named keeps its default.
    ``CompilerOptions.off()`` runs none (the trace as the simulator recorded it)."""

    enabled: Mapping[str, bool] = field(default_factory=dict)
    all_off: bool = False

    @classmethod
    def off(cls) -> CompilerOptions:
        return cls(all_off=True)

    @classmethod
    def parse(cls, settings: list[str] | tuple[str, ...], passes: Mapping[str, CompilerPass]) -> CompilerOptions:
        """``["NAME=on", "NAME=off", "all=off", ...]`` (the CLI's ``--compiler-pass``), later ones winning."""
        enabled: dict[str, bool] = {}
        all_off = False
        for s in settings:
            name, sep, value = s.partition("=")
            if not sep or value not in ("on", "off"):
                raise CompilerOptionError(f"--compiler-pass {s!r}: expected NAME=on or NAME=off "
                                          f"(NAME one of: all, {', '.join(passes)})")
            if name == "all":
                all_off = value == "off"
                enabled = {}
                continue
            if name not in passes:
                raise CompilerOptionError(f"--compiler-pass {s!r}: no compiler pass {name!r} "
                                          f"(passes: {', '.join(passes)})")
            enabled[name] = value == "on"
        return cls(MappingProxyType(enabled), all_off)

    def is_on(self, p: CompilerPass) -> bool:
        if p.name in self.enabled:
            return self.enabled[p.name]
        return False if self.all_off else p.default_on


def rebuild(trace: Trace, records: list[TraceRecord], extend_free: Mapping[int, int],
            extend_alloc: Mapping[int, int] | None = None) -> Trace:
    """A trace of ``records`` (original ``seq`` values, ascending) renumbered 0..n-1, with every
    allocation's positions moved to the first kept record at or after its old position, the
    lifetimes in ``extend_free`` (alloc id -> original seq of the last use) extended past that use and those in
    ``extend_alloc`` (alloc id -> original seq of the first use) started at it."""
    old = [r.seq for r in records]
    end = len(records)

    def moved(x: int | None) -> int | None:
        return None if x is None else bisect_left(old, x)

    out = [TraceRecord(i, r.opcode, r.engine, r.operands, r.attrs, r.program, r.loops, r.file, r.line, r.function)
           for i, r in enumerate(records)]
    allocs: dict[int, AllocationRecord] = {}
    for a, al in trace.allocations.items():
        free = moved(al.free_seq)
        if a in extend_free and free is not None:
            free = max(free, min(end, bisect_left(old, extend_free[a]) + 1))
        start = moved(al.alloc_seq)
        if extend_alloc and a in extend_alloc and start is not None:
            start = min(start, bisect_left(old, extend_alloc[a]))
        allocs[a] = AllocationRecord(al.id, al.buffer, al.name, al.shape, al.dtype, al.address, al.partition_offset,
                                     al.bytes_per_partition, al.site, al.program, start, free,
                                     al.kernel_arg, al.fixed_address)
    return Trace(target=trace.target, records=out, allocations=allocs, warnings=list(trace.warnings),
                 num_programs=trace.num_programs, kernel=trace.kernel, peak_sbuf_bytes=trace.peak_sbuf_bytes,
                 peak_psum_bytes=trace.peak_psum_bytes)


def run_passes(trace: Trace, passes: tuple[CompilerPass, ...], options: CompilerOptions) -> tuple[Trace, CompilerReport]:
    """Run the enabled ``passes`` in order on ``trace``; the input trace is not changed."""
    records = list(trace.records)
    ctx = PassContext(trace)
    reports = []
    changed_any = False
    b = dma_bytes(records)  # (what one pass leaves is what the next starts from: each list is summed once)
    for p in passes:
        n0, b0 = len(records), b
        if not options.is_on(p):
            reports.append(PassReport(p.name, False, n0, n0, b0, b0, 0))
            continue
        ctx.notes, ctx.changed = [], 0
        records = p.run(records, ctx)
        b = dma_bytes(records)
        changed_any = changed_any or ctx.changed > 0
        reports.append(PassReport(p.name, True, n0, len(records), b0, b, ctx.changed, tuple(ctx.notes)))
    out = rebuild(trace, records, ctx.extend_free, ctx.extend_alloc) if changed_any else trace
    return out, CompilerReport(tuple(reports))
