"""The program document: its container, its JSON form, its limits, and the names a program may use.

Events (one list per LNC/SPMD program, nested for device loops), each a JSON list:

* ``["a", id, shape, dtype, buffer, name, address, fill, instruction, loc]`` allocation (``fill``: ``None``, a
  number or an encoded array; ``address``: ``None`` or ``[partition, byte]``);
* ``["i", name, args, kwargs, ret, loc, loops]`` an ISA instruction (a registered name) with encoded
  arguments and what it returned;
* ``["f", id]`` the allocation ``id`` is freed here;
* ``["s", id, method, operand, other, loc]`` device-scalar arithmetic (``NkiScalar`` operators);
* ``["L", kind, params, induction, body, next, loc]`` a device loop (``dynamic_range``, ``fori_loop``,
  ``while_loop``) whose body was traced once;
* ``["n", hook, loc]`` a front end's note on the instruction just issued (a registered hook).

Values: JSON atoms, lists, and one-key objects for everything else: ``{"T": [id, dtype, storage, byte offset,
shape, byte strides]}`` a view of an allocation, ``{"V": [method, base, args, kwargs]}`` a view made from a
runtime value (replayed by calling ``method`` on the replayed base), ``{"R": id}`` a register or scalar,
``{"tu": [...]}`` tuple, ``{"d": [[k, v], ...]}`` dict, ``{"sl": [a, b, c]}`` slice, ``{"el": 0}`` Ellipsis,
``{"ds": [start, size, step, runtime]}`` ``nl.ds``, ``{"dt": name}`` NKI dtype, ``{"buf": name}`` buffer,
``{"op": name}`` NKI operator, ``{"uf": name}`` NumPy ufunc, ``{"en": [enum, member]}`` ISA enum,
``{"f": "nan"|"inf"|"-inf"}`` a non-finite float, ``{"arr": [storage, shape, base64]}`` a small host array.
"""

from __future__ import annotations

import contextlib
import enum
import gc
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from nkieval.sim import dtypes as dt
from nkieval.sim.isa import enums as isa_enums
from nkieval.sim.ops import _NUMPY_NAMES

PROGRAM_FORMAT = "nkieval-program"
PROGRAM_VERSION = 1

#: Bounds a program must keep (the judge refuses a larger one before running anything).
MAX_EVENTS = 2_000_000
MAX_DEPTH = 64  # nesting of values and loops
MAX_JSON_BYTES = 512 * 1024 * 1024
MAX_FILL_BYTES = 64 * 1024 * 1024  # host constants (nl.shared_constant) baked into a program, all together
MAX_ALLOC_ELEMENTS = 1 << 31
MAX_RANK = 8
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
    """One LNC/SPMD program: the allocation ids of its tensor arguments, its events and its return value."""

    args: list[Any]
    kwargs: dict[str, Any]
    events: list[Any]
    ret: Any = None


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
               "programs": [{"args": p.args, "kwargs": p.kwargs, "events": p.events, "ret": p.ret}
                            for p in self.programs]}
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
            raise ProgramError(f"program version {doc.get('version')!r} is not {PROGRAM_VERSION}",
                               rule="program-format")
        try:
            programs = [ProgramBody(list(p["args"]), dict(p["kwargs"]), list(p["events"]), p.get("ret"))
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
