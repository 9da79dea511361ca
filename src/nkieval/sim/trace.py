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
import gc
import json
import sys
import threading
from array import array
from binascii import a2b_base64, b2a_base64
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from itertools import chain, count, islice, repeat
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


def _json_default(v: Any) -> Any:
    """A dataclass inside ``attrs`` serialises as ``asdict`` would have made it; nothing else extra."""
    if is_dataclass(v) and not isinstance(v, type):
        return asdict(v)
    raise TypeError(f"Object of type {type(v).__name__} is not JSON serializable")


# ------------------------------------------------------------ compact wire form (layout 3)
# Columnar: every field of records, operands and allocations is one column (``_column``: a JSON list,
# one value for all, or ints packed as base64 text), built and rebuilt by C-level map/zip over the
# whole trace instead of per-record Python. Repeated values go into tables (heads, loops, files,
# functions, operand and allocation kinds) and the columns hold their indices.
_COMPACT_SCHEMA = "nkieval.trace.compact"
_COMPACT_LAYOUT = 3
_COMPACT_RECORD_FIELDS = tuple(f for f in _RECORD_FIELDS if f not in ("operands", "file", "function"))
_ATOM_TYPES = frozenset(_ATOMS)
#: a record's columns: ``head`` indexes ``heads`` ([opcode, engine, attrs]), ``loops``, ``file`` and
#: ``function`` the tables of those names; ``operands`` is its number of operands (they follow in order);
#: ``seq`` is null when every record's is its position
_RECORD_COLUMNS = ("seq", "head", "program", "loops", "line", "file", "function", "operands")
_HEAD_FIELDS = ("opcode", "engine", "attrs")
#: an operand is its kind (every field but where it is, an index into ``operand_kinds``) and where;
#: an allocation likewise (``allocation_kinds``)
_OPERAND_WHERE = ("alloc", "partition_start", "addr_lo", "addr_hi")
_OPERAND_KIND = tuple(f for f in _OPERAND_FIELDS if f not in _OPERAND_WHERE)
_OPERAND_KIND_GET = attrgetter(*_OPERAND_KIND)
_OPERAND_WHERE_GET = attrgetter(*_OPERAND_WHERE)
_RECORD_ROW_GET = attrgetter("seq", "program", "line")
_ALLOC_WHERE = ("id", "address", "partition_offset", "alloc_seq", "free_seq")
_ALLOC_KIND = tuple(f for f in _ALLOC_FIELDS if f not in _ALLOC_WHERE)
_ALLOC_KIND_GET = attrgetter(*_ALLOC_KIND)
_ALLOC_WHERE_GET = attrgetter(*_ALLOC_WHERE)
_COMPACT_FIELDS = [list(_ALLOC_FIELDS), list(_COMPACT_RECORD_FIELDS), list(_OPERAND_FIELDS)]
_COMPACT_LAYOUT_FIELDS = [list(_HEAD_FIELDS), list(_RECORD_COLUMNS), list(_OPERAND_KIND), ["kind", *_OPERAND_WHERE],
                          list(_ALLOC_KIND), ["kind", *_ALLOC_WHERE]]


#: array type codes for packing a column of ints, each with the least and greatest value it holds
_PACKINGS = tuple((c, -(1 << 8 * array(c).itemsize - 1) if c.islower() else 0,
                   (1 << 8 * array(c).itemsize - c.islower()) - 1) for c in "BHIq")
_PACK_CODES = "".join(c for c, _, _ in _PACKINGS)
_PACK_MIN = 16  # (shorter columns go as JSON lists)
_BIG_ENDIAN = sys.byteorder == "big"


def _pack(code: str, values: Sequence[int]) -> str:
    a = array(code, values)
    if _BIG_ENDIAN:
        a.byteswap()
    return code + b2a_base64(a, newline=False).decode("ascii")


def _column(values: Sequence[Any]) -> Sequence[Any] | str:
    """A column as sent: ``[v]`` when all its values (more than one) are ``v`` of one type; plain
    ints packed into the first array type of ``_PACKINGS`` that holds them, little-endian and
    base64-encoded, as the type code then the data (JSON writes and reads a number at a time);
    else the values."""
    n = len(values)
    if n < 2:
        return values
    types = set(map(type, values))
    if len(types) != 1:
        return values
    v = values[0]
    if int not in types:
        return [v] if values.count(v) == n else values
    lo, hi = min(values), max(values)
    if lo == hi:
        return [v]
    if n >= _PACK_MIN:
        for code, least, greatest in _PACKINGS:
            if least <= lo and hi <= greatest:
                return _pack(code, values)
    return values


