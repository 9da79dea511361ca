"""The instruction trace: every executed instruction, with what it touched and where it came from.

Schema (version ``TRACE_SCHEMA_VERSION``; documented in docs/trace.md):

* ``TraceRecord``: ``seq`` (execution order), ``opcode`` (ISA name, e.g. ``nc_matmul``),
  ``engine`` (``tensor`` | ``vector`` | ``scalar`` | ``gpsimd`` | ``sync`` | ``dma``),
  ``operands`` (list of ``OperandAccess``), ``attrs`` (instruction arguments that matter for
  cost: ops, accumulate flags, perf_mode, dma mode …), ``program`` (LNC / SPMD program id),
  ``loops`` (enclosing NKI loop iterators as ``(kind, index, trip_count)``), ``file``,
  ``line``, ``function`` (the kernel source that issued it).
* ``OperandAccess``: ``role`` (argument name), ``mode`` (``r``/``w``/``rw``), ``buffer``
  (``sbuf``/``psum``/``hbm``), ``alloc`` (allocation id), ``shape``, ``dtype``,
  ``partition_start``/``partitions`` (on-chip), ``addr_lo``/``addr_hi`` (byte range: per
  partition and including the allocation's address for on-chip memories; flat offset within
  the tensor for HBM), ``nbytes`` (bytes touched), ``contiguous_bytes`` (innermost run) and
  ``pattern`` (free-dim access pattern as ``[stride_elems, count]`` pairs).
* ``AllocationRecord``: id, buffer, name, shape, dtype, address, partition offset,
  bytes per partition, allocation site, program, and the trace positions where it was
  allocated and freed (``alloc_seq``/``free_seq``).
"""

from __future__ import annotations

import copy
import json
import threading
from collections import Counter
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from operator import attrgetter
from typing import Any

TRACE_SCHEMA_VERSION = "1.0"


@dataclass(slots=True)
class OperandAccess:
    role: str
    mode: str
    buffer: str
    alloc: int
    shape: tuple[int, ...]
    dtype: str
    partition_start: int
    partitions: int
    addr_lo: int
    addr_hi: int
    nbytes: int
    contiguous_bytes: int
    pattern: tuple[tuple[int, int], ...]
    name: str = ""


@dataclass(slots=True)
class TraceRecord:
    seq: int
    opcode: str
    engine: str
    operands: list[OperandAccess]
    attrs: dict[str, Any]
    program: int
    loops: tuple[tuple[str, int, int], ...]
    file: str | None
    line: int | None
    function: str | None = None

    @property
    def location(self) -> str | None:
        return f"{self.file}:{self.line}" if self.file else None

    def reads(self) -> list[OperandAccess]:
        return [o for o in self.operands if "r" in o.mode]

    def writes(self) -> list[OperandAccess]:
        return [o for o in self.operands if "w" in o.mode]


@dataclass(slots=True)
class AllocationRecord:
    id: int
    buffer: str
    name: str
    shape: tuple[int, ...]
    dtype: str
    address: int
    partition_offset: int
    bytes_per_partition: int
    site: str | None
    program: int
    alloc_seq: int
    free_seq: int | None = None
    kernel_arg: bool = False
    fixed_address: bool = False  # placed at an explicit ``address=``


_ATOMS = (str, int, float, bool, type(None))


def _copy(v: Any) -> Any:
    """What ``dataclasses.asdict`` makes of a field value (lists, tuples and dicts rebuilt, other
    values deep-copied), without its per-value dispatch: atoms are returned as they are."""
    if isinstance(v, _ATOMS):
        return v
    if isinstance(v, list):
        return [_copy(x) for x in v]
    if isinstance(v, tuple) and not hasattr(v, "_fields"):
        return tuple(_copy(x) for x in v)
    if isinstance(v, dict):
        return {_copy(k): _copy(x) for k, x in v.items()}
    return asdict(v) if is_dataclass(v) and not isinstance(v, type) else copy.deepcopy(v)


