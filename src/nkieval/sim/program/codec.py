"""The program document: its container, its JSON form, its limits, and the names a program may use.

Version 2 (the only version this install reads or writes: the tracer and the judge are always the same install,
so a document of another version is refused, naming both). A document is one JSON object: ``format``
(``"nkieval-program"``), ``version`` (2), ``kernel``, ``target``, ``lnc``, ``grid``, ``arg_names``,
``kwarg_names``, ``n_events``, and ``programs``, one object per LNC/SPMD program::

    {"args": [...], "kwargs": {...}, "locs": [...], "layouts": [...], "views": [...], "calls": [...],
     "allocs": [...], "events": [...], "ret": ...}

What repeats is interned in the body's five tables, each entry written once and named by its index (an integer
from 0) wherever it is used; each table is at most :data:`MAX_TABLE_ENTRIES` long (checked before anything is
compiled), every index must be in its table, and every entry is checked once, when the program is compiled,
whether or not an event names it (the checks version 1 made of the same fields in every event):

* ``locs``: kernel lines, each ``[file, line, function]`` (or ``[]``: none); a ``loc`` below is an index or
  ``null`` (no line);
* ``layouts``: a view's layout, ``[dtype, storage dtype, shape, byte strides]``: NKI dtype and NumPy storage
  names, and lists of integers of the same length (rank at most :data:`MAX_RANK`, no negative extent);
* ``views``: ``[allocation id, layout index, byte offset]``: a view of an allocation (the offset aligned to the
  storage's elements, the view not starting before the allocation; its end is checked against the allocation's
  storage at each replay);
* ``calls``: an instruction's call site, ``[instruction, keyword names, loc]`` (a registered instruction, names
  that are strings; a name given twice takes its last value, as a JSON object of the same pairs would);
* ``allocs``: an allocation's site, ``[shape, dtype, buffer, name, instruction, loc]`` (rank at most
  :data:`MAX_RANK`, at most :data:`MAX_ALLOC_ELEMENTS` elements, a known dtype and buffer).

(Version 1 wrote all of it in every event: a view as ``{"T": [id, dtype, storage, offset, shape, strides]}``, an
instruction's name, keyword names and kernel line, an allocation's shape, dtype, buffer and line. A loop of tiny
instructions repeated them thousands of times: 1.7 MB for a 300,007-element thread-by-thread vector add, 0.38 MB
in version 2, which the judge also parses and compiles in less than half the time.)

Events (one list per program, nested for device loops), each a JSON list:

* ``["a", id, site, address, fill]`` an allocation at the ``allocs`` entry ``site`` (``fill``: ``None``, a number
  or an encoded array; ``address``: ``None`` or ``[partition, byte]``);
* ``["i", call, args, values, ret, loops]`` an ISA instruction at the ``calls`` entry ``call``, with its encoded
  positional arguments, its keyword arguments' values (one per keyword name of the entry, in its order), what it
  returned, and its static loop frames;
* ``["f", id]`` the allocation ``id`` is freed here;
* ``["s", id, method, operand, other, loc]`` device-scalar arithmetic (``NkiScalar`` operators);
* ``["L", kind, params, induction, body, next, loc]`` a device loop (``dynamic_range``, ``fori_loop``,
  ``while_loop``) whose body was traced once;
* ``["n", hook, loc]`` a front end's note on the instruction just issued (a registered hook).

Values: JSON atoms, lists, and one-key objects for everything else: ``{"T": k}`` the view ``views[k]``,
``{"V": [method, base, args, kwargs]}`` a view made from a runtime value (replayed by calling ``method`` on the
replayed base), ``{"R": id}`` a register or scalar, ``{"tu": [...]}`` tuple, ``{"d": [[k, v], ...]}`` dict,
``{"sl": [a, b, c]}`` slice, ``{"el": 0}`` Ellipsis, ``{"ds": [start, size, step, runtime]}`` ``nl.ds``,
``{"dt": name}`` NKI dtype, ``{"buf": name}`` buffer, ``{"op": name}`` NKI operator, ``{"uf": name}`` NumPy
ufunc, ``{"en": [enum, member]}`` ISA enum, ``{"f": "nan"|"inf"|"-inf"}`` a non-finite float,
``{"arr": [storage, shape, base64]}`` a small host array.
"""

