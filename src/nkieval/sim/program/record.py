"""Recording a kernel as a program: the simulator's hooks call a per-program :class:`Recorder`.

The kernel runs on the ordinary (eager) simulator, over inputs whose values are zeros: the instruction
functions validate every operand as they always do, so a kernel that breaks a hardware rule fails here, at
trace time, with the usual error. What is kept is not the values but the requests: each top-level
instruction call with its operands encoded as views of allocations, each allocation and free, and the
device-side constructs whose values only the device knows (registers, ``NkiScalar`` arithmetic, views
placed by a runtime index, device loops, traced once). A kernel whose Python asks for a value the device
holds (``np.asarray(tile)``, ``if register:``) is refused with the kernel line, as on hardware.
"""

from __future__ import annotations

import contextlib
import enum
import math
import sys
from base64 import b64encode
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nkieval.sim import context
from nkieval.sim import dtypes as dt
from nkieval.sim.errors import NkiValidationError
from nkieval.sim.memory import Buffer
from nkieval.sim.ops import Op
from nkieval.sim.program.codec import (
    ENUMS,
    MAX_DEPTH,
    MAX_EVENTS,
    MAX_FILL_BYTES,
    MAX_TABLE_ENTRIES,
    NUMPY_OP_NAMES,
    PY_TYPES,
    Program,
    ProgramBody,
)
from nkieval.sim.tensor import DYN_VIEWS, RECIPES, DynSlice, NkiTensor


@dataclass(frozen=True)
class ArgSpec:
    """A kernel input as the tracer sees it: shape and NumPy dtype name, no values."""

    shape: tuple[int, ...]
    dtype: str

    def placeholder(self) -> np.ndarray:
        """Zeros of this shape and dtype: values the kernel may not depend on."""
        return np.zeros(self.shape, dtype=np.dtype(self.dtype))