_OPERAND_FIELDS = tuple(f.name for f in fields(OperandAccess))
_RECORD_FIELDS = tuple(f.name for f in fields(TraceRecord))
_ALLOC_FIELDS = tuple(f.name for f in fields(AllocationRecord))


def _operand_dict(o: OperandAccess) -> dict[str, Any]:
    return {f: _copy(getattr(o, f)) for f in _OPERAND_FIELDS}


def _record_dict(r: TraceRecord) -> dict[str, Any]:
    d = {f: None if f == "operands" else _copy(getattr(r, f)) for f in _RECORD_FIELDS}  # asdict's key order
    d["operands"] = [_operand_dict(o) for o in r.operands]
    return d


def _allocation_dict(a: AllocationRecord) -> dict[str, Any]:
    return {f: _copy(getattr(a, f)) for f in _ALLOC_FIELDS}


def _record_view(r: TraceRecord) -> dict[str, Any]:
    """``_record_dict`` without copies, for serialising only (JSON never changes what it reads)."""
    d = {f: getattr(r, f) for f in _RECORD_FIELDS}
    d["operands"] = [{f: getattr(o, f) for f in _OPERAND_FIELDS} for o in r.operands]
    return d


def _hashable(v: Any) -> Any:
    return tuple(_hashable(x) for x in v) if isinstance(v, list | tuple) else v


def _intern(index: dict[tuple[Any, ...], int], rows: list[tuple[Any, ...]], row: tuple[Any, ...]) -> int:
    """The position of ``row`` in ``rows``, appended the first time (``index`` maps rows to positions)."""
    try:
        k = index.get(row)
        key = row
    except TypeError:  # (a list inside, e.g. a shape)
        key = tuple(_hashable(v) for v in row)
        k = index.get(key)
    if k is None:
        k = index[key] = len(rows)
        rows.append(row)
    return k


def _json_default(v: Any) -> Any:
    """A dataclass inside ``attrs`` serialises as ``asdict`` would have made it; nothing else extra."""
    if is_dataclass(v) and not isinstance(v, type):
        return asdict(v)
    raise TypeError(f"Object of type {type(v).__name__} is not JSON serializable")


_COMPACT_SCHEMA = "nkieval.trace.compact"
#: a compact record: these fields, then the indices of file and function in the string table,
#: then the operands (each the tuple of _OPERAND_FIELDS)
_COMPACT_RECORD_FIELDS = tuple(f for f in _RECORD_FIELDS if f not in ("operands", "file", "function"))
#: layout 2 of the compact form: an operand is [kind, alloc, partition_start, addr_lo, addr_hi], its
#: kind an index into a table of the other fields (most operands repeat a few kinds); a record is
#: [seq, head, program, loops, line, file, function, operands], its head an index into a table of
#: [opcode, engine, attrs]
_OPERAND_WHERE = ("alloc", "partition_start", "addr_lo", "addr_hi")
_OPERAND_KIND = tuple(f for f in _OPERAND_FIELDS if f not in _OPERAND_WHERE)
_OPERAND_KIND_GET = attrgetter(*_OPERAND_KIND)
_OPERAND_WHERE_GET = attrgetter(*_OPERAND_WHERE)
_ALLOC_WHERE = ("id", "address", "partition_offset", "alloc_seq", "free_seq")
_ALLOC_KIND = tuple(f for f in _ALLOC_FIELDS if f not in _ALLOC_WHERE)
_ALLOC_KIND_GET = attrgetter(*_ALLOC_KIND)
_ALLOC_WHERE_GET = attrgetter(*_ALLOC_WHERE)
_HEAD_FIELDS = ("opcode", "engine", "attrs")
_ROW_FIELDS = ("seq", "program", "loops", "line")
_ROW_GET = attrgetter(*_ROW_FIELDS)