from __future__ import annotations

import contextlib
import enum
import gc
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nkieval.sim import dtypes as dt
from nkieval.sim.isa import enums as isa_enums
from nkieval.sim.ops import _NUMPY_NAMES

PROGRAM_FORMAT = "nkieval-program"
PROGRAM_VERSION = 2

#: Bounds a program must keep (the judge refuses a larger one before running anything).
MAX_EVENTS = 2_000_000
MAX_DEPTH = 64  # nesting of values and loops
MAX_JSON_BYTES = 512 * 1024 * 1024
MAX_FILL_BYTES = 64 * 1024 * 1024  # host constants (nl.shared_constant) baked into a program, all together
MAX_ALLOC_ELEMENTS = 1 << 31
MAX_RANK = 16  # (Beta-1 compiler dumps declare block tensors of up to 7 block dimensions: rank 9)
#: Entries of each of a program body's tables (kernel lines, view layouts, views): more than its events could name
#: (an instruction names a few views), and a bound the judge checks before it compiles any.
MAX_TABLE_ENTRIES = 4 * MAX_EVENTS
#: A body's tables, by their document key (see the module's docstring).
TABLES = ("locs", "layouts", "views", "calls", "allocs")
#: The instruction budget of a candidate's run when task.toml's [limits] does not set one (a harness limit,
#: not a hardware fact: it bounds the simulation's time and the trace's size). The task schema's default and
#: the review sandbox's both read it.
DEFAULT_MAX_INSTRUCTIONS = 200_000

#: NkiTensor methods that make views; a runtime-indexed view is replayed by calling one of these.
VIEW_METHODS = frozenset({
    "__getitem__", "slice", "select", "reshape", "view", "reinterpret_cast", "permute", "broadcast",
    "broadcast_to", "expand_dim", "expand_dims", "squeeze_dim", "reshape_dim", "flatten_dims", "rearrange", "ap",
    "vector_select", "indirect",
})
#: NkiScalar operators recorded as device-scalar arithmetic.
SCALAR_METHODS = frozenset({
    "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__neg__", "__pos__", "__floordiv__",
    "__truediv__", "__mod__", "__lshift__", "__rshift__", "__and__", "__or__", "__xor__", "__pow__", "__lt__",
    "__le__", "__gt__", "__ge__", "__eq__", "__ne__",
})
LOOP_KINDS = frozenset({"dynamic_range", "fori_loop", "while_loop"})

#: ISA enum classes a program may name (``{"en": [class, member]}``).
ENUMS: dict[str, type[enum.Enum]] = {
    name: cls for name, cls in vars(isa_enums).items() if isinstance(cls, type) and issubclass(cls, enum.Enum)
}
#: NumPy functions accepted as operators (Beta 1 allowed ``op=np.add``), by their NumPy attribute name.
NUMPY_OPS: dict[str, Any] = {f.__name__: f for f in _NUMPY_NAMES if getattr(np, getattr(f, "__name__", ""), None) is f}
for _name in ("max", "min", "amax", "amin", "sum", "prod", "mean"):
    if hasattr(np, _name):
        NUMPY_OPS.setdefault(_name, getattr(np, _name))
NUMPY_OP_NAMES = {id(f): name for name, f in NUMPY_OPS.items()}
#: Python types a kernel may pass where a dtype goes.
PY_TYPES: dict[str, type] = {"int": int, "float": float, "bool": bool}
NKI_DTYPES = {d.name: d for d in dt.ALL_DTYPES}
#: NumPy storage dtypes a view or host array may have, by name (every NKI dtype's storage in either precision
#: mode, and the plain NumPy numbers).
STORAGE_DTYPES: dict[str, np.dtype] = {
    np.dtype(sd).name: np.dtype(sd)
    for d in dt.ALL_DTYPES for sd in (dt.storage_dtype(d, True), dt.storage_dtype(d, False), d.storage)}