class Recorder:
    """The events of one program (LNC core or SPMD instance) as the kernel issues them."""

    def __init__(self, program_id: int, max_events: int = MAX_EVENTS, defer: bool = False) -> None:
        self.program_id = program_id
        self.defer = defer  # leave what may be left to the judge's replay (see defers)
        self.root: list[Any] = []
        self.stack: list[list[Any]] = [self.root]
        self.depth = 0  # instruction calls in progress (only the outermost is recorded)
        self.frame: Any = None  # the recording's call of the kernel (``_Traced.__call__``) while it runs
        self.known: set[int] = set()  # allocation ids the program has named
        self.obj_ids: dict[int, int] = {}  # id(register or scalar) -> its program id
        self.pinned: list[Any] = []  # keeps those objects alive, so id() stays unique
        self.next_obj = 1
        self.n_events = 0
        self.max_events = max_events
        self.fill_bytes = 0
        self.args: list[Any] = []
        self.kwargs: dict[str, Any] = {}
        self.ret: Any = None
        # The document's tables (see codec): each distinct kernel line, view layout and view once, named by index.
        self.locs: list[Any] = []
        self.loc_index: dict[tuple[Any, ...], int | None] = {}
        self.layouts: list[Any] = []
        self.layout_index: dict[tuple[Any, ...], int] = {}
        self.views: list[Any] = []
        self.view_refs: dict[_ViewKey, dict[str, int]] = {}  # (by identity: see encode_tensor)
        self.calls: list[Any] = []
        self.call_index: dict[tuple[Any, ...], int] = {}
        self.allocs: list[Any] = []
        self.alloc_index: dict[tuple[Any, ...], int] = {}

    # -- events ------------------------------------------------------------------------------
    def emit(self, event: list[Any]) -> None:
        self.n_events += 1
        if self.n_events > self.max_events:
            raise NkiValidationError(f"the kernel records more than {self.max_events} program events",
                                     rule="instruction-budget")
        self.stack[-1].append(event)

    def bind_args(self, args: Sequence[Any], kwargs: dict[str, Any]) -> None:
        self.args = [self._arg(a) for a in args]
        self.kwargs = {k: self._arg(v) for k, v in kwargs.items()}

    def _arg(self, a: Any) -> Any:
        if isinstance(a, NkiTensor):
            self.known.add(a.alloc.id)
            return a.alloc.id
        return None

    def allocation(self, t: NkiTensor, shape: tuple[int, ...], d: dt.DType, buffer: Buffer, name: str,
                   address: Any, fill: Any, instruction: str) -> None:
        if self.depth:
            return  # an instruction's own temporary: the instruction makes it again when replayed
        a = t.alloc
        self.known.add(a.id)
        addr = None
        if a.fixed_address:
            addr = [int(a.partition_offset), int(a.address)]
        loc = context.user_location()
        key = (tuple(shape), d.name, buffer.name, name or "", instruction, loc)
        site = self.alloc_index.get(key)
        if site is None:
            site = self.alloc_index[key] = len(self.allocs)
            self._check_table(site)
            self.allocs.append([list(shape), d.name, buffer.name, name or "", instruction, self._loc_ref(loc)])
        self.emit(["a", a.id, site, addr, self._fill(fill)])

    def free(self, alloc_id: int) -> None:
        if alloc_id in self.known:
            self.known.discard(alloc_id)
            self.emit(["f", alloc_id])

    def _fill(self, fill: Any) -> Any:
        if fill is None:
            return None
        if isinstance(fill, np.ndarray):
            self.fill_bytes += fill.nbytes
            if self.fill_bytes > MAX_FILL_BYTES:
                raise NkiValidationError(f"host constants of more than {MAX_FILL_BYTES} bytes in one kernel",
                                         rule="trace-argument")
        return self.encode(fill)

    def instruction(self, ctx: Any, name: str, call: Callable[[], Any], args: tuple[Any, ...],
                    kwargs: dict[str, Any]) -> Any:
        """Record the outermost instruction call ``name`` and run it (``call``)."""
        # (what encode(list(args)) and encode(kwargs) give, without their dispatch: a call's keywords are strings,
        # and most operands are tensors)
        enc, enc_t = self.encode, self.encode_tensor
        key = (name, ctx.loc, tuple(kwargs))
        site = self.call_index.get(key)
        if site is None:
            site = self.call_index[key] = len(self.calls)
            self._check_table(site)
            self.calls.append([name, list(kwargs), self._loc_ref(ctx.loc)])
        ev: list[Any] = ["i", site, [enc(a, 1) for a in args] if args else [],
                         [enc_t(v, 1) if type(v) is NkiTensor else enc(v, 1) for v in kwargs.values()],
                         None, self._loops(ctx) if ctx._loops_tuple else []]
        self.depth += 1
        try:
            result = call()
        finally:
            self.depth -= 1
        if result is not None:
            ev[4] = self.encode_result(result)
        self.emit(ev)
        return result

    def defers(self, dst: Any, caller: Any, code: Any = None) -> bool:
        """Whether an instruction of ``nkieval.sim.isa.core.DEFERRABLE`` writing ``dst`` is recorded without running
        it: in a recording with ``defer``, when ``dst`` is a tensor of the current API and no frame from ``caller``
        (the kernel line that made the call, ``context.user_frame``) up to the recording could catch what the
        instruction raises. (The simulator's own frames below ``caller``, its ``nl`` functions that issue
        instructions, catch nothing they raise: ``tests/sim/test_record_deferred.py`` keeps it so.)

        A record-only run computes no values, so all such an instruction does that the kernel's Python could see is
        raise: its checks. Every check runs again when the judge replays the program (the judge validates every
        instruction; the program is the candidate's word), so a program recorded without them is the same program,
        at a third to a half less recording work for instruction-bound kernels; a kernel that breaks a rule is
        refused by the replay at the same instruction instead (the review then traces that shape again without
        deferring, for the failure record the trace gives: ``nkieval.review.tracing``). Where a ``try`` (or a
        ``with``) around the call could catch the error, the kernel's Python could branch on it: such calls run."""
        if self.defer and type(dst) is NkiTensor and not _could_catch(caller, self.frame, code):
            DEFERRED[0] += 1
            return True
        return False

    def _loc_ref(self, loc: tuple[Any, ...]) -> int | None:
        """The kernel line's index in the table of lines (``None`` for no line): a loop's events repeat their
        lines."""
        if loc in self.loc_index:
            return self.loc_index[loc]
        ref = None
        if loc:
            ref = len(self.locs)
            self._check_table(ref)
            self.locs.append(list(loc))
        self.loc_index[loc] = ref
        return ref

    def scalar_op(self, method: str, operand: Any, other: Any, result: Any) -> None:
        self.emit(["s", self._obj(result), method, self.encode(operand), self.encode(other),
                   self._loc_ref(context.user_location())])

    def note(self, hook: str) -> None:
        self.emit(["n", hook, self._loc_ref(context.user_location())])

    @staticmethod
    def _check_table(n: int) -> None:
        if n >= MAX_TABLE_ENTRIES:
            raise NkiValidationError(f"the kernel names more than {MAX_TABLE_ENTRIES} distinct views, "
                                     "layouts, instruction or allocation sites, or kernel lines",
                                     rule="instruction-budget")

    @staticmethod
    def _loops(ctx: Any) -> list[Any]:
        return [None if kind == "dynamic" else [kind, i, n] for kind, i, n in ctx.loop_context]

    # -- device loops: the body is traced once ------------------------------------------------
    @contextlib.contextmanager
    def loop(self, ctx: Any, kind: str, params: list[Any], induction: Any) -> Iterator[list[Any]]:
        """A loop event around the body's one traced iteration (a device-loop frame in the loop context); the
        body's events go into it. A ``while_loop`` body sets the event's next condition (``ev[5]``)."""
        ev = ["L", kind, self.encode(params), self._obj(induction), [], None, self._loc_ref(context.user_location())]
        self.emit(ev)
        self.stack.append(ev[4])
        if len(self.stack) > MAX_DEPTH:
            raise NkiValidationError(f"device loops nested deeper than {MAX_DEPTH}", rule="trace-argument")
        frame = ctx.push_loop("dynamic", -1)
        try:
            ctx.set_loop_index(frame, 0)
            yield ev
        finally:
            ctx.pop_loop(frame)
            if self.stack and self.stack[-1] is ev[4]:
                self.stack.pop()

    def iterate(self, ctx: Any, kind: str, params: list[Any], first: int) -> Iterator[Any]:
        """``dynamic_range`` traced: one iteration with a symbolic induction register."""
        from nkieval.sim.isa.registers import VirtualRegister

        reg = VirtualRegister(first, frozen=True, name="i")
        with self.loop(ctx, kind, params, reg):
            yield reg

    # -- values --------------------------------------------------------------------------------
    def _obj(self, x: Any) -> int:
        k = id(x)
        n = self.obj_ids.get(k)
        if n is None:
            n = self.obj_ids[k] = self.next_obj
            self.next_obj += 1
            self.pinned.append(x)
        return n

    def encode_result(self, x: Any) -> Any:
        """An instruction's return value: new registers and scalars get ids, tensors are named."""
        if isinstance(x, NkiTensor):
            self.known.add(x.alloc.id)
        return self.encode(x)

    def encode(self, x: Any, depth: int = 0) -> Any:
        cls = type(x)
        if cls is NkiTensor:  # (the common cases first: operands and plain numbers)
            return self.encode_tensor(x, depth)
        if cls is int or cls is str or x is None:
            return x
        if depth > MAX_DEPTH:
            raise NkiValidationError("a value nested too deeply to record", rule="trace-argument")
        if cls is Op:
            return {"op": x.name}
        if cls is float:
            return x if math.isfinite(x) else {"f": repr(x)}
        if cls is dict:
            return {"d": [[self.encode(k, depth + 1), self.encode(v, depth + 1)] for k, v in x.items()]}
        if cls is list:
            return [self.encode(v, depth + 1) for v in x]
        if isinstance(x, bool | str):
            return x
        if isinstance(x, enum.Enum):
            cls = type(x).__name__
            if ENUMS.get(cls) is not type(x):
                raise _unsupported(x)
            return {"en": [cls, x.name]}
        if isinstance(x, int):
            return int(x)
        if isinstance(x, float):
            return x if math.isfinite(x) else {"f": repr(x)}
        if isinstance(x, NkiTensor):
            return self.encode_tensor(x, depth)
        if isinstance(x, list):
            return [self.encode(v, depth + 1) for v in x]
        if isinstance(x, tuple):
            return {"tu": [self.encode(v, depth + 1) for v in x]}
        if isinstance(x, dict):
            return {"d": [[self.encode(k, depth + 1), self.encode(v, depth + 1)] for k, v in x.items()]}
        if isinstance(x, slice):
            return {"sl": [self.encode(x.start, depth + 1), self.encode(x.stop, depth + 1),
                           self.encode(x.step, depth + 1)]}
        if x is Ellipsis:
            return {"el": 0}
        if isinstance(x, DynSlice):
            return {"ds": [self.encode(x.start, depth + 1), x.size, x.step, self.encode(x.runtime, depth + 1)]}
        if isinstance(x, dt.DType):
            return {"dt": x.name}
        if isinstance(x, Buffer):
            return {"buf": x.name}
        if isinstance(x, Op):
            return {"op": x.name}
        if isinstance(x, np.generic):
            return self.encode(x.item(), depth)
        if isinstance(x, np.ndarray):
            return _array(x)
        if isinstance(x, np.dtype):
            return {"npd": x.name}
        if isinstance(x, type):
            if issubclass(x, np.generic):
                return {"npd": np.dtype(x).name}
            for k, v in PY_TYPES.items():
                if x is v:
                    return {"py": k}
        name = NUMPY_OP_NAMES.get(id(x))
        if name is not None:
            return {"uf": name}
        from nkieval.sim.isa.registers import VirtualRegister
        from nkieval.sim.isa.scalars import NkiScalar

        if isinstance(x, VirtualRegister | NkiScalar):
            return {"R": self._obj(x)}
        raise _unsupported(x)

    def encode_tensor(self, t: NkiTensor, depth: int = 0) -> Any:
        # (no view can have a recipe before the first one is made: the common, static kernel skips the read of an
        # unset slot, which costs an AttributeError)
        recipe = getattr(t, "_recipe", None) if RECIPES[0] else None
        if recipe is not None:
            method, base, args, kwargs = recipe
            return {"V": [method, self.encode(base, depth + 1), self.encode(list(args), depth + 1),
                          self.encode(kwargs, depth + 1)]}
        if t._ap_base is not None or (DYN_VIEWS[0] and getattr(t, "_dyn", None) is not None):
            raise NkiValidationError(f"a runtime-indexed view of `{t.alloc.name or 'tensor'}` whose making was "
                                     "not recorded", rule="trace-time-value", location=context.location_str())
        a = t.alloc
        if a.id not in self.known:
            raise NkiValidationError(f"tensor `{a.name or 'tensor'}` {list(t.shape)} was not allocated by this "
                                     "kernel program (a tensor made outside the kernel, or by another program)",
                                     rule="kernel")
        data = t.data
        # Loops make the same views again and again: the view's key is kept with the allocation's other facts
        # about this view geometry (the operand cache of NkiTensor.access), one per storage dtype, and each
        # program's recorder finds its table entry by that key's identity (no tuple to hash per operand).
        cache = t._acc
        if cache is None:
            cache = t._acc = t._view_cache()
        key = ("program", data.dtype)
        vk = cache.get(key)
        if vk is None:
            vk = cache[key] = _ViewKey(a.id, (t.dtype.name, _dtype_name(data.dtype), data.shape, data.strides),
                                       t._byte_offset())
        ref = self.view_refs.get(vk)
        if ref is None:
            ref = self._intern_view(vk)
        return ref

    def _intern_view(self, vk: _ViewKey) -> dict[str, int]:
        """The view's entry in the table of views (and its layout's in the table of layouts), made on first use;
        its operand ``{"T": index}`` is one object shared by every event that names the view (the document is
        written by value, and nothing changes an event once it is recorded)."""
        lay = self.layout_index.get(vk.layout)
        if lay is None:
            lay = self.layout_index[vk.layout] = len(self.layouts)
            self._check_table(lay)
            dname, sname, shape, strides = vk.layout
            self.layouts.append([dname, sname, list(shape), list(strides)])
        n = len(self.views)
        self._check_table(n)
        self.views.append([vk.aid, lay, vk.offset])
        ref = self.view_refs[vk] = {"T": n}
        return ref


