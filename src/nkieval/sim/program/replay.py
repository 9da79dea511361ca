"""Executing a recorded program on the simulator with real inputs: the judge's side of trace-then-execute.

The replay is a kernel function of its own: ``run_kernel`` launches it like any kernel (the same argument
wrapping, LNC threads, capacity check and trace), and in each program it walks that program's events,
calling the simulator's own functions — ``allocate``, the registered ISA instructions, the tensor view
methods, the device-loop functions — with the values decoded from the document. Nothing in a program is
code: every name is looked up in a registry, and every view is checked against its allocation's bounds
before it is made. Each instruction runs at the kernel line recorded with it, so errors, warnings and the
trace name the candidate's source as an eager run would.
"""

from __future__ import annotations

import functools
import math
import threading
from base64 import b64decode
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from nkieval.sim.context import ForcedFrame, current, force_location
from nkieval.sim.isa.core import INSTRUCTIONS, check_deadline
from nkieval.sim.memory import BUFFERS
from nkieval.sim.ops import OPS
from nkieval.sim.pages import own_mapping
from nkieval.sim.program.codec import (
    ENUMS,
    LOOP_KINDS,
    MAX_ALLOC_ELEMENTS,
    MAX_DEPTH,
    MAX_RANK,
    NKI_DTYPES,
    NONFINITE,
    NUMPY_OPS,
    PY_TYPES,
    SCALAR_METHODS,
    STORAGE_DTYPES,
    VIEW_METHODS,
    Program,
    ProgramError,
    no_gc,
)
from nkieval.sim.program.regions import RegionPlan, scan_body
from nkieval.sim.runner import RunResult, run_kernel
from nkieval.sim.tensor import DynSlice, NkiTensor, allocate, write_sentinels

#: Front-end notes a program may carry (``["n", hook, loc]``), registered by the front ends that emit them.
NOTE_HOOKS: dict[str, Callable[[Any], None]] = {}


def register_note_hook(name: str, fn: Callable[[Any], None]) -> None:
    NOTE_HOOKS[name] = fn


_VIEWS_MAX = 1 << 16
#: value kinds that name a registered object: (its table, what it is, for the error)
_NAMED: dict[str, tuple[Any, str]] = {
    "dt": (NKI_DTYPES, "dtype"), "buf": (BUFFERS, "buffer"), "op": (OPS, "operator"),
    "uf": (NUMPY_OPS, "NumPy operator"), "f": (NONFINITE, "float"), "npd": (STORAGE_DTYPES, "NumPy dtype"),
    "py": (PY_TYPES, "type"),
}

#: What the program being compiled (in this thread) holds that can make its instruction stream differ between
#: runs: device values (registers, device scalars and their arithmetic, runtime-indexed views) and device loops.
_COMPILING = threading.local()


def _device_decision() -> None:
    _COMPILING.dynamic = True


#: A compiled value: called with the replay's state, it gives the value.
Getter = Callable[["_State"], Any]
#: A compiled event: called with the replay's state, it does the event.
Step = Callable[["_State"], None]