@dataclass
class Trace:
    """All records of one kernel run (all programs), plus allocations and warnings."""

    target: str
    records: list[TraceRecord] = field(default_factory=list)
    allocations: dict[int, AllocationRecord] = field(default_factory=dict)
    warnings: list[dict[str, Any]] = field(default_factory=list)
    num_programs: int = 1
    kernel: str | None = None
    peak_sbuf_bytes: int = 0
    peak_psum_bytes: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.records)

    def append(self, rec: TraceRecord) -> None:
        with self._lock:
            rec.seq = len(self.records)
            self.records.append(rec)

    def next_seq(self) -> int:
        return len(self.records)

    def opcode_counts(self) -> Counter[str]:
        return Counter(r.opcode for r in self.records)

    def engine_counts(self) -> Counter[str]:
        return Counter(r.engine for r in self.records)

    def summary(self) -> str:
        """Compact text: instructions per engine and per opcode, bytes moved by DMA."""
        lines = [f"trace: {len(self.records)} instructions on {self.target}"
                 + (f", {self.num_programs} programs" if self.num_programs > 1 else "")]
        for eng, n in sorted(self.engine_counts().items()):
            lines.append(f"  {eng:<7} {n:>7}")
        ops = ", ".join(f"{op}×{n}" for op, n in self.opcode_counts().most_common())
        lines.append(f"  opcodes: {ops}")
        dma = sum(o.nbytes for r in self.records if r.engine == "dma" for o in r.operands if "w" in o.mode)
        lines.append(f"  DMA bytes written: {dma}")
        lines.append(f"  peak SBUF bytes/partition: {self.peak_sbuf_bytes}; peak PSUM bytes/partition: {self.peak_psum_bytes}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "nkieval.trace",
            "version": TRACE_SCHEMA_VERSION,
            "target": self.target,
            "kernel": self.kernel,
            "num_programs": self.num_programs,
            "peak_sbuf_bytes": self.peak_sbuf_bytes,
            "peak_psum_bytes": self.peak_psum_bytes,
            "allocations": [_allocation_dict(a) for a in self.allocations.values()],
            "records": [_record_dict(r) for r in self.records],
            "warnings": self.warnings,
        }

    def _header(self) -> dict[str, Any]:
        return {"schema": "nkieval.trace", "version": TRACE_SCHEMA_VERSION, "target": self.target,
                "kernel": self.kernel, "num_programs": self.num_programs, "peak_sbuf_bytes": self.peak_sbuf_bytes,
                "peak_psum_bytes": self.peak_psum_bytes}

    def to_json(self, path: str | None = None, **kw: Any) -> str:
        # json.dumps(self.to_dict()) without copying the records first (the text is the same)
        doc = self._header()
        doc["allocations"] = [{f: getattr(a, f) for f in _ALLOC_FIELDS} for a in self.allocations.values()]
        doc["records"] = [_record_view(r) for r in self.records]
        doc["warnings"] = self.warnings
        kw.setdefault("default", _json_default)
        text = json.dumps(doc, **kw)
        if path:
            with open(path, "w") as fh:
                fh.write(text)
        return text

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Trace:
        if d.get("schema") != "nkieval.trace":
            raise ValueError("not an nkieval trace (missing schema 'nkieval.trace')")
        major = str(d.get("version", "")).split(".")[0]
        if major != TRACE_SCHEMA_VERSION.split(".")[0]:
            raise ValueError(f"trace schema version {d.get('version')} is not supported (expected {TRACE_SCHEMA_VERSION})")
        t = cls(target=d["target"], num_programs=d.get("num_programs", 1), kernel=d.get("kernel"),
                peak_sbuf_bytes=d.get("peak_sbuf_bytes", 0), peak_psum_bytes=d.get("peak_psum_bytes", 0))
        for a in d.get("allocations", []):
            a = dict(a)
            a["shape"] = tuple(a["shape"])
            t.allocations[a["id"]] = AllocationRecord(**a)
        for r in d.get("records", []):
            ops = [
                OperandAccess(**{**o, "shape": tuple(o["shape"]), "pattern": tuple(tuple(p) for p in o["pattern"])})
                for o in r["operands"]
            ]
            t.records.append(TraceRecord(**{**r, "operands": ops, "loops": tuple(tuple(x) for x in r["loops"])}))
        t.warnings = list(d.get("warnings", []))
        return t

    @classmethod
    def from_json(cls, text: str) -> Trace:
        return cls.from_dict(json.loads(text))

    # ------------------------------------------------------------ compact wire form
    # The review sandbox ships one trace per review from the candidate's process to the harness.
    # The compact form is the same content with every record and operand as a JSON array in
    # field order instead of an object, and source files and functions in a string table: a third
    # to two fifths of to_json's text, rebuilt positionally. It is a transport format (this exact
    # version and field list only), not the documented export: use to_json for that.
    # Trace.from_compact(t.to_compact()) equals Trace.from_json(t.to_json()).

    def to_compact(self) -> str:
        """The trace as compact JSON (layout 2): source files and functions, operand kinds and record
        heads (opcode, engine, attrs) sent once each and referred to by index. Kernels repeat a few
        instructions on many tiles, so this is a fraction of :meth:`to_json`'s text and of its time."""
        doc = self._header()
        doc["schema"] = _COMPACT_SCHEMA
        doc["layout"] = 2
        doc["fields"] = [list(_ALLOC_FIELDS), list(_COMPACT_RECORD_FIELDS), list(_OPERAND_FIELDS)]
        doc["layout_fields"] = [list(_HEAD_FIELDS), list(_ROW_FIELDS), list(_OPERAND_KIND), list(_OPERAND_WHERE),
                                 list(_ALLOC_KIND), list(_ALLOC_WHERE)]
        get_row, get_kind, get_where = _ROW_GET, _OPERAND_KIND_GET, _OPERAND_WHERE_GET
        strings: dict[str | None, int] = {}
        kinds: dict[tuple[Any, ...], int] = {}
        heads: dict[tuple[Any, ...], int] = {}
        kind_rows: list[tuple[Any, ...]] = []
        head_rows: list[list[Any]] = []
        # allocations: [kind, id, address, partition_offset, alloc_seq, free_seq], the kind (buffer, name,
        # shape, dtype, bytes per partition, site, program, flags) sent once (loops allocate alike)
        akinds: dict[tuple[Any, ...], int] = {}
        akind_rows: list[tuple[Any, ...]] = []
        allocs = doc["allocations"] = []
        get_akind, get_awhere = _ALLOC_KIND_GET, _ALLOC_WHERE_GET
        for a in self.allocations.values():
            allocs.append((_intern(akinds, akind_rows, get_akind(a)), *get_awhere(a)))
        doc["allocation_kinds"] = akind_rows
        recs = doc["records"] = []
        append = recs.append
        for r in self.records:
            f, fn = r.file, r.function
            fi = strings.get(f)
            if fi is None:
                fi = strings[f] = len(strings)
            gi = strings.get(fn)
            if gi is None:
                gi = strings[fn] = len(strings)
            attrs = r.attrs
            try:
                # (with the values' types: True == 1 == 1.0 must not share a head)
                hk = (r.opcode, r.engine, *attrs.items(), *map(type, attrs.values()))
                h = heads.get(hk)
            except TypeError:  # an unhashable attribute value: this head is not shared
                hk, h = None, None
            if h is None:
                h = len(head_rows)
                head_rows.append([r.opcode, r.engine, attrs])
                if hk is not None:
                    heads[hk] = h
            ops = []
            for o in r.operands:
                ops.append((_intern(kinds, kind_rows, get_kind(o)), *get_where(o)))
            seq, program, loops, line = get_row(r)
            append((seq, h, program, loops, line, fi, gi, ops))
        doc["strings"] = list(strings)
        doc["operand_kinds"] = kind_rows
        doc["heads"] = head_rows
        doc["warnings"] = self.warnings
        return json.dumps(doc, separators=(",", ":"), default=_json_default)

    @classmethod
    def from_compact(cls, text: str) -> Trace:
        d = json.loads(text)
        if not isinstance(d, dict) or d.get("schema") != _COMPACT_SCHEMA:
            raise ValueError(f"not a compact nkieval trace (missing schema {_COMPACT_SCHEMA!r})")
        if str(d.get("version", "")) != TRACE_SCHEMA_VERSION:
            raise ValueError(f"compact trace version {d.get('version')} is not {TRACE_SCHEMA_VERSION}")
        if d.get("fields") != [list(_ALLOC_FIELDS), list(_COMPACT_RECORD_FIELDS), list(_OPERAND_FIELDS)]:
            raise ValueError("compact trace fields differ from this version's records")
        t = cls(target=d["target"], num_programs=d.get("num_programs", 1), kernel=d.get("kernel"),
                peak_sbuf_bytes=d.get("peak_sbuf_bytes", 0), peak_psum_bytes=d.get("peak_psum_bytes", 0))
        strings = d["strings"]
        if d.get("layout") == 2:
            t._read_layout2(d, strings)
            t.warnings = list(d.get("warnings", []))
            return t
        ishape = _ALLOC_FIELDS.index("shape")
        for a in d["allocations"]:
            a[ishape] = tuple(a[ishape])
            rec = AllocationRecord(*a)
            t.allocations[rec.id] = rec
        oshape, opat = _OPERAND_FIELDS.index("shape"), _OPERAND_FIELDS.index("pattern")
        iloops = _COMPACT_RECORD_FIELDS.index("loops")
        n = len(_COMPACT_RECORD_FIELDS)
        out = t.records
        for row in d["records"]:
            ops = []
            for o in row[n + 2]:
                o[oshape] = tuple(o[oshape])
                o[opat] = tuple(tuple(p) for p in o[opat])
                ops.append(OperandAccess(*o))
            kw = dict(zip(_COMPACT_RECORD_FIELDS, row))
            kw["loops"] = tuple(tuple(x) for x in row[iloops])
            out.append(TraceRecord(operands=ops, file=strings[row[n]], function=strings[row[n + 1]], **kw))
        t.warnings = list(d.get("warnings", []))
        return t

    def _read_layout2(self, d: dict[str, Any], strings: list[Any]) -> None:
        if d.get("layout_fields") != [list(_HEAD_FIELDS), list(_ROW_FIELDS), list(_OPERAND_KIND), list(_OPERAND_WHERE),
                                      list(_ALLOC_KIND), list(_ALLOC_WHERE)]:
            raise ValueError("compact trace layout fields differ from this version's records")
        ashape = _ALLOC_KIND.index("shape")
        akinds = []
        for k in d["allocation_kinds"]:
            k[ashape] = tuple(k[ashape])
            akinds.append(dict(zip(_ALLOC_KIND, k)))
        for j, *where in d["allocations"]:
            rec = AllocationRecord(**akinds[j], **dict(zip(_ALLOC_WHERE, where)))
            self.allocations[rec.id] = rec
        ishape, ipat = _OPERAND_KIND.index("shape"), _OPERAND_KIND.index("pattern")
        kinds = []
        for k in d["operand_kinds"]:
            k[ishape] = tuple(k[ishape])
            k[ipat] = tuple(tuple(p) for p in k[ipat])
            kinds.append(dict(zip(_OPERAND_KIND, k)))
        heads = d["heads"]
        out = self.records
        for seq, h, program, loops, line, fi, gi, ops in d["records"]:
            opcode, engine, attrs = heads[h]
            operands = [OperandAccess(alloc=alloc, partition_start=ps, addr_lo=lo, addr_hi=hi, **kinds[k])
                        for k, alloc, ps, lo, hi in ops]
            out.append(TraceRecord(seq=seq, opcode=opcode, engine=engine, attrs=dict(attrs), program=program,
                                   loops=tuple(tuple(x) for x in loops), line=line, file=strings[fi],
                                   function=strings[gi], operands=operands))