#: How many instruction calls recordings in this process have deferred (``Recorder.defers``): a recording that
#: failed without deferring one failed as it would have without ``defer``.
DEFERRED = [0]


def _could_catch(frame: Any, stop: Any, code: Any = None) -> bool:
    """Whether a frame from ``frame`` (the kernel line of an instruction call) up to ``stop``, the recording's
    :class:`_Traced` call, is inside an exception handler's range (a ``try``, ``with`` or other block that could
    catch what the call raises); True when the recording's frame is not found (a call from outside a recording's
    kernel). ``code``: ``frame``'s code object, where the caller has read it already."""
    if type(frame) is not _FRAME_TYPE:
        return True
    while frame is not None:
        # (the recording's frame is told by its module's globals, then by identity: reading ``f_code`` is an audit
        # event, and the sandboxed tracer's audit hook runs for each one)
        if frame.f_globals is _RECORD_GLOBALS:
            return frame is not stop  # (no other frame of this module is above a kernel's call)
        # (the code read again for each call: a frame kept to save the read would keep the locals of a call that
        # has returned, and with them tiles the kernel dropped, which would then stay allocated)
        if code is None:
            code = frame.f_code
        last = _LAST_RANGES[0]
        if last[0] is code:  # (a code object's hash is computed afresh for each lookup: 0.5 µs for a long kernel)
            ranges = last[1]
        else:
            ranges = _HANDLER_RANGES.get(code)
            if ranges is None:
                if len(_HANDLER_RANGES) >= 4096:  # (candidates loaded afresh in a long-lived process add new code)
                    _HANDLER_RANGES.clear()
                ranges = _HANDLER_RANGES[code] = handler_ranges(code)
            _LAST_RANGES[0] = (code, ranges)
        if ranges:
            at = frame.f_lasti
            for lo, hi in ranges:
                if lo <= at < hi:
                    return True
        frame = frame.f_back
        code = None
    return True