class _Const:
    """A value that does not depend on the run (numbers, names, dtypes, operators...)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __call__(self, st: _State) -> Any:
        return self.value


#: JSON atoms, by exact type (what a parsed document holds; anything else takes the checked path below)
_ATOMS = frozenset({type(None), bool, int, float, str})


_NONE = _Const(None)


def compile_value(x: Any, depth: int = 0) -> Getter:
    """The getter of an encoded value; every name is looked up and every number checked here."""
    if depth > MAX_DEPTH:
        raise ProgramError("value nested too deeply", rule="program-format")
    cls = type(x)
    if cls in _ATOMS:  # (the common cases first: numbers, then views)
        return _Const(x) if x is not None else _NONE
    if cls is dict and len(x) == 1:
        for k, v in x.items():
            if k == "T":
                return _compile_view(v, depth)
            named = _NAMED.get(k)  # (an operator, dtype, buffer...)
            if named is not None:
                return _Const(_lookup(named[0], v, named[1]))
            break
    elif cls is not list and (x is None or isinstance(x, bool | int | float | str)):
        return _Const(x)
    if cls is list or isinstance(x, list):
        parts = [compile_value(v, depth + 1) for v in x]
        if all(type(p) is _Const for p in parts):
            vals = [p.value for p in parts]  # type: ignore[attr-defined]
            return lambda st: list(vals)  # (a fresh list each time: a callee may keep or change it)
        return lambda st: [p(st) for p in parts]
    if not isinstance(x, dict) or len(x) != 1:
        raise ProgramError(f"not a program value: {str(x)[:80]}", rule="program-format")
    (k, v), = x.items()
    maker = _KINDS.get(k)
    if maker is not None:
        return maker(v, depth)
    named = _NAMED.get(k)
    if named is not None:
        return _Const(_lookup(named[0], v, named[1]))
    raise ProgramError(f"unknown value kind {k!r}", rule="program-format")


def _compile_tuple(v: Any, depth: int) -> Getter:
    parts = [compile_value(e, depth + 1) for e in _list(v)]
    if all(isinstance(p, _Const) for p in parts):
        return _Const(tuple(p.value for p in parts))  # type: ignore[union-attr]
    return lambda st: tuple(p(st) for p in parts)


def _compile_dict(v: Any, depth: int) -> Getter:
    pairs = [(compile_value(a, depth + 1), compile_value(b, depth + 1)) for a, b in (_list(e, 2) for e in _list(v))]
    return lambda st: {a(st): b(st) for a, b in pairs}


def _compile_slice(v: Any, depth: int) -> Getter:
    a, b, c = (compile_value(e, depth + 1) for e in _list(v, 3))
    return lambda st: slice(a(st), b(st), c(st))


def _compile_dynslice(v: Any, depth: int) -> Getter:
    _device_decision()
    start, size, step, runtime = _list(v, 4)
    s, r = compile_value(start, depth + 1), compile_value(runtime, depth + 1)
    n, k = _int(size), _int(step)
    return lambda st: DynSlice(s(st), n, k, r(st))


def _compile_enum(v: Any, depth: int) -> Getter:
    cls_name, member = _list(v, 2)
    cls = _lookup(ENUMS, cls_name, "enum")
    return _Const(_lookup(cls.__members__, member, f"member of {cls_name}"))


def _compile_array(v: Any, depth: int) -> Getter:
    arr = _array(v)
    return lambda st: arr.copy()


def _compile_object(v: Any, depth: int) -> Getter:
    _device_decision()

    def get(st: _State) -> Any:
        obj = st.objs.get(v)
        if obj is None:
            raise ProgramError(f"register or scalar #{v} is used before it exists", rule="program-format")
        return obj

    return get


class _Layout:
    """A layouts table entry, ``[dtype, storage dtype, shape, byte strides]``, checked once: names looked up, and
    the bytes it spans before and after its first element."""

    __slots__ = ("below", "d", "empty", "sd", "shape", "span", "strides")

    def __init__(self, entry: Any) -> None:
        dname, sname, shape, strides = _list(entry, 4)
        shape, strides = _ints(shape), _ints(strides)
        if type(dname) is not str or type(sname) is not str:
            raise ProgramError("a view's dtype is not a name", rule="program-format")
        self.d = _lookup(NKI_DTYPES, dname, "dtype")
        self.sd = np.dtype(_lookup(STORAGE_DTYPES, sname, "storage dtype"))
        if len(shape) != len(strides) or len(shape) > MAX_RANK or any(n < 0 for n in shape):
            raise ProgramError(f"bad view geometry {list(shape)} / {list(strides)}", rule="program-bounds")
        self.shape, self.strides = shape, strides
        pairs = [(n, s) for n, s in zip(shape, strides) if n]
        self.below = sum(min(0, (n - 1) * s) for n, s in pairs)
        self.span = sum(max(0, (n - 1) * s) for n, s in pairs) + self.sd.itemsize
        self.empty = not math.prod(shape)


class _Geometry:
    """A view's layout at a byte offset, checked once: the byte range it spans, which each run checks against its
    allocation's storage."""

    __slots__ = ("d", "hi", "off", "sd", "shape", "strides")

    def __init__(self, lay: _Layout, off: int) -> None:
        self.off, self.shape, self.strides, self.d, self.sd = off, lay.shape, lay.strides, lay.d, lay.sd
        lo = off + lay.below
        self.hi = off + lay.span
        if off % self.sd.itemsize or lo < 0:
            raise ProgramError(f"view [{lo}, {self.hi}) starts outside its allocation", rule="program-bounds")
        if lay.empty:
            self.hi = off  # (an empty view reads nothing)