def _uncolumn(values: Any, n: int) -> Sequence[Any]:
    if isinstance(values, str):
        if values[:1] not in _PACK_CODES or not values:
            raise ValueError(f"compact trace column packed as {values[:1]!r}")
        a = array(values[0])
        try:
            a.frombytes(a2b_base64(values[1:]))
        except ValueError as e:  # (binascii.Error too)
            raise ValueError(f"compact trace column packed as {values[0]!r} is unreadable: {e}") from None
        if _BIG_ENDIAN:
            a.byteswap()
        values = a
    elif not isinstance(values, list):
        raise ValueError(f"compact trace column is a {type(values).__name__}")
    if len(values) not in (n, 1):
        raise ValueError(f"compact trace column does not hold {n} values")
    return values if len(values) == n else values * n


def _index_column(col: list[int], distinct: int) -> Sequence[int] | str:
    """``_column(col)`` for indices into ``distinct`` values (no need to look at them)."""
    if distinct <= 1:
        return col[:1]
    if len(col) < _PACK_MIN:
        return col
    return _pack(next(code for code, _, greatest in _PACKINGS if distinct <= greatest), col)


def _first_seen(keys: Iterable[Any]) -> tuple[list[int], Sequence[int] | str]:
    """Where each distinct key is first seen, and the column (``_index_column``) of each key's rank among
    the distinct ones (each key hashed once: positions of first sight, then renumbered)."""
    first: dict[Any, int] = {}
    col = list(map(first.setdefault, keys, count()))
    dense = dict(zip(first.values(), count()))
    return list(first.values()), _index_column(list(map(dense.__getitem__, col)), len(dense))


def _index(values: list[Any]) -> tuple[list[Any], Sequence[int] | str]:
    """The distinct ``values`` (compared with ``==``; lists inside a value as tuples) in first-seen
    order, and the column (``_column``) of each value's position among them."""
    n = len(values)
    if n and values[0] == values[-1] and values.count(values[0]) == n:  # (one value: files, loops …)
        return values[:1], [0]
    try:
        pos, col = _first_seen(values)
    except TypeError:  # (a list inside)
        pos, col = _first_seen(map(_hashable, values))
    return [values[i] for i in pos], col


def _plain(v: Any) -> bool:
    """Whether ``v`` is made of JSON's own values only: atoms, and lists, tuples and dicts of them."""
    t = type(v)
    if t in _ATOM_TYPES:
        return True
    if t is list or t is tuple:
        return all(map(_plain, v))
    return t is dict and _ATOM_TYPES.issuperset(map(type, v)) and all(map(_plain, v.values()))


def _head_index(opcodes: list[str], engines: list[str], attrs: list[dict[str, Any]]
                ) -> tuple[list[list[Any]], Sequence[int] | str]:
    """The distinct ``[opcode, engine, attrs]`` heads and the column of each record's head. Plain attributes
    (``_plain``) compare by their ``repr``, which tells ``True``, ``1`` and ``1.0`` apart (``==``
    does not) and is one C call per record; others (dataclasses …) by their JSON text, what is sent."""
    keys = list(zip(opcodes, engines, map(repr, attrs)))
    pos, col = _first_seen(keys)
    if not all(_plain(attrs[i]) for i in pos):
        keys = [k if _plain(a) else (k[0], k[1], None, json.dumps(a, default=_json_default))
                for k, a in zip(keys, attrs)]
        pos, col = _first_seen(keys)
    return [[opcodes[i], engines[i], attrs[i]] for i in pos], col


def _operand(kind: Sequence[Any], alloc: int, partition_start: int, addr_lo: int, addr_hi: int) -> OperandAccess:
    """An operand from its kind (the fields ``_OPERAND_KIND``) and where it is (``_OPERAND_WHERE``)."""
    role, mode, buffer, shape, dtype, partitions, nbytes, contiguous_bytes, pattern, name = kind
    return OperandAccess(role, mode, buffer, alloc, shape, dtype, partition_start, partitions, addr_lo, addr_hi,
                         nbytes, contiguous_bytes, pattern, name)