_HANDLER_RANGES: dict[Any, tuple[tuple[int, int], ...]] = {}
_LAST_RANGES: list[tuple[Any, tuple[tuple[int, int], ...]]] = [(None, ())]  # the code met last, its ranges
_FRAME_TYPE = type(sys._getframe())
_RECORD_GLOBALS = globals()


def handler_ranges(code: Any) -> tuple[tuple[int, int], ...]:
    """The byte-offset ranges ``[start, end)`` of ``code``'s instructions that an exception handler covers, read
    from its exception table (``co_exceptiontable``, CPython 3.11+: entries of variable-length integers, 6 bits a
    byte, bit 6 set on each byte but an integer's last, bit 7 on an entry's first; start, length and handler in
    code units of 2 bytes, then depth and lasti)."""
    table = code.co_exceptiontable
    out: list[tuple[int, int]] = []
    i, n = 0, len(table)

    def varint() -> int:
        nonlocal i
        b = table[i]
        i += 1
        v = b & 63
        while b & 64:
            b = table[i]
            i += 1
            v = (v << 6) | (b & 63)
        return v

    while i < n:
        start = varint() * 2
        end = start + varint() * 2
        varint()  # (the handler's offset)
        varint()  # (stack depth and lasti)
        out.append((start, end))
    return tuple(out)