class _View:
    """A views table entry, ``[allocation id, layout, byte offset]``: its geometry checked once (shared by every
    allocation viewed the same way); each run checks it against the allocation's storage before NumPy makes it."""

    __slots__ = ("aid", "g")

    def __init__(self, aid: int, g: _Geometry) -> None:
        self.aid, self.g = aid, g

    def __call__(self, st: _State) -> NkiTensor:
        a = st.allocs.get(self.aid)
        hit = st.views.get(self)
        if hit is not None and hit[0] is a:  # a view used again (a loop names the same ones every iteration)
            return hit[1]
        if a is None:
            raise ProgramError(f"allocation #{self.aid} is used before it is allocated or after it is freed",
                               rule="program-format")
        g = self.g
        storage = a.storage
        nbytes = storage.nbytes
        if g.hi > nbytes or g.off > nbytes:
            raise ProgramError(f"view [{g.off}, {g.hi}) of allocation #{self.aid} is outside its {nbytes} bytes",
                               rule="program-bounds")
        if nbytes % g.sd.itemsize:
            raise ProgramError("storage size is not a multiple of the view's element size", rule="program-bounds")
        try:  # (the checks above keep it inside the storage: NumPy checks again)
            arr = np.ndarray(g.shape, g.sd, storage, g.off, g.strides)
        except (TypeError, ValueError):  # storage that does not export a plain buffer
            base = storage.reshape(-1).view(np.uint8).view(g.sd)
            arr = np.lib.stride_tricks.as_strided(base[g.off // g.sd.itemsize:], shape=g.shape, strides=g.strides)
        t = NkiTensor(arr, a, g.d)
        t._off = g.off
        if len(st.views) >= _VIEWS_MAX:
            st.views.clear()
            st.viewed.clear()
        st.views[self] = (a, t)
        st.viewed.setdefault(self.aid, []).append(self)
        return t


def _compile_view(v: Any, depth: int) -> Getter:
    """``{"T": k}``: the program body's view ``k`` (its table entry compiled once, before any event)."""
    views = getattr(_COMPILING, "views", None)
    if type(v) is not int:
        _int(v)  # (raises: JSON's true is not 1)
    if views is None or not 0 <= v < len(views):
        raise ProgramError(f"view #{v} is not in the program's table of {len(views or ())} views",
                           rule="program-format")
    return views[v]


def _ints(x: Any) -> tuple[int, ...]:
    """A list of integers (not bools) as a tuple."""
    t = tuple(_list(x))
    if not all(type(n) is int for n in t):  # (exact type: a program's numbers come from JSON)
        for n in t:
            _int(n)
    return t


def _compile_tables(body: Any) -> None:
    """A body's tables, every entry checked once (whether or not an event names it), for its events' indices:
    kernel lines as frames, layouts, and views (one object per entry, one geometry per layout and offset)."""
    _COMPILING.frames = [_frame(e) for e in _list(body.locs)]
    layouts = [_Layout(e) for e in _list(body.layouts)]
    geometries: dict[tuple[int, int], _Geometry] = {}
    views = []
    for e in _list(body.views):
        if type(e) is not list or len(e) != 3:
            _list(e, 3)  # (raises)
        aid, lay, off = e
        if type(aid) is not int or type(lay) is not int or type(off) is not int:
            _int(aid), _int(lay), _int(off)  # (raises)
        if not 0 <= lay < len(layouts):
            raise ProgramError(f"layout #{lay} is not in the program's table of {len(layouts)} layouts",
                               rule="program-format")
        g = geometries.get((lay, off))
        if g is None:
            g = geometries[lay, off] = _Geometry(layouts[lay], off)
        views.append(_View(aid, g))
    _COMPILING.views = views
    _COMPILING.calls = [_Call(e) for e in _list(body.calls)]
    _COMPILING.allocs = [_AllocSite(e) for e in _list(body.allocs)]


def _entry(table: str, ref: Any) -> Any:
    """The compiled entry ``ref`` of the body's table ``table`` (an index in range)."""
    entries = getattr(_COMPILING, table)
    if type(ref) is not int:
        _int(ref)  # (raises)
    if not 0 <= ref < len(entries):
        raise ProgramError(f"{table} entry #{ref} is not in the program's table of {len(entries)}",
                           rule="program-format")
    return entries[ref]


def _compile_remade_view(v: Any, depth: int) -> Getter:
    _device_decision()  # (only runtime-indexed views are remade: a plain one is recorded as its geometry)
    method, base, args, kwargs = _list(v, 4)
    if method not in VIEW_METHODS:
        raise ProgramError(f"{method!r} is not a view method", rule="program-format")
    b, a, kw = (compile_value(x, depth + 1) for x in (base, args, kwargs))

    def get(st: _State) -> NkiTensor:
        t = b(st)
        if not isinstance(t, NkiTensor):
            raise ProgramError("a view's base is not a tensor", rule="program-format")
        pos, named = a(st), kw(st)
        if not isinstance(pos, list) or not isinstance(named, dict) or not all(isinstance(k, str) for k in named):
            raise ProgramError("bad view arguments", rule="program-format")
        out = getattr(t, method)(*pos, **named)
        if not isinstance(out, NkiTensor):
            raise ProgramError(f"{method} did not make a view", rule="program-format")
        return out

    return get


_KINDS: dict[str, Callable[[Any, int], Getter]] = {
    "T": _compile_view, "V": _compile_remade_view, "R": lambda v, depth: _compile_object(_int(v), depth),
    "tu": _compile_tuple, "d": _compile_dict, "sl": _compile_slice, "el": lambda v, depth: _Const(Ellipsis),
    "ds": _compile_dynslice, "en": _compile_enum, "arr": _compile_array,
}


def _loc_frame(ref: Any) -> ForcedFrame | None:
    """An event's kernel line: ``None``, or an index into its body's table of lines."""
    return None if ref is None else _entry("frames", ref)


def _frame(loc: Any) -> ForcedFrame | None:
    """A locs table entry, ``[file, line, function]`` (or empty: no line)."""
    if not loc:
        return None
    file, line, fn = _list(loc, 3)
    return _forced_frame(file if isinstance(file, str) else None, line if type(line) is int else None,
                         fn if isinstance(fn, str) else None)


@functools.lru_cache(maxsize=1 << 12)
def _forced_frame(file: str | None, line: int | None, fn: str | None) -> ForcedFrame:
    """One frame per kernel line (a loop's instructions repeat their lines; a frame is never changed)."""
    return ForcedFrame(file, line, fn)


def compile_events(events: list[Any]) -> list[Step]:
    """The steps of a program body (or a device loop's body), every event checked once."""
    steps = []
    for ev in events:
        if not isinstance(ev, list) or not ev:
            raise ProgramError("an event is not a list", rule="program-format")
        maker = _EVENTS.get(ev[0]) if isinstance(ev[0], str) else None
        if maker is None:
            raise ProgramError(f"unknown event {ev[0]!r}", rule="program-format")
        steps.append(maker(ev))
    return steps


class _Call:
    """A calls table entry, ``[instruction, keyword names, loc]``: the instruction looked up, its keywords checked,
    once for every event that calls it there."""

    __slots__ = ("fn", "frame", "name", "names", "unique")

    def __init__(self, entry: Any) -> None:
        name, names, loc = _list(entry, 3)
        self.fn = _lookup(INSTRUCTIONS, name, "instruction").fn
        self.name = name
        if any(type(k) is not str for k in _list(names)):
            raise ProgramError(f"bad arguments of {name}", rule="program-format")
        self.names = tuple(names)
        self.unique = len(set(names)) == len(names)
        self.frame = _loc_frame(loc)


def _compile_instruction(ev: list[Any]) -> Step:
    _, call, args, values, ret, loops = _list(ev, 6)
    c = _entry("calls", call)
    # (`[]`, the common case of both, needs no compiling: no loop around the instruction, no positional operand)
    loop_frames = _compile_loops(loops) if loops != [] else ()
    a = compile_value(args) if args != [] else _NO_ARGS
    kw = _compile_kwargs(values, c)
    if not isinstance(args, list):
        raise ProgramError(f"bad arguments of {c.name}", rule="program-format")
    if args or ret is not None or type(loop_frames) is not tuple:
        return _Instruction(c.fn, c.frame, loop_frames, a, kw, _binding(ret))
    return _KeywordInstruction(c.fn, c.frame, loop_frames, kw)


def _binding(enc: Any, depth: int = 0) -> Any:
    """What an instruction returned, as ``_State.bind`` reads it: its views (``{"T": k}``) as the allocation id of
    their table entry (checked here, once)."""
    if depth > MAX_DEPTH:
        raise ProgramError("value nested too deeply", rule="program-format")
    if type(enc) is dict and len(enc) == 1:
        (k, v), = enc.items()
        if k == "T":
            return {"T": _compile_view(v, depth).aid}  # type: ignore[attr-defined]
        if k == "tu" and type(v) is list:
            return {"tu": [_binding(e, depth + 1) for e in v]}
    elif type(enc) is list:
        return [_binding(e, depth + 1) for e in enc]
    return enc


def _no_args(st: _State) -> list[Any]:
    return []  # (a fresh list each time, as compile_value's for a list)


_NO_ARGS: Getter = _no_args


# A compiled program is tens of thousands of steps kept for every replay of its shape: each step is one slotted
# object (a closure would be a function, a cell per name it uses and their tuple, all walked by the collector).
class _Instruction:
    """An instruction event: its function called with the decoded operands at its kernel line."""

    __slots__ = ("a", "fn", "frame", "kw", "loops", "ret")

    def __init__(self, fn: Any, frame: Any, loops: Any, a: Getter, kw: Getter, ret: Any) -> None:
        self.fn, self.frame, self.loops, self.a, self.kw, self.ret = fn, frame, loops, a, kw, ret

    def __call__(self, st: _State) -> None:
        force_location(self.frame)
        loops = self.loops
        st.ctx._loops_tuple = loops if type(loops) is tuple else st.loops(loops)
        result = self.fn(*self.a(st), **self.kw(st))
        if self.ret is not None:
            st.bind(self.ret, result)


class _KeywordInstruction:
    """Most instructions: keyword operands, no result to name, no device loop around them."""

    __slots__ = ("fn", "frame", "kw", "loops")

    def __init__(self, fn: Any, frame: Any, loops: tuple[Any, ...], kw: Getter) -> None:
        self.fn, self.frame, self.loops, self.kw = fn, frame, loops, kw

    def __call__(self, st: _State) -> None:
        force_location(self.frame)
        st.ctx._loops_tuple = self.loops
        self.fn(**self.kw(st))


def _compile_kwargs(values: Any, call: _Call) -> Getter:
    """Keyword arguments: ``values``, one per keyword name of the call's entry, in its order."""
    if type(values) is not list or len(values) != len(call.names):
        raise ProgramError(f"bad arguments of {call.name}", rule="program-format")
    template: dict[str, Any] = {}
    dynamic = []
    if not call.unique:  # (a name given twice: its first place, its last value, as a dict display)
        getters = {k: compile_value(v, 1) for k, v in zip(call.names, values)}
    else:
        getters = None
        views = _COMPILING.views
        n = len(views)
        for k, v in zip(call.names, values):
            if type(v) is dict and len(v) == 1 and "T" in v:  # (most operands are views: compile_value's first case)
                template[k] = None  # (its place, so the keywords keep their recorded order)
                i = v["T"]
                # (an index in range taken inline; anything else goes to _compile_view, which refuses it)
                dynamic.append((k, views[i] if type(i) is int and 0 <= i < n else _compile_view(i, 1)))
                continue
            g = compile_value(v, 1)
            if type(g) is _Const:
                template[k] = g.value
            else:
                template[k] = None
                dynamic.append((k, g))
    if getters is not None:
        for k, g in getters.items():
            if type(g) is _Const:
                template[k] = g.value
            else:
                template[k] = None
                dynamic.append((k, g))
    return _Keywords(template, tuple(dynamic))


class _Keywords:
    """Keyword arguments: the constant ones kept as a dict copied per call, the others decoded into it."""

    __slots__ = ("dynamic", "template")

    def __init__(self, template: dict[str, Any], dynamic: tuple[tuple[str, Getter], ...]) -> None:
        self.template, self.dynamic = template, dynamic

    def __call__(self, st: _State) -> dict[str, Any]:
        d = self.template.copy()
        for k, g in self.dynamic:
            d[k] = g(st)
        return d


def _compile_loops(loops: Any) -> Any:
    """The trace's loop context of an instruction: a tuple when it names no device loop, else a template
    whose ``None`` places take the device loops in force when it runs."""
    frames: list[Any] = []
    for f in _list(loops):
        if f is None:
            frames.append(None)
        else:
            kind, i, n = _list(f, 3)
            frames.append((str(kind), _int(i), _int(n)))
    return tuple(frames) if None not in frames else frames


class _AllocSite:
    """An allocs table entry, ``[shape, dtype, buffer, name, instruction, loc]``: checked once for every allocation
    made there."""

    __slots__ = ("buf", "d", "frame", "instr", "name", "shape")

    def __init__(self, entry: Any) -> None:
        shape, dname, bname, name, instr, loc = _list(entry, 6)
        shape = tuple(_list(shape))
        for n in shape:  # (exact ints, one by one: see _compile_view)
            if type(n) is not int:
                _int(n)  # (raises)
        if len(shape) > MAX_RANK or math.prod(shape) > MAX_ALLOC_ELEMENTS:
            raise ProgramError(f"allocation {list(shape)} is too large", rule="program-bounds")
        self.shape = shape
        self.d = _lookup(NKI_DTYPES, dname, "dtype")
        self.buf = _lookup(BUFFERS, bname, "buffer")
        self.name, self.instr, self.frame = str(name), str(instr), _loc_frame(loc)


def _compile_allocation(ev: list[Any]) -> Step:
    _, aid, site, addr, fill = _list(ev, 5)
    s = _entry("allocs", site)
    address = None if addr is None else tuple(_int(x) for x in _list(addr, 2))
    return _Allocation(_int(aid), s.shape, s.d, s.buf, s.name, address, compile_value(fill), s.instr, s.frame,
                       fill is not None and not s.buf.on_chip)


class _Allocation:
    """An allocation event: ``allocate`` at its kernel line, the new allocation named by its program id
    (``zeroed``: in zero pages, whose regions the replay fills and gives back itself: :mod:`.regions`)."""

    __slots__ = ("address", "aid", "buf", "d", "fill", "frame", "instr", "name", "note", "shape", "zeroed")

    def __init__(self, aid: int, shape: tuple[int, ...], d: Any, buf: Any, name: str, address: Any, fill: Getter,
                 instr: str, frame: Any, note: bool) -> None:
        self.aid, self.shape, self.d, self.buf, self.name, self.address = aid, shape, d, buf, name, address
        self.fill, self.instr, self.frame, self.note = fill, instr, frame, note
        self.zeroed = False

    def __call__(self, st: _State) -> None:
        force_location(self.frame)
        t = allocate(self.shape, self.d, self.buf, self.name, self.address, instruction=self.instr,
                     fill=self.fill(st), zeroed_pages=self.zeroed)
        if self.note:
            from nkieval.sim.isa.core import note_write

            note_write(t.alloc)
        st.allocs[self.aid] = t.alloc


def _compile_free(ev: list[Any]) -> Step:
    _, aid = _list(ev, 2)
    return _Free(_int(aid))


class _Free:
    """A free event: the allocation's block released where the kernel dropped its last view."""

    __slots__ = ("aid",)

    def __init__(self, aid: int) -> None:
        self.aid = aid

    def __call__(self, st: _State) -> None:
        a = st.allocs.pop(self.aid, None)
        release = getattr(a, "release", None)
        if release is not None:
            release()
        for view in st.viewed.pop(self.aid, ()):  # (a cached view would keep the storage alive)
            st.views.pop(view, None)


def _compile_scalar(ev: list[Any]) -> Step:
    from nkieval.sim.isa.scalars import NkiScalar

    _device_decision()
    _, rid, method, operand, other, loc = _list(ev, 6)
    if method not in SCALAR_METHODS:
        raise ProgramError(f"{method!r} is not a scalar operator", rule="program-format")
    rid = _int(rid)
    frame = _loc_frame(loc)
    x_of, other_of = compile_value(operand), compile_value(other)
    unary = method in ("__neg__", "__pos__")

    def step(st: _State) -> None:
        force_location(frame)
        x = x_of(st)
        if not isinstance(x, NkiScalar):
            raise ProgramError("scalar arithmetic on a value that is not an NkiScalar", rule="program-format")
        fn = getattr(x, method)
        st.objs[rid] = fn() if unary else fn(other_of(st))

    return step


def _compile_loop(ev: list[Any]) -> Step:
    from nkieval.sim import control

    _device_decision()
    _, kind, params, ind, body, nxt, loc = _list(ev, 7)
    if kind not in LOOP_KINDS:
        raise ProgramError(f"unknown loop kind {kind!r}", rule="program-format")
    steps = compile_events(_list(body))
    frame = _loc_frame(loc)
    params_of = compile_value(params)
    next_of = compile_value(nxt)
    ind = _int(ind)

    def step(st: _State) -> None:
        force_location(frame)
        p = params_of(st)

        def iteration(reg: Any) -> Any:
            if st.ctx.launch.deadline is not None:  # (a loop whose body issues no instruction still stops)
                check_deadline(st.ctx, kind)
            st.objs[ind] = reg
            st.dynamic.append(st.ctx.loops[-1] if st.ctx.loops else ["dynamic", 0, -1])
            try:
                st.run(steps)
            finally:
                st.dynamic.pop()
            return next_of(st) if kind == "while_loop" else None

        if kind == "dynamic_range":
            for reg in control.dynamic_range(*p):
                iteration(reg)
        elif kind == "fori_loop":
            lower, upper, inc = _list(p, 3)
            control.fori_loop(lower, upper, iteration, inc)
        else:
            (init,) = _list(p, 1)
            control.while_loop(init, iteration)

    return step


def _compile_note(ev: list[Any]) -> Step:
    _device_decision()
    _, hook, loc = _list(ev, 3)
    fn = _lookup(NOTE_HOOKS, hook, "note hook")
    frame = _loc_frame(loc)

    def step(st: _State) -> None:
        force_location(frame)
        fn(st.ctx)

    return step


_EVENTS: dict[str, Callable[[list[Any]], Step]] = {
    "i": _compile_instruction, "a": _compile_allocation, "f": _compile_free, "s": _compile_scalar,
    "L": _compile_loop, "n": _compile_note,
}


class _State:
    """One program's replay: what its ids name now (allocations, registers and scalars)."""

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx
        self.allocs: dict[int, Any] = {}
        self.objs: dict[int, Any] = {}
        self.dynamic: list[list[Any]] = []  # the device loops' frames in force, outermost first
        self.views: dict[Any, tuple[Any, NkiTensor]] = {}  # views made (valid while their allocation is)
        self.viewed: dict[int, list[Any]] = {}  # allocation id -> the views of it in ``views``

    def run(self, steps: list[Step]) -> None:
        for step in steps:
            step(self)

    def run_planned(self, steps: list[Step], uses: dict[int, list[tuple[int, Any]]]) -> None:
        """:meth:`run`, holding the allocations of ``uses`` (:func:`.regions.scan_body`) by live region: each
        region's sentinels written before its first touching step, its pages given back after its last (and a
        zeroed region's parked across its longest gap: :class:`.regions.RegionPlan`)."""
        allocated_at = {u[0][0]: aid for aid, u in uses.items()}
        before: dict[int, list[RegionPlan]] = {}
        after: dict[int, list[RegionPlan]] = {}
        for i, step in enumerate(steps):
            plans = before.get(i)
            if plans is not None:
                for p in plans:
                    p.run_before(i)
            step(self)
            aid = allocated_at.get(i)
            if aid is not None:
                a = self.allocs.get(aid)
                if a is not None and RegionPlan.usable(a):
                    p = RegionPlan(a, uses[aid])
                    for s in p.before():
                        before.setdefault(s, []).append(p)
                    for s in p.after():
                        after.setdefault(s, []).append(p)
                elif a is not None and own_mapping(a.storage):  # (no regions: its sentinels, as allocating writes)
                    write_sentinels(a.storage, a.dtype)
            plans = after.get(i)
            if plans is not None:
                for p in plans:
                    p.run_after(i)

    def loops(self, template: list[Any]) -> tuple[Any, ...]:
        """The trace's loop context: the recorded static loops, with the live device loops in their places."""
        dyn = iter(self.dynamic)
        frames = []
        for f in template:
            if f is None:
                fr = next(dyn, None)
                if fr is not None:
                    frames.append(tuple(fr))
            else:
                frames.append(f)
        return tuple(frames)

    def bind(self, enc: Any, value: Any) -> None:
        """Name what an instruction or loop produced: registers, scalars, and allocations it made itself."""
        if isinstance(enc, dict) and len(enc) == 1:
            (k, v), = enc.items()
            if k == "R":
                self.objs[_int(v)] = value
            elif k == "T" and isinstance(value, NkiTensor):
                aid = v  # (its view's allocation id: see _binding)
                if aid not in self.allocs:
                    self.allocs[aid] = value.alloc
            elif k == "tu" and isinstance(value, tuple | list):
                for e, x in zip(_list(v), value):
                    self.bind(e, x)
        elif isinstance(enc, list) and isinstance(value, tuple | list):
            for e, x in zip(enc, value):
                self.bind(e, x)


def _list(x: Any, n: int | None = None) -> list[Any]:
    if not isinstance(x, list) or (n is not None and len(x) != n):
        raise ProgramError(f"expected a list{'' if n is None else f' of {n}'}, got {str(x)[:80]}",
                           rule="program-format")
    return x


def _int(x: Any) -> int:
    if not isinstance(x, int) or isinstance(x, bool):
        raise ProgramError(f"expected an integer, got {str(x)[:40]}", rule="program-format")
    return x


def _lookup(table: Any, key: Any, what: str) -> Any:
    if not isinstance(key, str) or key not in table:
        raise ProgramError(f"unknown {what} {str(key)[:60]!r}", rule="program-format")
    return table[key]


def _array(v: Any) -> np.ndarray:
    sname, shape, data = _list(v, 3)
    sd = _lookup(STORAGE_DTYPES, sname, "array dtype")
    shape = tuple(_int(n) for n in _list(shape))
    if not isinstance(data, str):
        raise ProgramError("array data is not base64 text", rule="program-format")
    raw = b64decode(data.encode("ascii"), validate=True)
    if len(raw) != math.prod(shape) * sd.itemsize:
        raise ProgramError("array data does not match its shape", rule="program-format")
    return np.frombuffer(raw, dtype=sd).reshape(shape).copy()


class _Compiled:
    """A program's bodies compiled (once per program: every case of a shape replays the same one).

    ``static``: the program makes no device-side decision (no register, device scalar, runtime-indexed view,
    device loop or front-end note), so every run of it issues the same instructions on the same addresses
    and allocations, whatever the inputs: the same trace but for values, the same written elements, the same
    capacity verdict."""

    def __init__(self, program: Program) -> None:
        self.bodies = []
        self.uses: list[dict[int, list[tuple[int, Any]]]] = []  # per body: its allocations held by live region
        _COMPILING.dynamic = False
        try:
            for body in program.programs:
                args = [None if a is None else _int(a) for a in body.args]
                if not isinstance(body.kwargs, dict):
                    raise ProgramError("bad keyword argument ids", rule="program-format")
                kwargs = {str(k): None if a is None else _int(a) for k, a in body.kwargs.items()}
                _compile_tables(body)
                steps = compile_events(_list(body.events))
                self.bodies.append((args, kwargs, steps, compile_value(body.ret)))
                self.uses.append(_region_uses(body, steps))
        finally:
            _COMPILING.views = _COMPILING.frames = _COMPILING.calls = _COMPILING.allocs = None
        self.static = not _COMPILING.dynamic


def _region_uses(body: Any, steps: list[Step]) -> dict[int, list[tuple[int, Any]]]:
    """The body's allocations a replay holds by live region (:mod:`.regions`), their allocating steps told to
    allocate zero pages; empty (at the cost of one look at the allocation sites) for a body with none large."""
    uses = scan_body(body.events, body.ret, _COMPILING.allocs, _COMPILING.views)
    for u in uses.values():
        step = steps[u[0][0]]
        if isinstance(step, _Allocation):
            step.zeroed = True
    return uses


class _Replayer:
    """The kernel function ``run_kernel`` launches: each program walks its own steps."""

    def __init__(self, program: Program, compiled: _Compiled) -> None:
        self.compiled = compiled
        self.__qualname__ = self.__name__ = program.kernel
        self.raw: Any = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        ctx = current()
        pid = ctx.program_id
        if not 0 <= pid < len(self.compiled.bodies):
            raise ProgramError(f"the program has no body for program {pid}", rule="program-format")
        arg_ids, kwarg_ids, steps, ret = self.compiled.bodies[pid]
        st = _State(ctx)
        for aid, a in zip(arg_ids, args):
            if aid is not None and isinstance(a, NkiTensor):
                st.allocs[aid] = a.alloc
        for name, aid in kwarg_ids.items():
            a = kwargs.get(name)
            if aid is not None and isinstance(a, NkiTensor):
                st.allocs[aid] = a.alloc
        prev = force_location(None)
        try:
            uses = self.compiled.uses[pid]
            if uses:
                st.run_planned(steps, uses)
            else:
                st.run(steps)
            force_location(None)
            out = ret(st)
            if pid == 0:
                self.raw = out
            return out
        finally:
            force_location(prev)


def compile_program(program: Program) -> _Compiled:
    """Check ``program`` (:func:`nkieval.sim.program.validate.validate`, then every event and value) and
    compile it for replays; kept on the program, so later replays of it skip this."""
    from nkieval.sim.program.validate import validate

    done = program.__dict__.get("_compiled")
    if done is None:
        with _COMPILE_LOCK:  # (one compile per program: a second would find its events released)
            done = program.__dict__.get("_compiled")
            if done is None:
                validate(program)
                with no_gc():  # (tens of thousands of small objects, no cycles: collections would only walk them)
                    done = _Compiled(program)
                    program.__dict__["_compiled"] = done
                    program.release_events()  # (a parsed program: replays need only the compiled steps)
    return done


_COMPILE_LOCK = threading.Lock()


def is_static(program: Program) -> bool:
    """Whether every replay of ``program`` issues the same instructions on the same memory, whatever its inputs
    (compiling it first if it is not yet): see ``_Compiled``."""
    return compile_program(program).static


def replay_program(program: Program, args: Sequence[Any], kwargs: dict[str, Any] | None = None, *,
                   target: Any = None, options: Any = None) -> RunResult:
    """Execute ``program`` on the simulator with these inputs (NumPy arrays and the kernel's scalar
    parameters, in the order it was recorded with). Returns the run's outputs and trace, as ``run_kernel``."""
    compiled = compile_program(program)
    if len(args) != len(program.arg_names):
        raise ProgramError(f"the program takes {len(program.arg_names)} positional inputs, got {len(args)}",
                           rule="program-inputs")
    replayer = _Replayer(program, compiled)
    result = run_kernel(replayer, args, dict(kwargs or {}), target=target or program.target, options=options,
                        lnc=program.lnc if not program.grid else 1, grid=tuple(program.grid),
                        arg_names=program.arg_names)
    result.raw = replayer.raw
    return result


__all__ = ["NOTE_HOOKS", "compile_program", "is_static", "register_note_hook", "replay_program"]