def _allocation(kind: Sequence[Any], id: int, address: int, partition_offset: int, alloc_seq: int,
                free_seq: int | None) -> AllocationRecord:
    """An allocation from its kind (the fields ``_ALLOC_KIND``) and where it is (``_ALLOC_WHERE``)."""
    buffer, name, shape, dtype, bytes_per_partition, site, program, kernel_arg, fixed_address = kind
    return AllocationRecord(id, buffer, name, shape, dtype, address, partition_offset, bytes_per_partition, site,
                            program, alloc_seq, free_seq, kernel_arg, fixed_address)


@contextmanager
def _gc_paused() -> Iterator[None]:
    """The compact form builds and reads many small containers and no reference cycles; with a large
    trace alive, the cyclic collector's passes over it would cost more than the work, so it waits."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


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
    # The compact form is the same content in columns (one per field) with repeated values in
    # tables, built and rebuilt by C-level map/zip over the whole trace. It is a transport format
    # between a child and a harness of the same version (this exact version, layout and field list
    # only), not the documented export: use to_json for that.
    # Trace.from_compact(t.to_compact()) equals Trace.from_json(t.to_json()).

    def to_compact(self) -> str:
        """The trace as compact JSON (layout 3): columns of records, operands and allocations, with
        source files and functions, record heads (opcode, engine, attrs), loop nests and operand and
        allocation kinds sent once each and referred to by index. Kernels repeat a few instructions
        on many tiles, so this is a fraction of :meth:`to_json`'s text and of its time."""
        with _gc_paused():
            return self._compact()

    def _compact(self) -> str:
        doc = self._header()
        doc["schema"] = _COMPACT_SCHEMA
        doc["layout"] = _COMPACT_LAYOUT
        doc["fields"] = _COMPACT_FIELDS
        doc["layout_fields"] = _COMPACT_LAYOUT_FIELDS
        recs = self.records
        n = len(recs)
        allocs = list(self.allocations.values())
        operands = list(map(attrgetter("operands"), recs))
        flat = list(chain.from_iterable(operands))
        doc["counts"] = [n, len(flat), len(allocs)]
        files, file_col = _index(list(map(attrgetter("file"), recs)))
        functions, function_col = _index(list(map(attrgetter("function"), recs)))
        heads, head_col = _head_index(list(map(attrgetter("opcode"), recs)), list(map(attrgetter("engine"), recs)),
                                      list(map(attrgetter("attrs"), recs)))
        loops, loop_col = _index(list(map(attrgetter("loops"), recs)))
        seq, program, line = list(zip(*map(_RECORD_ROW_GET, recs))) or [(), (), ()]
        doc["records"] = [None if seq == tuple(range(n)) and set(map(type, seq)) <= {int} else _column(seq),
                          head_col, _column(program), loop_col, _column(line), file_col, function_col,
                          _column(list(map(len, operands)))]
        doc["heads"], doc["loops"], doc["files"], doc["functions"] = heads, loops, files, functions
        kinds, kind_col = _index(list(map(_OPERAND_KIND_GET, flat)))
        doc["operand_kinds"] = kinds
        where = list(zip(*map(_OPERAND_WHERE_GET, flat))) or [()] * len(_OPERAND_WHERE)
        doc["operands"] = [kind_col, *map(_column, where)]
        kinds, kind_col = _index(list(map(_ALLOC_KIND_GET, allocs)))
        doc["allocation_kinds"] = kinds
        where = list(zip(*map(_ALLOC_WHERE_GET, allocs))) or [()] * len(_ALLOC_WHERE)
        doc["allocations"] = [kind_col, *map(_column, where)]
        doc["warnings"] = self.warnings
        return json.dumps(doc, separators=(",", ":"), check_circular=False, default=_json_default)

    @classmethod
    def from_compact(cls, text: str, max_items: int | None = None) -> Trace:
        """The trace of :meth:`to_compact`'s text. A column of one repeated value costs a few bytes
        whatever its length, so a reader of untrusted text bounds the records, operands and
        allocations it will build together with ``max_items`` (a larger count is a ValueError)."""
        with _gc_paused():
            d = json.loads(text)
            if not isinstance(d, dict) or d.get("schema") != _COMPACT_SCHEMA:
                raise ValueError(f"not a compact nkieval trace (missing schema {_COMPACT_SCHEMA!r})")
            if str(d.get("version", "")) != TRACE_SCHEMA_VERSION:
                raise ValueError(f"compact trace version {d.get('version')} is not {TRACE_SCHEMA_VERSION}")
            if d.get("layout") != _COMPACT_LAYOUT:
                raise ValueError(f"compact trace layout {d.get('layout')} is not {_COMPACT_LAYOUT}")
            if d.get("fields") != _COMPACT_FIELDS or d.get("layout_fields") != _COMPACT_LAYOUT_FIELDS:
                raise ValueError("compact trace fields differ from this version's records")
            t = cls(target=d["target"], num_programs=d.get("num_programs", 1), kernel=d.get("kernel"),
                    peak_sbuf_bytes=d.get("peak_sbuf_bytes", 0), peak_psum_bytes=d.get("peak_psum_bytes", 0))
            counts = d.get("counts")
            if (not isinstance(counts, list) or len(counts) != 3
                    or not all(type(c) is int and c >= 0 for c in counts)):
                raise ValueError(f"compact trace counts {str(counts)[:80]} are not three counts")
            if max_items is not None and sum(counts) > max_items:
                raise ValueError(f"compact trace holds {counts[0]} records, {counts[1]} operands and {counts[2]} "
                                 f"allocations: more than the {max_items} items allowed")
            t._read_compact(d)
            return t

    def _read_compact(self, d: dict[str, Any]) -> None:
        n, n_ops, n_allocs = d["counts"]
        # allocations: each from its kind and the columns of where it is
        kinds = d["allocation_kinds"]
        ishape = _ALLOC_KIND.index("shape")
        for k in kinds:
            k[ishape] = tuple(k[ishape])
        kind_col, *where = (_uncolumn(c, n_allocs) for c in d["allocations"])
        allocs = list(map(_allocation, map(kinds.__getitem__, kind_col), *where))
        self.allocations = dict(zip(map(attrgetter("id"), allocs), allocs))
        # operands, likewise, in record order
        kinds = d["operand_kinds"]
        ishape, ipat = _OPERAND_KIND.index("shape"), _OPERAND_KIND.index("pattern")
        for k in kinds:
            k[ishape] = tuple(k[ishape])
            k[ipat] = tuple(map(tuple, k[ipat]))
        kind_col, *where = (_uncolumn(c, n_ops) for c in d["operands"])
        flat = map(_operand, map(kinds.__getitem__, kind_col), *where)
        # records: each takes its number of operands off the front of ``flat``
        seq, head_col, program, loop_col, line, file_col, function_col, counts = d["records"]
        counts = _uncolumn(counts, n)
        if sum(counts) != n_ops:
            raise ValueError("compact trace operand counts do not add up")
        operands = list(map(list, map(islice, repeat(flat), counts)))
        heads = d["heads"]
        head_col = _uncolumn(head_col, n)
        opcodes, engines, attrs = zip(*heads) if heads else ((), (), ())
        attr_col = list(map(dict, map(attrs.__getitem__, head_col)))
        nested = {h for h, a in enumerate(attrs) if not _ATOM_TYPES.issuperset(map(type, a.values()))}
        if nested:  # (lists inside: each record gets its own)
            for i, h in enumerate(head_col):
                if h in nested:
                    attr_col[i] = _copy(attr_col[i])
        loops = [tuple(map(tuple, x)) for x in d["loops"]]
        files, functions = d["files"], d["functions"]
        self.records = list(map(TraceRecord, range(n) if seq is None else _uncolumn(seq, n),
                                map(opcodes.__getitem__, head_col), map(engines.__getitem__, head_col), operands,
                                attr_col, _uncolumn(program, n), map(loops.__getitem__, _uncolumn(loop_col, n)),
                                map(files.__getitem__, _uncolumn(file_col, n)), _uncolumn(line, n),
                                map(functions.__getitem__, _uncolumn(function_col, n))))
        self.warnings = list(d.get("warnings", []))