STORAGE_DTYPES.update({n: np.dtype(n) for n in ("float16", "float32", "float64", "int8", "int16", "int32", "int64",
                                                 "uint8", "uint16", "uint32", "uint64", "bool")})
NONFINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


class ProgramError(ValueError):
    """A program that cannot be recorded, or a document that is not a valid program (names the rule)."""

    def __init__(self, message: str, *, rule: str = "program", where: str | None = None) -> None:
        super().__init__(message + (f" (at {where})" if where else ""))
        self.rule = rule
        self.where = where


@dataclass
class ProgramBody:
    """One LNC/SPMD program: the allocation ids of its tensor arguments, its events, its return value, and the
    tables its events name entries of by index (kernel lines, view layouts, views)."""

    args: list[Any]
    kwargs: dict[str, Any]
    events: list[Any]
    ret: Any = None
    locs: list[Any] = field(default_factory=list)
    layouts: list[Any] = field(default_factory=list)
    views: list[Any] = field(default_factory=list)
    calls: list[Any] = field(default_factory=list)
    allocs: list[Any] = field(default_factory=list)


@dataclass
class Program:
    """A recorded kernel: what the judge executes."""

    kernel: str
    target: str
    lnc: int
    grid: list[int]
    arg_names: list[str]
    kwarg_names: list[str]
    programs: list[ProgramBody]
    n_events: int = 0  # events of every body (their size, for reports)

    def to_json(self) -> str:
        text = self.__dict__.get("_text")
        if text is not None and self.__dict__.get("_released"):  # (see release_events)
            return text if isinstance(text, str) else text.decode()
        doc = {"format": PROGRAM_FORMAT, "version": PROGRAM_VERSION, "kernel": self.kernel, "target": self.target,
               "lnc": self.lnc, "grid": self.grid, "arg_names": self.arg_names, "kwarg_names": self.kwarg_names,
               "n_events": self.n_events,
               "programs": [{"args": p.args, "kwargs": p.kwargs, "locs": p.locs, "layouts": p.layouts,
                             "views": p.views, "calls": p.calls, "allocs": p.allocs, "events": p.events,
                             "ret": p.ret} for p in self.programs]}
        # (no cycle check: the recorder builds every container afresh and bounds their depth)
        return json.dumps(doc, separators=(",", ":"), allow_nan=False, check_circular=False)

    @classmethod
    def from_json(cls, text: str | bytes) -> Program:
        """Parse a program document (structure only: :func:`nkieval.sim.program.validate.validate` checks the
        rest before a replay)."""
        if len(text) > MAX_JSON_BYTES:
            raise ProgramError(f"program of {len(text)} bytes exceeds the {MAX_JSON_BYTES}-byte limit",
                               rule="program-size")
        try:
            with no_gc():  # (a tree of many small containers and no cycles: collections would only walk it)
                doc = json.loads(text, parse_constant=_refuse_constant)
        except (ValueError, RecursionError) as e:
            raise ProgramError(f"the program is not valid JSON: {e}", rule="program-format") from None
        if not isinstance(doc, dict) or doc.get("format") != PROGRAM_FORMAT:
            raise ProgramError(f"not an {PROGRAM_FORMAT} document", rule="program-format")
        if doc.get("version") != PROGRAM_VERSION:
            raise ProgramError(f"program version {doc.get('version')!r} is not {PROGRAM_VERSION}, the only version "
                               "this install reads (its tracer writes it: a program from another nkieval install "
                               "must be traced again)", rule="program-format")
        try:
            programs = [ProgramBody(list(p["args"]), dict(p["kwargs"]), list(p["events"]), p.get("ret"),
                                    *(list(p[t]) for t in TABLES))
                        for p in doc["programs"]]
            prog = cls(kernel=str(doc["kernel"]), target=str(doc["target"]), lnc=int(doc["lnc"]),
                       grid=[int(g) for g in doc["grid"]], arg_names=[str(a) for a in doc["arg_names"]],
                       kwarg_names=[str(k) for k in doc["kwarg_names"]], programs=programs,
                       n_events=int(doc.get("n_events", 0)))
        except (KeyError, TypeError, ValueError) as e:
            raise ProgramError(f"malformed program document: {e!r}", rule="program-format") from None
        prog.__dict__["_text"] = text
        return prog

    def release_events(self) -> None:
        """Drop the parsed event lists once the program is compiled (``nkieval.sim.program.compile_program`` does,
        for a program parsed here): its replays need only the compiled steps, and the parsed tree is many times
        the text's size (108 MB for a 12 MB program of 70,000 events) and a long walk for every full garbage
        collection while it is kept. ``to_json`` then gives the text it was parsed from."""
        if self.__dict__.get("_text") is None:
            return  # (a recorded program has no text to stand for its events)
        self.__dict__["_released"] = True
        for body in self.programs:
            body.events = []
            for t in TABLES:
                setattr(body, t, [])


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed in a program (non-finite floats are encoded as objects)")