class _ViewKey:
    """A view of an allocation as the recorders know it: hashed by identity (one per allocation, geometry and
    storage dtype, kept in the allocation's view cache), its layout a tuple the recorder interns."""

    __slots__ = ("aid", "layout", "offset")

    def __init__(self, aid: int, layout: tuple[Any, ...], offset: int) -> None:
        self.aid, self.layout, self.offset = aid, layout, offset


_DTYPE_NAMES: dict[np.dtype, str] = {}


def _dtype_name(d: np.dtype) -> str:
    """``d.name`` (NumPy computes it in Python on every read)."""
    name = _DTYPE_NAMES.get(d)
    if name is None:
        name = _DTYPE_NAMES[d] = d.name
    return name


def _array(x: np.ndarray) -> Any:
    arr = np.ascontiguousarray(x)
    return {"arr": [arr.dtype.name, list(arr.shape), b64encode(arr.tobytes()).decode("ascii")]}


def _unsupported(x: Any) -> NkiValidationError:
    return NkiValidationError(f"a {type(x).__module__}.{type(x).__name__} cannot be passed to an NKI instruction "
                              "(only tensors, registers, scalars, numbers, dtypes, operators, enums and their "
                              "tuples/lists)", rule="trace-argument", location=context.location_str())


# -- running a kernel to record it ----------------------------------------------------------------
class _Traced:
    """Calls the kernel inside each program's context and records its arguments and return value."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.__code__ = fn.__code__  # run_kernel names arguments after the kernel's parameters
        self.__qualname__ = getattr(fn, "__qualname__", "kernel")
        self.__name__ = getattr(fn, "__name__", "kernel")
        self.raw: dict[int, Any] = {}

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        ctx = context.current()
        rec: Recorder = ctx.recorder
        rec.bind_args(args, kwargs)
        rec.frame = sys._getframe()  # (where Recorder.defers stops looking for handlers; dropped on return)
        try:
            out = self.fn(*args, **kwargs)
        finally:
            rec.frame = None
        self.raw[ctx.program_id] = out
        rec.ret = rec.encode_result(out)
        return out


@dataclass
class Recording:
    """What :func:`record_program` produced: the program, and the kernel's raw return value of program 0
    (the tensors it returned, for the caller's own checks)."""

    program: Program
    raw: Any
    warnings: list[dict[str, Any]]


def record_program(fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any] | None = None, *,
                   target: Any = None, options: Any = None, lnc: int = 1, grid: tuple[int, ...] = (),
                   max_events: int = MAX_EVENTS, compute_values: bool = False, defer: bool = False) -> Recording:
    """Trace ``fn`` into a :class:`Program`. ``args`` are :class:`ArgSpec` (shape and dtype only; the kernel
    sees zeros) or plain Python values (scalars, tuples), passed as they are.

    The run is record-only (``SimOptions.compute_values`` False) unless ``compute_values``: no instruction
    computes or stores element values, which nothing recorded depends on (the kernel's Python cannot read them),
    so the program and the trace are those of a computing run at a fraction of its time and memory.

    ``defer``: the instructions the judge's replay would check again are recorded without running them, where the
    kernel's Python could not have caught what they raise (:meth:`Recorder.defers`): the same program, recorded
    faster, where the kernel breaks no rule; where it does, the program goes on past the instruction that would
    have raised, and the replay raises there. For the judge's tracer (``nkieval.review.tracer``).

    On-chip capacity is not judged here (``capacity_check`` is set to "off"): it is the replay's to judge, on
    the replay's trace by live range, as an eager run judges it. A recording without a trace could judge it only
    at each allocation, counting every tile still referenced, dead or not: a false rejection of a kernel that
    holds tiles past their last use."""
    if defer and compute_values:
        raise ValueError("a recording that computes values runs every instruction (defer=False)")
    from dataclasses import replace

    from nkieval.sim.options import SimOptions
    from nkieval.sim.runner import run_kernel

    options = replace(options or SimOptions.from_env(), compute_values=compute_values, capacity_check="off")

    placeholders = [a.placeholder() if isinstance(a, ArgSpec) else a for a in args]
    kw = {k: (v.placeholder() if isinstance(v, ArgSpec) else v) for k, v in (kwargs or {}).items()}
    traced = _Traced(fn)
    recorders: dict[int, Recorder] = {}

    def make_recorder(pid: int) -> Recorder:
        recorders[pid] = Recorder(pid, max_events, defer)
        return recorders[pid]

    context.RECORDING[0] += 1
    try:
        result = run_kernel(traced, placeholders, kw, target=target, options=options, lnc=lnc, grid=grid,
                            recorder_factory=make_recorder)
    finally:
        context.RECORDING[0] -= 1
    bodies = [ProgramBody(r.args, r.kwargs, r.root, r.ret, r.locs, r.layouts, r.views, r.calls, r.allocs)
              for _, r in sorted(recorders.items())]
    code = fn.__code__
    names = list(code.co_varnames[:code.co_argcount])
    prog = Program(kernel=traced.__qualname__, target=result.target.name, lnc=lnc, grid=list(grid),
                   arg_names=[names[i] if i < len(names) else f"arg{i}" for i in range(len(args))],
                   kwarg_names=list(kw), programs=bodies, n_events=sum(r.n_events for r in recorders.values()))
    return Recording(prog, traced.raw.get(0), list(result.trace.warnings))