@contextlib.contextmanager
def no_gc() -> Iterator[None]:
    """The cyclic garbage collector off for a block that builds a large tree without cycles (parsing or
    compiling a program): its collections would walk every node made so far, again and again."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def widen_allocations(doc: dict[str, Any], itemsize: dict[str, int], buffers: tuple[str, ...],
                      wide: str = "float32") -> bool:
    """Make a parsed document's top-level allocations of a dtype of ``itemsize`` (its bytes per element) in one of
    ``buffers`` 4-byte ``wide`` ones, in place: the allocation's dtype, and every view of such an allocation of a
    dtype of ``itemsize``, whose dtype becomes ``wide`` and its byte offset and strides are scaled to 4-byte elements
    (the judge's port ablation replays a port with its low-precision tiles widened). The allocs and layouts tables
    are rebuilt, so no entry of a widened dtype is left unused. Whether any allocation was widened; raises
    ``KeyError``, ``IndexError``, ``TypeError`` or ``ValueError`` on a document that is not a program."""
    def widened(site: list[Any]) -> bool:
        return site[1] in itemsize and site[2] in buffers

    scale: dict[int, int] = {}
    for body in doc["programs"]:
        for ev in body["events"]:
            if ev[0] == "a" and widened(body["allocs"][ev[2]]):
                scale[ev[1]] = 4 // itemsize[body["allocs"][ev[2]][1]]
    if not scale:
        return False
    for body in doc["programs"]:
        sites, layouts = body["allocs"], body["layouts"]
        new_sites: _Interned = _Interned()
        for ev in body["events"]:  # (the top-level allocations; those in device loops keep their dtype)
            if ev[0] == "a":
                site = sites[ev[2]]
                ev[2] = new_sites.add([site[0], wide, *site[2:]] if widened(site) else site)
        _resite(body["events"], sites, new_sites)
        new_layouts = _Interned()
        for view in body["views"]:
            aid, lay, off = view
            dname, _, shape, strides = layouts[lay]
            if aid in scale and dname in itemsize:
                k = scale[aid]
                view[1], view[2] = new_layouts.add([wide, wide, shape, [s * k for s in strides]]), off * k
            else:
                view[1] = new_layouts.add(layouts[lay])
        body["allocs"], body["layouts"] = new_sites.entries, new_layouts.entries
    return True


class _Interned:
    """A table rebuilt entry by entry, each distinct entry once."""

    def __init__(self) -> None:
        self.entries: list[Any] = []
        self.index: dict[str, int] = {}

    def add(self, entry: Any) -> int:
        key = json.dumps(entry)
        if key not in self.index:
            self.index[key] = len(self.entries)
            self.entries.append(entry)
        return self.index[key]


def _resite(events: list[Any], sites: list[Any], new_sites: _Interned) -> None:
    """The allocations in device loops' bodies, their sites unchanged, in the rebuilt table."""
    for ev in events:
        if ev[0] == "L":
            for inner in ev[4]:
                if inner[0] == "a":
                    inner[2] = new_sites.add(sites[inner[2]])
            _resite(ev[4], sites, new_sites)
