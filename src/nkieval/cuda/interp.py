"""The SIMT interpreter: tree-sitter nodes compiled once into Python closures that operate on NumPy
vectors holding one value per thread of a group of blocks.

Execution model (docs/cuda.md): every statement runs for all active threads of the launched blocks
before the next statement starts (lock-step, as a warp does), under a mask of active threads; an
``if`` whose condition differs between threads runs both branches under complementary masks, a loop
runs until no thread is left in it. A ``__syncthreads()`` is therefore reached by every live thread of
a block together (a barrier reached by part of a block is reported). Shared memory has one copy per
block, local arrays one per thread.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from math import prod
from typing import Any

import numpy as np

from nkieval.cuda import arith
from nkieval.cuda.arith import cast, dtype, promote
from nkieval.cuda.program import Program
from nkieval.cuda.values import (
    BF16,
    BOOL,
    F16,
    F32,
    F64,
    FP8_E4M3,
    I32,
    I64,
    SCALARS,
    U32,
    U64,
    VECTORS,
    ArrRef,
    ArrT,
    Buffer,
    CType,
    CudaError,
    ExecutorSafetyNet,
    ExecutorTimeout,
    Frag,
    FragT,
    KernelFault,
    Ptr,
    PtrT,
    Scalar,
    StructT,
    StructVal,
    Unsupported,
    base_dtype,
    executor_seconds,
    scalar_of,
    sizeof,
    type_of,
    units,
)

#: threads run together at most (blocks are grouped up to this many threads)
MAX_LANES = 1 << 18
#: loop iterations between two readings of the safety net's CPU clock (the work budget is checked at every one)
DEADLINE_EVERY = 32
#: work units (:func:`~nkieval.cuda.values.executor_work`) a syntax node of a statement run over ``T`` lanes counts:
#: STATEMENT_WORK + T (:attr:`Lanes.cost`, times :func:`statement_size`): the interpreter's own Python work per
#: node (a closure call, mask bookkeeping) in lanes of NumPy work that cost as much CPU time; NODE_WORK per node
#: of the source's syntax tree, once per run (parsing the source, compiling its closures). Fitted over the
#: built-in tasks' runs with :data:`~nkieval.cuda.values.WORK_PER_S` (docs/cuda.md, "Work units"). A call of a
#: costly math builtin counts its :data:`~nkieval.cuda.builtins.MATH_LANE_WORK` per lane on top
STATEMENT_WORK = 4096
NODE_WORK = 8192
DIM3 = VECTORS["dim3"]

Mask = np.ndarray | None
Expr = Callable[["Frame", Mask], Any]
Stmt = Callable[["Frame", Mask], Mask]


#: statements whose parts run on their own (and count when they do): not part of the enclosing statement's size
_NESTED = frozenset({"compound_statement", "for_statement", "while_statement", "do_statement"})


def statement_size(n: Any) -> int:
    """The syntax nodes (named or not: tree-sitter's ``descendant_count``, read in C) of statement ``n`` that run
    each time it runs: its expressions and declarators, not the blocks and loops nested in it, which count when
    they run; a work unit's weight (:attr:`Lanes.cost` per node: each node is about a closure call and a NumPy
    operation over the lanes). Reads only the statement's own children (an ``else`` clause's too), never its
    expressions: a run compiles every statement it runs, so this must cost next to nothing."""
    size = n.descendant_count
    for c in n.children:
        if c.type in _NESTED:
            size -= c.descendant_count
        elif c.type in ("else_clause", "if_statement"):
            size -= c.descendant_count - statement_size(c)
    return size


def _line(n: Any) -> int:
    return int(n.start_point[0]) + 1


def _txt(n: Any) -> str:
    return n.text.decode()


# ---------------------------------------------------------------------------------------------
# launch context and frames


class Lanes:
    """The threads running together: ``nb`` blocks of ``nt`` threads, blocks ``start..start+nb-1``."""

    def __init__(self, grid: tuple[int, int, int], block: tuple[int, int, int], start: int, nb: int,
                 smem: int) -> None:
        self.block, self.grid = block, grid
        self.nt = nt = block[0] * block[1] * block[2]
        self.nb = nb
        self.T = T = nt * nb
        self.smem = smem
        lane = np.arange(T, dtype=np.int64)
        self.lane = lane
        self.tid = tid = lane % nt
        self.blk = blk = lane // nt
        bid = blk + start
        bx, by, _ = block
        gx, gy, _ = grid
        self.builtins = {
            "threadIdx": StructVal(DIM3, {"x": (tid % bx).astype(U32), "y": ((tid // bx) % by).astype(U32),
                                          "z": (tid // (bx * by)).astype(U32)}),
            "blockIdx": StructVal(DIM3, {"x": (bid % gx).astype(U32), "y": ((bid // gx) % gy).astype(U32),
                                         "z": (bid // (gx * gy)).astype(U32)}),
            "blockDim": StructVal(DIM3, {k: np.uint32(v) for k, v in zip("xyz", block)}),
            "gridDim": StructVal(DIM3, {k: np.uint32(v) for k, v in zip("xyz", grid)}),
            "warpSize": np.int32(32),
        }
        #: a launch's ``__shared__`` variables by (declaration id, declarator id), the dynamic (``extern``) shared
        #: memory under "dynamic": every extern array is the same memory
        self.shared: dict[tuple[int, int] | str, Any] = {}
        self.shared_bufs: list[Buffer] = []  # (their writers are reset at every barrier)
        self.empty = np.zeros(T, bool)
        self.exited = np.zeros(T, bool)  # threads that returned from the kernel
        #: work units one syntax node of a statement run over these lanes counts (:data:`STATEMENT_WORK`)
        self.cost = STATEMENT_WORK + T


class HostLanes(Lanes):
    def __init__(self) -> None:
        super().__init__((1, 1, 1), (1, 1, 1), 0, 1, 0)
        self.builtins = {}


class Frame:
    __slots__ = ("L", "fn", "loops", "ret", "ret_type", "top", "vars")

    def __init__(self, L: Lanes, fn: str) -> None:
        self.L = L
        self.vars: dict[str, list[Any]] = {}
        self.ret: Any = None
        self.ret_type: CType | None = None
        self.loops: list[list[Any]] = []  # [broken, continued] masks
        self.fn = fn
        self.top = False


# cell kinds
VAL, MEM, REF = 0, 1, 2


def is_empty(m: Mask) -> bool:
    return m is not None and not m.any()


def m_and(fr: Frame, m: Mask, c: Any) -> Mask:
    if isinstance(c, np.ndarray):
        c = c if c.dtype == BOOL else c != 0
        return c if m is None else (m & c)
    return m if c else fr.L.empty


def m_andnot(fr: Frame, m: Mask, c: Any) -> Mask:
    if isinstance(c, np.ndarray):
        c = c if c.dtype == BOOL else c != 0
        return ~c if m is None else (m & ~c)
    return fr.L.empty if c else m


def m_or(a: Mask, b: Mask) -> Mask:
    if a is None or b is None:
        return None
    r = a | b
    return None if r.all() else r


def where(m: Mask, new: Any, old: Any, line: int | None = None) -> Any:
    """``new`` on the threads of ``m``, ``old`` elsewhere."""
    if m is None or old is None:
        return new
    if isinstance(new, StructVal):
        return StructVal(new.stype, {k: where(m, v, old.fields.get(k), line) for k, v in new.fields.items()})
    if isinstance(new, Ptr):
        if not isinstance(old, Ptr) or old.buf is not new.buf:
            if not m.any():
                return old
            if isinstance(old, Ptr) and not (~m).any():
                return new
            raise Unsupported("a pointer that points into different arrays on different threads", line)
        return Ptr(new.buf, np.where(m, new.off, old.off), new.elem)
    if isinstance(new, ArrRef):
        return new
    out = np.where(m, new, old)
    dt = dtype(new)
    return out if out.dtype == dt else out.astype(dt)


# ---------------------------------------------------------------------------------------------
# memory


def _check(buf: Buffer, off: Any, m: Mask, write: bool, line: int) -> Any:
    """Fault an access of ``buf`` at ``off`` by the lanes of ``m`` out of its bounds (a growable buffer grows).
    None when no lane accesses it; else the active lanes' offsets (an array when ``off`` is one)."""
    size = buf.data.size
    if isinstance(off, np.ndarray):
        kept = _kept_of(off) if m is None else None
        if kept is not None and 0 < kept.in_bounds <= size:
            return off  # (offsets kept by a subscript, found in bounds of a buffer no larger: IndexSite)
        act = off if m is None else off[m]
        if act.size == 0:
            return None
        # (one pass where every offset is in bounds: seen unsigned, a negative offset is past any size)
        if int((act.view(_UNSIGNED[act.itemsize]) if act.dtype.kind == "i" else act).max()) < size:
            if kept is not None:  # (unchecked, or checked against a larger buffer only: see above)
                kept.in_bounds = size
            return act
        lo, hi = int(act.min()), int(act.max())
    else:
        if is_empty(m):
            return None
        act = off
        lo = hi = int(off)
    if lo < 0 or hi >= size:
        if buf.growable and lo >= 0:
            buf.grow(hi + 1)
            return act
        kind = "write to" if write else "read of"
        raise KernelFault(f"out-of-bounds {kind} {buf.name}[{lo if lo < 0 else hi}] (it holds {size} elements)",
                          line)
    return act


_UNSIGNED = {n: np.dtype(f"u{n}") for n in (1, 2, 4, 8)}


def gather(buf: Buffer, off: Any, m: Mask, line: int) -> Any:
    if not isinstance(off, np.ndarray):
        if _check(buf, off, m, False, line) is None:
            return buf.data.dtype.type(0)
        return buf.data[off]
    if m is not None:  # (inactive lanes read the first active lane's element, so every offset is in bounds)
        first = int(m.argmax())
        if not m[first]:
            return buf.data.dtype.type(0)
        off = np.where(m, off, off[first])
    _check(buf, off, None, False, line)
    if buf.dirty and buf.race is None:
        _race_check(buf, off, m, line)
    return buf.data.take(off, mode="wrap")  # (in bounds, checked: "wrap" only skips take's own check)


def lane_numbers(n: int) -> np.ndarray:
    """``arange(n)`` as int64, read-only and kept per ``n`` (a shared-memory access numbers its lanes each time)."""
    a = _LANE_NUMBERS.get(n)
    if a is None:
        a = np.arange(n, dtype=np.int64)
        a.flags.writeable = False
        if len(_LANE_NUMBERS) >= 64:
            _LANE_NUMBERS.clear()
        _LANE_NUMBERS[n] = a
    return a


_LANE_NUMBERS: dict[int, np.ndarray] = {}


def _race_check(buf: Buffer, off: np.ndarray, m: Mask, line: int) -> None:
    """A read of a ``__shared__`` element that another thread wrote since the last barrier: on the GPU the
    threads of a block run in no fixed order, so the read may see the old or the new value. Only the first
    race of a buffer is kept (the executor's lock-step order gives one of the possible results)."""
    w = buf.writer[off]  # type: ignore[index]
    bad = (w >= 0) & (w != lane_numbers(off.size))
    if m is not None:
        bad &= m
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        buf.race = (line, k, int(w[k]), int(off[k]))


def scatter(buf: Buffer, off: Any, val: Any, m: Mask, line: int) -> None:
    act = _check(buf, off, m, True, line)
    if act is None:
        return
    dt = buf.data.dtype
    val = cast(val, dt) if dtype(val) != dt else val
    if m is None:
        if isinstance(off, np.ndarray) and not isinstance(val, np.ndarray):
            buf.data[off] = val
        elif not isinstance(off, np.ndarray) and isinstance(val, np.ndarray):
            buf.data[off] = val[-1]
        else:
            buf.data[off] = val
        _mark_written(buf, off, m)
        return
    if isinstance(off, np.ndarray):
        buf.data[act] = val[m] if isinstance(val, np.ndarray) else val
    else:
        buf.data[off] = val[m][-1] if isinstance(val, np.ndarray) else val
    _mark_written(buf, off, m)


def _mark_written(buf: Buffer, off: Any, m: Mask) -> None:
    if buf.writer is None or not isinstance(off, np.ndarray):
        return
    lanes = lane_numbers(off.size)
    if m is None:
        buf.writer[off] = lanes
    else:
        buf.writer[off[m]] = lanes[m]
    buf.dirty = True


def load(p: Ptr, m: Mask, line: int) -> Any:
    e = p.elem
    if p.buf is None:
        raise KernelFault("dereference of a null pointer", line)
    if isinstance(e, Scalar):
        return gather(p.buf, p.off, m, line)
    if isinstance(e, StructT):
        out: dict[str, Any] = {}
        for f, ft in e.fields:
            out[f] = load(Ptr(p.buf, p.off + e.field_offset(f), ft), m, line)
        return StructVal(e, out)
    if isinstance(e, ArrT):
        return ArrRef(p, e.dims)
    raise Unsupported("a pointer to a pointer", line)


def store(p: Ptr, v: Any, m: Mask, line: int) -> None:
    e = p.elem
    if p.buf is None:
        raise KernelFault("store through a null pointer", line)
    if isinstance(e, Scalar):
        scatter(p.buf, p.off, v, m, line)
    elif isinstance(e, StructT):
        if not isinstance(v, StructVal):
            raise CudaError(f"assigning a non-struct value to a {e.name}", line)
        for f, ft in e.fields:
            store(Ptr(p.buf, p.off + e.field_offset(f), ft), v.fields[f], m, line)
    else:
        raise Unsupported("assignment of arrays", line)


# ---------------------------------------------------------------------------------------------
# lvalues


class LV:
    def get(self, m: Mask) -> Any:
        raise NotImplementedError

    def set(self, v: Any, m: Mask) -> None:
        raise NotImplementedError

    def ctype(self) -> CType:
        raise NotImplementedError


class VarLV(LV):
    __slots__ = ("cell", "line", "name")

    def __init__(self, cell: list[Any], name: str, line: int) -> None:
        self.cell, self.name, self.line = cell, name, line

    def get(self, m: Mask) -> Any:
        c = self.cell
        if c[2] == MEM:
            return load(c[0], m, self.line)
        if c[2] == REF:
            return c[0].get(m)
        if c[0] is None:
            raise CudaError(f"{self.name} is used before it is assigned", self.line)
        return c[0]

    def set(self, v: Any, m: Mask) -> None:
        c = self.cell
        if c[2] == MEM:
            store(c[0], convert(v, c[1], self.line), m, self.line)
        elif c[2] == REF:
            c[0].set(v, m)
        else:
            c[0] = where(m, convert(v, c[1], self.line), c[0], self.line)

    def ctype(self) -> CType:
        return self.cell[1] if self.cell[2] != REF else self.cell[0].ctype()


class MemLV(LV):
    __slots__ = ("line", "p")

    def __init__(self, p: Ptr, line: int) -> None:
        self.p, self.line = p, line

    def get(self, m: Mask) -> Any:
        return load(self.p, m, self.line)

    def set(self, v: Any, m: Mask) -> None:
        store(self.p, convert(v, self.p.elem, self.line), m, self.line)

    def ctype(self) -> CType:
        return self.p.elem


class ArrLV(LV):
    __slots__ = ("a",)

    def __init__(self, a: ArrRef) -> None:
        self.a = a

    def get(self, m: Mask) -> Any:
        return self.a

    def set(self, v: Any, m: Mask) -> None:
        raise Unsupported("assignment to an array")

    def ctype(self) -> CType:
        return ArrT(self.a.ptr.elem, self.a.dims)


class FieldLV(LV):
    __slots__ = ("field", "line", "parent")

    def __init__(self, parent: LV, field: str, line: int) -> None:
        self.parent, self.field, self.line = parent, field, line

    def get(self, m: Mask) -> Any:
        s = self.parent.get(m)
        if not isinstance(s, StructVal):
            raise CudaError(f"member .{self.field} of a non-struct value", self.line)
        return s.fields[self.field]

    def set(self, v: Any, m: Mask) -> None:
        par = self.parent
        if isinstance(par, MemLV):
            st = par.p.elem
            assert isinstance(st, StructT)
            MemLV(Ptr(par.p.buf, par.p.off + st.field_offset(self.field), st.field_type(self.field)),
                  self.line).set(v, m)
            return
        s = par.get(None if m is None else m)
        if not isinstance(s, StructVal):
            raise CudaError(f"member .{self.field} of a non-struct value", self.line)
        new = dict(s.fields)
        new[self.field] = where(m, convert(v, s.stype.field_type(self.field), self.line), s.fields[self.field])
        if isinstance(par, VarLV) and par.cell[2] == VAL:
            par.cell[0] = StructVal(s.stype, new)
        else:
            par.set(StructVal(s.stype, new), None)

    def ctype(self) -> CType:
        t = self.parent.ctype()
        assert isinstance(t, StructT)
        return t.field_type(self.field)


def convert(v: Any, t: CType, line: int | None = None) -> Any:
    """C conversion of ``v`` to type ``t`` (assignment, initialisation, argument passing, casts)."""
    if isinstance(t, Scalar):
        if isinstance(v, StructVal | Ptr | ArrRef):
            if isinstance(v, Ptr | ArrRef) and t.dtype.kind in "iub":
                return np.bool_(True) if t.dtype == BOOL else t.dtype.type(0)
            raise CudaError(f"cannot convert a {type_of(v)} to {t.name}", line)
        return cast(v, t.dtype)
    if isinstance(t, PtrT):
        if isinstance(v, ArrRef):
            v = decay(v)
        if isinstance(v, Ptr):
            if v.elem == t.elem or v.buf is None:
                return v if v.elem == t.elem else Ptr(v.buf, v.off, t.elem)
            if v.buf.data.dtype != base_dtype(t.elem, line):
                raise Unsupported(f"reinterpreting {v.buf.data.dtype} memory as {t.elem}", line)
            return Ptr(v.buf, v.off, t.elem)
        if isinstance(v, np.generic | np.ndarray) and not np.any(v):
            return Ptr(None, 0, t.elem)
        raise CudaError("cannot convert a non-pointer value to a pointer", line)
    if isinstance(t, StructT):
        if isinstance(v, StructVal):
            return StructVal(t, {f: convert(v.fields[f], ft, line) for f, ft in t.fields})
        raise CudaError(f"cannot convert {type_of(v)} to {t.name}", line)
    return v


def decay(a: ArrRef) -> Ptr:
    if len(a.dims) > 1:
        return Ptr(a.ptr.buf, a.ptr.off, ArrT(a.ptr.elem, a.dims[1:]))
    return a.ptr


# ---------------------------------------------------------------------------------------------
# the interpreter


@dataclass
class LaunchRecord:
    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem: int
    line: int


_CONSTANTS: dict[str, Any] = {
    "FLT_MAX": np.float32(3.4028234663852886e38), "FLT_MIN": np.float32(1.1754943508222875e-38),
    "FLT_EPSILON": np.float32(1.1920928955078125e-07), "INFINITY": np.float32(np.inf),
    "NAN": np.float32(np.nan), "HUGE_VALF": np.float32(np.inf), "CUDART_INF_F": np.float32(np.inf),
    "CUDART_NAN_F": np.float32(np.nan), "INT_MAX": np.int32(2**31 - 1), "INT_MIN": np.int32(-(2**31)),
    "UINT_MAX": np.uint32(2**32 - 1), "M_PI": np.float64(np.pi), "M_SQRT2": np.float64(np.sqrt(2)),
    "M_SQRT1_2": np.float64(np.sqrt(0.5)), "M_2_SQRTPI": np.float64(2 / np.sqrt(np.pi)),
    "M_LOG2E": np.float64(np.log2(np.e)), "M_LN2": np.float64(np.log(2)), "M_E": np.float64(np.e),
    "cudaSuccess": np.int32(0), "cudaErrorInvalidValue": np.int32(1), "cudaErrorInvalidConfiguration": np.int32(9),
    "NULL": np.int64(0), "nullptr": np.int64(0), "DBL_MAX": np.float64(np.finfo(np.float64).max),
    "CUDART_PI_F": np.float32(np.pi), "wmma::mem_row_major": np.int32(0), "wmma::mem_col_major": np.int32(1),
    "nvcuda::wmma::mem_row_major": np.int32(0), "nvcuda::wmma::mem_col_major": np.int32(1),
}
_IGNORED_CALLS = {"fprintf", "printf", "cudaFuncSetAttribute", "cudaDeviceSynchronize", "cudaStreamSynchronize",
                  "assert", "__syncwarp", "cudaGetLastError", "cudaPeekAtLastError", "__threadfence",
                  "__threadfence_block", "cudaGetErrorString", "puts"}


class Interpreter:
    def __init__(self, prog: Program) -> None:
        self.prog = prog
        self.opts = prog.options
        self._expr: dict[int, Expr] = {}
        self._stmt: dict[int, Stmt] = {}
        self._lv: dict[int, Callable[[Frame, Mask], LV]] = {}
        self._param_lists: dict[int, list[tuple[str, CType, bool]]] = {}
        self.structs: dict[str, StructT] = {}
        self.globals: dict[str, list[Any]] = {}
        self.launches: list[LaunchRecord] = []
        self.warnings: list[str] = []
        self._host = HostLanes()
        #: :func:`executor_seconds` past which the run stops: a work limit's safety net, far above what the limit
        #: takes (``run_host``: a harness fault, :class:`ExecutorSafetyNet`), or a CPU-time limit of its own
        self.deadline: float | None = None
        #: whether ``deadline`` is a work limit's safety net (a harness fault) or a plain CPU-time limit (a timeout)
        self.safety_net = False
        #: work units run so far (statements and loop iterations, each :attr:`Lanes.cost`): the deterministic
        #: measure every budget and limit is in; past ``work_limit`` the run times out (:class:`ExecutorTimeout`)
        self.work = 0
        self.work_limit: int | None = None
        #: the part of ``work`` its source counted (``NODE_WORK`` per syntax node, set by ``run_host``): a mutant
        #: resumed from the original's state counts its own source's, not the original's
        self.source_work = 0
        #: the buffers of the host function's pointer arguments, in parameter order (set by ``run_host``)
        self.host_buffers: list[Buffer] = []
        #: where the state at the first group's top-level statements is captured, or the state a run resumes
        #: from (:mod:`nkieval.cuda.resume`); None for a plain run
        self.capture: Any = None
        self.resume: Any = None
        #: loop iterations run (the safety net's clock is read every DEADLINE_EVERY of them: the thread's CPU
        #: clock is a system call, far dearer than an iteration's bookkeeping)
        self._ticks = 0
        for name in prog.structs:
            self.structs[name] = self._struct(name)
        g = Frame(self._host, "<global>")
        for decl in prog.constants:
            self._compile_stmt(decl)(g, None)
        self.globals = g.vars

    # -- types ----------------------------------------------------------------------------------
    def _struct(self, name: str) -> StructT:
        body = self.prog.structs[name]
        fields: list[tuple[str, CType]] = []
        for fd in body.named_children:
            if fd.type != "field_declaration":
                continue
            base = self.base_type(fd.child_by_field_name("type"))
            for d in fd.children_by_field_name("declarator"):
                if d.type != "field_identifier":
                    raise Unsupported(f"struct member {_txt(d)!r}", _line(d))
                fields.append((_txt(d), base))
        return StructT(name, tuple(fields))

    def base_type(self, tn: Any) -> CType:
        if tn is None:
            raise CudaError("a declaration without a type")
        t = tn.type
        if t == "struct_specifier":
            nm = tn.child_by_field_name("name")
            return self.structs[_txt(nm)]
        txt = " ".join(_txt(tn).replace("std::", "").split())
        if "fragment" in txt:
            return _fragment_type(txt, _line(tn))
        if txt in SCALARS:
            return SCALARS[txt]
        if txt in VECTORS:
            return VECTORS[txt]
        if txt in self.structs:
            return self.structs[txt]
        if txt in ("cudaStream_t", "void"):
            return SCALARS["long long"] if txt == "cudaStream_t" else Scalar("void", I32)
        if t == "placeholder_type_specifier":
            return Scalar("auto", I32)
        if txt.startswith("unsigned") or txt.startswith("long") or txt.startswith("signed"):
            raise Unsupported(f"type {txt}", _line(tn))
        raise Unsupported(f"type {txt}", _line(tn))

    def declarator_type(self, base: CType, d: Any, fr: Frame | None) -> tuple[str | None, CType, bool]:
        """(name, type, is_reference) of a declarator over ``base``; array sizes are evaluated in ``fr``."""
        dims: list[int] = []
        ref = False
        t = base
        while d is not None:
            k = d.type
            if k in ("identifier", "field_identifier"):
                break
            if k in ("pointer_declarator", "abstract_pointer_declarator"):
                t = PtrT(t)
            elif k == "reference_declarator":
                ref = True
                d = next((c for c in d.named_children), None)
                continue
            elif k == "array_declarator":
                sz = d.child_by_field_name("size")
                if sz is None:
                    dims.insert(0, -1)
                else:
                    v = self.expr(sz)(fr or Frame(self._host, "<size>"), None)
                    dims.insert(0, int(v))
            elif k == "init_declarator":
                d = d.child_by_field_name("declarator")
                continue
            elif k == "function_declarator":
                raise Unsupported("a function pointer or local function declaration", _line(d))
            elif k == "parenthesized_declarator":
                raise Unsupported("a pointer to an array", _line(d))
            d = d.child_by_field_name("declarator")
        if dims:
            t = ArrT(t, tuple(dims))
        return (None if d is None else _txt(d)), t, ref

    def type_descriptor(self, td: Any) -> CType:
        base = self.base_type(td.child_by_field_name("type"))
        _, t, _ = self.declarator_type(base, td.child_by_field_name("declarator"), None)
        return t

    # -- entry points --------------------------------------------------------------------------
    def call_host(self, name: str, args: list[Any]) -> Any:
        fn = self.prog.functions.get(name)
        if fn is None:
            raise CudaError(f"no function {name!r} in the CUDA source")
        fr = Frame(self._host, name)
        return self._invoke(fn, name, fr, args, None, {}, _line(fn))

    # -- functions -----------------------------------------------------------------------------
    def _params(self, fn: Any) -> list[tuple[str, CType, bool]]:
        """(name, type, is_reference) of ``fn``'s parameters, read once per function (a device function is
        invoked once per call statement executed; callers do not modify the list)."""
        kept = self._param_lists.get(fn.id)
        if kept is None:
            kept = self._param_lists[fn.id] = self._read_params(fn)
        return kept

    def _read_params(self, fn: Any) -> list[tuple[str, CType, bool]]:
        decl = fn.child_by_field_name("declarator")
        while decl is not None and decl.type != "function_declarator":
            decl = decl.child_by_field_name("declarator")
        if decl is None:
            raise CudaError("a function without parameters list")
        out = []
        for p in decl.child_by_field_name("parameters").named_children:
            if p.type != "parameter_declaration":
                if p.type == "variadic_parameter":
                    raise Unsupported("variadic function", _line(p))
                continue
            base = self.base_type(p.child_by_field_name("type"))
            name, t, ref = self.declarator_type(base, p.child_by_field_name("declarator"), None)
            if isinstance(t, ArrT):
                t = PtrT(t.elem) if len(t.dims) == 1 else PtrT(ArrT(t.elem, t.dims[1:]))
            if name is None and isinstance(t, Scalar) and t.name == "void":
                continue
            out.append((name or f"_{len(out)}", t, ref))
        return out

    def _ret_type(self, fn: Any) -> CType:
        base = self.base_type(fn.child_by_field_name("type"))
        d = fn.child_by_field_name("declarator")
        return PtrT(base) if d is not None and d.type == "pointer_declarator" else base

    def _invoke(self, fn: Any, name: str, fr: Frame, args: list[Any], m: Mask, tparams: dict[str, Any],
                line: int, on_statement: Callable[[int, Frame, Mask], None] | None = None) -> Any:
        params = self._params(fn)
        if len(args) != len(params):
            raise CudaError(f"{name} takes {len(params)} arguments, {len(args)} given", line)
        for pname, t, ref in params:
            a = args.pop(0)
            if ref:
                if not isinstance(a, LV):
                    raise CudaError(f"argument {pname} of {name} must be an lvalue", line)
                fr.vars[pname] = [a, t, REF]
            else:
                if isinstance(a, LV):
                    a = a.get(m)
                fr.vars[pname] = [convert(a, t, line), t, VAL]
        for k, v in tparams.items():
            fr.vars[k] = [v, type_of(v), VAL]
        fr.ret_type = self._ret_type(fn)
        body = fn.child_by_field_name("body")
        if on_statement is None:
            self._compile_stmt(body)(fr, m)
        else:
            self.run_body(fn, fr, m, 0, on_statement)
        return fr.ret

    def run_body(self, fn: Any, fr: Frame, m: Mask, first: int,
                 on_statement: Callable[[int, Frame, Mask], None] | None = None) -> None:
        """Run ``fn``'s body from its top-level statement ``first`` on, as its compound statement runs them
        (each under the mask the previous one left, stopping when no thread is left), calling ``on_statement``
        before each: where a run is captured, or resumed (:mod:`nkieval.cuda.resume`). The statements run
        are compiled before the first runs, as the compound statement compiles all of them."""
        stmts = [c for c in fn.child_by_field_name("body").named_children if c.type != "comment"]
        parts = [(self._compile_stmt(c), statement_size(c)) for c in stmts[first:]]
        for k, (part, size) in enumerate(parts, first):
            if on_statement is not None:
                on_statement(k, fr, m)
            self.work += size * fr.L.cost  # (as the compound statement counts it: a fresh run's count)
            m2 = part(fr, m)
            if m2 is not m:
                m = m2
                if is_empty(m):
                    break

    def launch(self, fn: Any, name: str, grid: Any, block: Any, smem: int, args: list[Any],
               tparams: dict[str, Any], line: int) -> None:
        g, b = _dim3(grid), _dim3(block)
        nt, nblocks = prod(b), prod(g)
        if nt <= 0 or nblocks <= 0:
            raise KernelFault(f"launch of {name} with an empty grid or block ({g}, {b})", line)
        if nt > 1024:
            raise KernelFault(f"launch of {name} with {nt} threads per block (at most 1024)", line)
        index = len(self.launches)
        self.launches.append(LaunchRecord(name, g, b, smem, line))
        if self.resume is not None and index < self.resume.launch:
            return  # (a resumed run: what this launch wrote is in the state it resumes from)
        per = max(1, MAX_LANES // nt)
        for start in range(0, nblocks, per):
            self.check_work(line)
            L = Lanes(g, b, start, min(per, nblocks - start), smem)
            fr = Frame(L, name)
            fr.top = True
            if start == 0 and self.resume is not None and index == self.resume.launch:
                fr, m = self.resume.restore(self)
                L = fr.L
                self.run_body(fn, fr, m, self.resume.statement)
            elif start == 0 and self.capture is not None:
                self._invoke(fn, name, fr, list(args), None, dict(tparams), line,
                             lambda k, f, mm, c=self.capture: c.take(self, index, k, f, mm))
            else:
                self._invoke(fn, name, fr, list(args), None, dict(tparams), line)
            self._report_races(L, name)

    def _report_races(self, L: Lanes, name: str) -> None:
        for buf in L.shared_bufs:
            if buf.race is None:
                continue
            at, lane, wlane, el = buf.race
            msg = (f"shared-memory race in {name} at kernel.cu:{at}: thread {lane % L.nt} of a block reads "
                   f"{buf.name.split(' ')[0]} element {el % max(1, buf.data.size // L.nb)}, written by thread "
                   f"{wlane % L.nt} since the last __syncthreads()")
            if msg not in self.warnings:
                self.warnings.append(msg)

    def check_work(self, line: int | None = None) -> None:
        """Raise :class:`ExecutorTimeout` when the run is past its work limit (loop iterations check it inline)."""
        if self.work_limit is not None and self.work > self.work_limit:
            raise ExecutorTimeout("the CUDA executor ran out of the work it was given", line)

    # -- compilation caches --------------------------------------------------------------------
    def expr(self, n: Any) -> Expr:
        f = self._expr.get(n.id)
        if f is None:
            f = self._compile_expr(n)
            self._expr[n.id] = f
        return f

    def lvalue(self, n: Any) -> Callable[[Frame, Mask], LV]:
        f = self._lv.get(n.id)
        if f is None:
            f = self._compile_lvalue(n)
            self._lv[n.id] = f
        return f

    def _compile_stmt(self, n: Any) -> Stmt:
        f = self._stmt.get(n.id)
        if f is None:
            f = self._make_stmt(n)
            self._stmt[n.id] = f
        return f

    # -- statements ----------------------------------------------------------------------------
    def _make_stmt(self, n: Any) -> Stmt:
        k = n.type
        line = _line(n)
        if k == "compound_statement":
            kids = [c for c in n.named_children if c.type != "comment"]
            parts = [(self._compile_stmt(c), statement_size(c)) for c in kids]
            names = [c for c in n.named_children if c.type == "declaration"]

            def compound(fr: Frame, m: Mask) -> Mask:
                saved = {}
                if names:
                    saved = dict(fr.vars)
                cost = fr.L.cost
                for p, size in parts:
                    self.work += size * cost
                    m2 = p(fr, m)
                    if m2 is not m:
                        m = m2
                        if is_empty(m):
                            break
                if names:
                    # leave the block: names declared in it go out of scope (outer ones come back)
                    for key in list(fr.vars):
                        if key not in saved:
                            del fr.vars[key]
                        elif fr.vars[key] is not saved[key]:
                            fr.vars[key] = saved[key]
                return m
            return compound
        if k == "expression_statement":
            if not n.named_children:
                return lambda fr, m: m
            e = self._stmt_expr(n.named_children[0])

            def exprstmt(fr: Frame, m: Mask) -> Mask:
                e(fr, m)
                return m
            return exprstmt
        if k == "declaration":
            return self._declaration(n)
        if k == "if_statement":
            cond = self._cond(n.child_by_field_name("condition"))
            then = self._compile_stmt(n.child_by_field_name("consequence"))
            alt_n = n.child_by_field_name("alternative")
            alt = None
            if alt_n is not None:
                body = alt_n.named_children[-1] if alt_n.type == "else_clause" else alt_n
                alt = self._compile_stmt(body)

            def if_(fr: Frame, m: Mask) -> Mask:
                c = cond(fr, m)
                if not isinstance(c, np.ndarray):
                    if c:
                        return then(fr, m)
                    return alt(fr, m) if alt is not None else m
                mt = m_and(fr, m, c)
                me = m_andnot(fr, m, c)
                out_t = then(fr, mt) if mt is None or mt.any() else mt
                out_e = (alt(fr, me) if alt is not None else me) if me is None or me.any() else me
                return m_or(out_t, out_e)
            return if_
        if k in ("for_statement", "while_statement", "do_statement"):
            return self._loop(n)
        if k == "return_statement":
            rn = n.named_children[0] if n.named_children else None
            e = None
            if rn is not None and rn.type == "initializer_list":
                def e(fr: Frame, m: Mask) -> Any:
                    assert fr.ret_type is not None
                    return self._init_list(fr, fr.ret_type, rn, m, line)
            elif rn is not None:
                e = self.expr(rn)

            def ret(fr: Frame, m: Mask) -> Mask:
                if e is not None:
                    v = e(fr, m)
                    if fr.ret_type is not None and not (isinstance(fr.ret_type, Scalar) and fr.ret_type.name == "auto"):
                        v = convert(v, fr.ret_type, line)
                    fr.ret = where(m, v, fr.ret, line)
                if fr.top:
                    if m is None:
                        fr.L.exited[:] = True
                    else:
                        fr.L.exited |= m
                return fr.L.empty
            return ret
        if k == "break_statement":
            def brk(fr: Frame, m: Mask) -> Mask:
                lp = fr.loops[-1]
                lp[0] = m_or(lp[0], m) if lp[0] is not None or m is None else m
                return fr.L.empty
            return brk
        if k == "continue_statement":
            def cont(fr: Frame, m: Mask) -> Mask:
                lp = fr.loops[-1]
                lp[1] = m_or(lp[1], m)
                return fr.L.empty
            return cont
        if k in ("comment", "empty_statement", ";", "type_definition", "using_declaration", "alias_declaration",
                 "static_assert_declaration", "namespace_alias_definition"):
            return lambda fr, m: m
        if k == "struct_specifier" or (k == "declaration" and n.child_by_field_name("declarator") is None):
            return lambda fr, m: m
        raise Unsupported(f"statement {k}", line)

    def _cond(self, c: Any) -> Expr:
        if c.type == "condition_clause":
            v = c.child_by_field_name("value")
            if v is None:
                raise Unsupported("a declaration in a condition", _line(c))
            c = v
        return self.expr(c)

    def _loop(self, n: Any) -> Stmt:
        k = n.type
        line = _line(n)
        init: Stmt | None = None
        upd: Expr | None = None
        cond: Expr | None = None
        if k == "for_statement":
            i = n.child_by_field_name("initializer")
            if i is not None:
                init = self._compile_stmt(i) if i.type == "declaration" else self._stmt_of_expr(i)
            c = n.child_by_field_name("condition")
            cond = self._cond(c) if c is not None else None
            u = n.child_by_field_name("update")
            upd = self._stmt_expr(u) if u is not None else None
        else:
            cond = self._cond(n.child_by_field_name("condition"))
        body = self._compile_stmt(n.child_by_field_name("body"))
        # (an iteration's own work: its condition, its update, and a body that is one simple statement; a block's
        # statements count when they run)
        body_n = n.child_by_field_name("body")
        size = sum(x.descendant_count for x in (n.child_by_field_name("condition"), n.child_by_field_name("update"))
                   if x is not None) + (0 if body_n.type in _NESTED else statement_size(body_n)) or 1
        is_do = k == "do_statement"
        scoped = init is not None and n.child_by_field_name("initializer").type == "declaration"

        def loop(fr: Frame, m: Mask) -> Mask:
            saved = dict(fr.vars) if scoped else None
            if init is not None:
                init(fr, m)
            lp: list[Any] = [fr.L.empty, fr.L.empty]
            fr.loops.append(lp)
            active = m
            exited = fr.L.empty
            first = True
            n_iter = 0
            try:
                while True:
                    if cond is not None and not (is_do and first):
                        c = cond(fr, active)
                        if isinstance(c, np.ndarray):
                            exited = m_or(exited, m_andnot(fr, active, c))
                            active = m_and(fr, active, c)
                            if not active.any():
                                break
                        elif not c:
                            exited = m_or(exited, active)
                            break
                    first = False
                    lp[1] = fr.L.empty
                    r = body(fr, active)
                    active = m_or(r, lp[1]) if r is not None and lp[1] is not None else None
                    if active is not None and not active.any():
                        break
                    if upd is not None:
                        upd(fr, active)
                    n_iter += 1
                    self._ticks += 1
                    self.work += size * fr.L.cost
                    if self.work_limit is not None and self.work > self.work_limit:
                        raise ExecutorTimeout("the CUDA executor ran out of the work it was given", line)
                    if self.deadline is not None and not self._ticks % DEADLINE_EVERY \
                            and executor_seconds() > self.deadline:
                        if self.safety_net:
                            raise ExecutorSafetyNet(line)
                        raise ExecutorTimeout("the CUDA executor ran out of the time it was given", line)
                    if n_iter > 50_000_000:
                        raise KernelFault("a loop ran more than 50,000,000 iterations", line)
            finally:
                fr.loops.pop()
                if saved is not None:
                    for key in list(fr.vars):
                        if key not in saved:
                            del fr.vars[key]
                        elif fr.vars[key] is not saved[key]:
                            fr.vars[key] = saved[key]
            return m_or(exited, lp[0])
        return loop

    def _stmt_of_expr(self, e: Any) -> Stmt:
        f = self._stmt_expr(e)

        def s(fr: Frame, m: Mask) -> Mask:
            f(fr, m)
            return m
        return s

    def _stmt_expr(self, e: Any) -> Expr:
        """An expression evaluated for its effect (an atomic's old value need not be computed)."""
        if e.type == "call_expression":
            return self._call(e, value_used=False)
        if e.type == "comma_expression":
            a, b = self._stmt_expr(e.child_by_field_name("left")), self._stmt_expr(e.child_by_field_name("right"))

            def comma(fr: Frame, m: Mask) -> Any:
                a(fr, m)
                return b(fr, m)
            return comma
        return self.expr(e)

    def _declaration(self, n: Any) -> Stmt:
        line = _line(n)
        quals = {_txt(c) for c in n.children if c.type in ("type_qualifier", "storage_class_specifier")}
        shared = "__shared__" in quals
        extern = "extern" in quals
        tnode = n.child_by_field_name("type")
        base = self.base_type(tnode)
        auto = tnode.type == "placeholder_type_specifier"
        decls = n.children_by_field_name("declarator")
        items = []
        for d in decls:
            init = None
            if d.type == "init_declarator":
                v = d.child_by_field_name("value")
                init = v
            elif d.type == "function_declarator" and isinstance(base, StructT):
                # C++'s most vexing parse: ``dim3 block(kTile, kTile);`` is a constructor call
                plist = d.child_by_field_name("parameters")
                if all(p.type == "parameter_declaration" and p.child_by_field_name("declarator") is None
                       and p.child_by_field_name("type").type == "type_identifier" for p in plist.named_children):
                    init = plist
                    d = d.child_by_field_name("declarator")
            items.append((d, init))

        def decl(fr: Frame, m: Mask) -> Mask:
            for d, init in items:
                name, t, ref = self.declarator_type(base, d, fr)
                if name is None:
                    raise Unsupported("an unnamed declaration", line)
                if ref:
                    if init is None:
                        raise CudaError(f"reference {name} without initialiser", line)
                    fr.vars[name] = [self.lvalue(init)(fr, m), t, REF]
                    continue
                if shared:
                    fr.vars[name] = self._shared(fr, n, d, name, t, extern, line)
                    continue
                if isinstance(t, ArrT):
                    cell = self._local_array(fr, name, t, line)
                    fr.vars[name] = cell
                    if init is not None:
                        self._init_array(fr, cell[0], init, m, line)
                    continue
                if isinstance(t, FragT):
                    nw = fr.L.nb * ((fr.L.nt + 31) // 32)
                    fr.vars[name] = [Frag(t, np.zeros((nw, t.rows, t.cols), F32 if t.use == "accumulator"
                                                      else t.dtype)), t, VAL]
                    continue
                if init is None:
                    fr.vars[name] = [_zero(t), t, VAL]
                    continue
                if init.type == "initializer_list":
                    v = self._init_list(fr, t, init, m, line)
                elif init.type in ("argument_list", "parameter_list"):  # dim3 b(32, 8), float4 v(...)
                    args = [self.expr(a if a.type != "parameter_declaration" else a.child_by_field_name("type"))(fr, m)
                            for a in init.named_children]
                    v = self._construct(t, args, line)
                else:
                    v = self.expr(init)(fr, m)
                if auto:
                    t = type_of(v) if not isinstance(v, ArrRef) else PtrT(v.ptr.elem)
                fr.vars[name] = [convert(v, t, line), t, VAL]
            return m
        return decl

    def _shared(self, fr: Frame, node: Any, d: Any, name: str, t: CType, extern: bool, line: int) -> list[Any]:
        L = fr.L
        key = (node.id, d.id)  # (one declaration may declare several: ids alone, no arithmetic on them)
        hit = L.shared.get(key)
        if hit is not None:
            return hit
        if isinstance(t, ArrT):
            elem, dims = t.elem, t.dims
            if extern or dims[0] == -1:
                isz = sizeof(elem)
                n_el = L.smem // isz if isz else 0
                key_dyn = "dynamic"
                if key_dyn in L.shared:  # every extern __shared__ array is the same memory
                    buf = L.shared[key_dyn]
                else:
                    buf = Buffer(np.zeros(max(1, n_el) * L.nb, base_dtype(elem, line)), f"{name} (dynamic shared)",
                                 "shared")
                    L.shared[key_dyn] = buf
                    L.shared_bufs.append(buf)
                size = max(1, n_el) * units(elem)
                dims = (n_el,)
            else:
                size = prod(dims) * units(elem)
                buf = Buffer(np.zeros(size * L.nb, base_dtype(elem, line)), f"{name} (shared)", "shared")
                L.shared_bufs.append(buf)
            cell = [ArrRef(Ptr(buf, L.blk * size, elem), dims), t, VAL]
        else:
            size = units(t)
            buf = Buffer(np.zeros(size * L.nb, base_dtype(t, line)), f"{name} (shared)", "shared")
            L.shared_bufs.append(buf)
            cell = [Ptr(buf, L.blk * size, t), t, MEM]
        L.shared[key] = cell
        return cell

    def _local_array(self, fr: Frame, name: str, t: ArrT, line: int) -> list[Any]:
        L = fr.L
        if any(x < 0 for x in t.dims):
            raise Unsupported(f"local array {name} without a size", line)
        size = prod(t.dims) * units(t.elem)
        buf = Buffer(np.zeros(size * L.T, base_dtype(t.elem, line)), name, "local")
        return [ArrRef(Ptr(buf, L.lane * size, t.elem), t.dims), t, VAL]

    def _init_array(self, fr: Frame, a: ArrRef, init: Any, m: Mask, line: int) -> None:
        if init.type != "initializer_list":
            raise Unsupported("array initialiser", line)
        vals = [self.expr(c)(fr, m) for c in init.named_children]
        u = units(a.ptr.elem)
        n_el = prod(a.dims)
        for i in range(n_el):
            v = vals[i] if i < len(vals) else (vals[-1] * 0 if len(vals) == 1 else _zero(a.ptr.elem))
            if len(vals) == 1 and i > 0:
                v = _zero(a.ptr.elem)
            store(Ptr(a.ptr.buf, a.ptr.off + i * u, a.ptr.elem), convert(v, a.ptr.elem, line), m, line)

    def _init_list(self, fr: Frame, t: CType, init: Any, m: Mask, line: int) -> Any:
        vals = [self.expr(c)(fr, m) for c in init.named_children]
        if isinstance(t, StructT):
            fields = {}
            for i, (f, ft) in enumerate(t.fields):
                fields[f] = convert(vals[i], ft, line) if i < len(vals) else _zero(ft)
            return StructVal(t, fields)
        if isinstance(t, Scalar) and len(vals) <= 1:
            return convert(vals[0], t, line) if vals else _zero(t)
        raise Unsupported("brace initialiser of this type", line)

    def _construct(self, t: CType, args: list[Any], line: int) -> Any:
        if isinstance(t, StructT):
            fields = {}
            for i, (f, ft) in enumerate(t.fields):
                dflt = np.uint32(1) if t.name == "dim3" else _zero(ft)
                fields[f] = convert(args[i], ft, line) if i < len(args) else dflt
            return StructVal(t, fields)
        if len(args) == 1:
            return convert(args[0], t, line)
        raise Unsupported(f"constructor of {t}", line)

    # -- expressions ---------------------------------------------------------------------------
    def _compile_expr(self, n: Any) -> Expr:
        k = n.type
        line = _line(n)
        if k == "number_literal":
            v = _literal(_txt(n), line)
            return lambda fr, m: v
        if k in ("true", "false"):
            v = np.bool_(k == "true")
            return lambda fr, m: v
        if k in ("null", "nullptr"):
            return lambda fr, m: np.int64(0)
        if k == "char_literal":
            v = np.int8(ord(_txt(n)[1]))
            return lambda fr, m: v
        if k in ("string_literal", "concatenated_string", "raw_string_literal"):
            return lambda fr, m: np.int64(0)
        if k == "parenthesized_expression":
            return self.expr(n.named_children[0])
        if k in ("identifier", "type_identifier"):
            return self._ident(n)
        if k in ("subscript_expression", "field_expression"):
            lvf = self.lvalue(n)
            return lambda fr, m: lvf(fr, m).get(m)
        if k == "binary_expression":
            return self._binary(n)
        if k == "unary_expression":
            return self._unary(n)
        if k == "pointer_expression":
            op = _txt(n.child_by_field_name("operator"))
            arg = n.child_by_field_name("argument")
            if op == "&":
                lvf = self.lvalue(arg)

                def addr(fr: Frame, m: Mask) -> Any:
                    lv = lvf(fr, m)
                    if isinstance(lv, MemLV):
                        return lv.p
                    if isinstance(lv, ArrLV):
                        return decay(lv.a)
                    if isinstance(lv, VarLV) and lv.cell[2] == MEM:
                        return lv.cell[0]
                    if isinstance(lv, FieldLV) and isinstance(lv.parent, MemLV):
                        p = lv.parent.p
                        st = p.elem
                        assert isinstance(st, StructT)
                        return Ptr(p.buf, p.off + st.field_offset(lv.field), st.field_type(lv.field))
                    raise Unsupported("the address of a register variable", line)
                return addr
            lvf = self.lvalue(n)
            return lambda fr, m: lvf(fr, m).get(m)
        if k == "assignment_expression":
            return self._assign(n)
        if k == "update_expression":
            return self._update(n)
        if k == "conditional_expression":
            return self._ternary(n)
        if k == "cast_expression":
            td = n.child_by_field_name("type")
            val = self.expr(n.child_by_field_name("value"))
            cache: list[CType] = []

            def castf(fr: Frame, m: Mask) -> Any:
                if not cache:
                    cache.append(self.type_descriptor(td))
                return convert(val(fr, m), cache[0], line)
            return castf
        if k == "call_expression":
            return self._call(n, value_used=True)
        if k == "sizeof_expression":
            td = n.child_by_field_name("type")
            if td is not None:
                def sz(fr: Frame, m: Mask) -> Any:
                    return np.uint64(sizeof(self.type_descriptor(td)))
                return sz
            v = self.expr(n.child_by_field_name("value"))

            def szv(fr: Frame, m: Mask) -> Any:
                return np.uint64(sizeof(type_of(v(fr, m))))
            return szv
        if k == "comma_expression":
            a, b = self._stmt_expr(n.child_by_field_name("left")), self.expr(n.child_by_field_name("right"))

            def comma(fr: Frame, m: Mask) -> Any:
                a(fr, m)
                return b(fr, m)
            return comma
        if k == "qualified_identifier":
            name = _txt(n).replace("std::", "").replace(" ", "")
            if name in _CONSTANTS:
                v = _CONSTANTS[name]
                return lambda fr, m: v
        if k == "initializer_list":
            raise Unsupported("a brace list outside a declaration", line)
        raise Unsupported(f"expression {k} ({_txt(n)[:30]!r})", line)

    def _ident(self, n: Any) -> Expr:
        name = _txt(n)
        line = _line(n)

        def ident(fr: Frame, m: Mask) -> Any:
            c = fr.vars.get(name) or self.globals.get(name)
            if c is not None:
                if c[2] == VAL:
                    return c[0]
                return VarLV(c, name, line).get(m)
            b = fr.L.builtins.get(name)
            if b is not None:
                return b
            if name in _CONSTANTS:
                return _CONSTANTS[name]
            if name in self.prog.functions:
                raise Unsupported(f"function {name} used as a value", line)
            raise CudaError(f"unknown name {name!r}", line)
        return ident

    def _compile_lvalue(self, n: Any) -> Callable[[Frame, Mask], LV]:
        k = n.type
        line = _line(n)
        if k == "parenthesized_expression":
            return self.lvalue(n.named_children[0])
        if k == "identifier":
            name = _txt(n)

            def var(fr: Frame, m: Mask) -> LV:
                c = fr.vars.get(name) or self.globals.get(name)
                if c is None:
                    b = fr.L.builtins.get(name)
                    if b is not None:
                        return VarLV([b, type_of(b), VAL], name, line)
                    raise CudaError(f"unknown name {name!r}", line)
                if c[2] == VAL and isinstance(c[0], ArrRef):
                    return ArrLV(c[0])
                return VarLV(c, name, line)
            return var
        if k == "subscript_expression":
            base = self.expr(n.child_by_field_name("argument"))
            idxn = n.child_by_field_name("indices") or n.child_by_field_name("index")
            if idxn.type == "subscript_argument_list":
                if len(idxn.named_children) != 1:
                    raise Unsupported("multi-argument subscript", line)
                idxn = idxn.named_children[0]
            idx = self.expr(idxn)
            site = IndexSite()  # (one per compiled subscript: see IndexSite)

            def sub(fr: Frame, m: Mask) -> LV:
                b = base(fr, m)
                i = idx(fr, m)
                if isinstance(i, Ptr | ArrRef):
                    b, i = i, b
                if isinstance(i, StructVal):
                    raise CudaError("array subscript is not an integer", line)
                if isinstance(b, ArrRef):
                    p = b.ptr
                    if len(b.dims) > 1:
                        stride = prod(b.dims[1:]) * units(p.elem)
                        return ArrLV(ArrRef(Ptr(p.buf, site.offset(p.off, i, stride, line), p.elem), b.dims[1:]))
                    return MemLV(Ptr(p.buf, site.offset(p.off, i, units(p.elem), line), p.elem), line)
                if isinstance(b, Ptr):
                    if isinstance(b.elem, ArrT):
                        stride = units(b.elem)
                        return ArrLV(ArrRef(Ptr(b.buf, site.offset(b.off, i, stride, line), b.elem.elem),
                                            b.elem.dims))
                    return MemLV(Ptr(b.buf, site.offset(b.off, i, units(b.elem), line), b.elem), line)
                raise CudaError("subscript of a value that is neither an array nor a pointer", line)
            return sub
        if k == "field_expression":
            arg = n.child_by_field_name("argument")
            field = _txt(n.child_by_field_name("field"))
            arrow = _txt(n.child_by_field_name("operator")) == "->"
            if arrow:
                pe = self.expr(arg)

                def arrowf(fr: Frame, m: Mask) -> LV:
                    p = pe(fr, m)
                    if isinstance(p, ArrRef):
                        p = decay(p)
                    return FieldLV(MemLV(p, line), field, line)
                return arrowf
            if arg.type == "identifier" and _txt(arg) in ("threadIdx", "blockIdx", "blockDim", "gridDim"):
                nm = _txt(arg)

                def bi(fr: Frame, m: Mask) -> LV:
                    c = fr.vars.get(nm)
                    s = c[0] if c is not None else fr.L.builtins[nm]
                    return _Const(s.fields[field])
                return bi
            plv = self.lvalue(arg) if arg.type in ("identifier", "subscript_expression", "field_expression",
                                                   "pointer_expression", "parenthesized_expression") else None
            if plv is None:
                pe2 = self.expr(arg)
                return lambda fr, m: FieldLV(_Const(pe2(fr, m)), field, line)
            return lambda fr, m: FieldLV(plv(fr, m), field, line)
        if k == "pointer_expression" and _txt(n.child_by_field_name("operator")) == "*":
            pe = self.expr(n.child_by_field_name("argument"))

            def deref(fr: Frame, m: Mask) -> LV:
                p = pe(fr, m)
                if isinstance(p, ArrRef):
                    p = decay(p)
                if not isinstance(p, Ptr):
                    raise CudaError("dereference of a non-pointer", line)
                return MemLV(p, line)
            return deref
        e = self.expr(n)
        return lambda fr, m: _Const(e(fr, m))

    def _binary(self, n: Any) -> Expr:
        op = _txt(n.child_by_field_name("operator"))
        ln, rn = n.child_by_field_name("left"), n.child_by_field_name("right")
        line = _line(n)
        if op in ("&&", "||"):
            a, b = self.expr(ln), self.expr(rn)
            is_and = op == "&&"

            def logic(fr: Frame, m: Mask) -> Any:
                x = a(fr, m)
                x = _truth(x)
                if not isinstance(x, np.ndarray):
                    if is_and and not x:
                        return np.bool_(False)
                    if not is_and and x:
                        return np.bool_(True)
                    return _truth(b(fr, m))
                m2 = m_and(fr, m, x) if is_and else m_andnot(fr, m, x)
                if not m2.any():
                    return x
                y = _truth(b(fr, m2))
                return (x & y) if is_and else (x | y)
            return logic
        if op in ("+", "-") and self.opts.fmad:
            mul = _mul_operand(ln), _mul_operand(rn)
            if mul[0] is not None or mul[1] is not None:
                return self._fma_candidate(op, ln, rn, mul, line)
        a, b = self.expr(ln), self.expr(rn)
        opts = self.opts

        def binop(fr: Frame, m: Mask) -> Any:
            return arith_op(op, a(fr, m), b(fr, m), line, opts)
        return binop

    def _fma_candidate(self, op: str, ln: Any, rn: Any, mul: tuple[Any, Any], line: int) -> Expr:
        """``a*b + c`` (either side, or a subtraction) contracts to one fp32 FMA, as nvcc does by default."""
        opts = self.opts
        left_mul = mul[0] is not None
        mn = mul[0] if left_mul else mul[1]
        other = rn if left_mul else ln
        x, y = self.expr(mn.child_by_field_name("left")), self.expr(mn.child_by_field_name("right"))
        z = self.expr(other)

        def fmaf_(fr: Frame, m: Mask) -> Any:
            if left_mul:
                xv, yv = x(fr, m), y(fr, m)
                zv = z(fr, m)
            else:
                zv = z(fr, m)
                xv, yv = x(fr, m), y(fr, m)
            if not _all_numeric(xv, yv, zv):
                p = arith_op("*", xv, yv, line, opts)
                return arith_op(op, p, zv, line, opts) if left_mul else arith_op(op, zv, p, line, opts)
            t1 = promote(dtype(xv), dtype(yv))
            t2 = promote(t1, dtype(zv))
            if t1 != F32 or t2 != F32:
                p = arith_op("*", xv, yv, line, opts)
                return arith_op(op, p, zv, line, opts) if left_mul else arith_op(op, zv, p, line, opts)
            xv, yv, zv = cast(xv, F32), cast(yv, F32), cast(zv, F32)
            if opts.ftz:
                xv, yv, zv = arith.ftz(xv), arith.ftz(yv), arith.ftz(zv)
            if op == "-":
                if left_mul:
                    zv = -zv  # a*b - c = fma(a, b, -c)
                else:
                    xv = -xv  # c - a*b = fma(-a, b, c)
            r = arith.fma32(xv, yv, zv)
            return arith.ftz(r) if opts.ftz else r
        return fmaf_

    def _unary(self, n: Any) -> Expr:
        op = _txt(n.child_by_field_name("operator"))
        a = self.expr(n.child_by_field_name("argument"))
        line = _line(n)

        def un(fr: Frame, m: Mask) -> Any:
            v = a(fr, m)
            if op == "!":
                return np.logical_not(_truth(v))
            if isinstance(v, Ptr | ArrRef | StructVal):
                raise Unsupported(f"unary {op} on a non-number", line)
            dt = dtype(v)
            if op == "-":
                if dt in (BF16, F16):
                    return cast(-cast(v, F32), dt)
                if dt == BOOL or (dt.itemsize < 4 and dt.kind in "iu"):
                    v = cast(v, I32)
                return -v
            if op == "+":
                return v
            if op == "~":
                if dt == BOOL or dt.kind not in "iu":
                    v = cast(v, I32)
                return np.invert(v)
            raise Unsupported(f"unary operator {op}", line)
        return un

    def _assign(self, n: Any) -> Expr:
        op = _txt(n.child_by_field_name("operator"))
        lvf = self.lvalue(n.child_by_field_name("left"))
        rn = n.child_by_field_name("right")
        line = _line(n)
        opts = self.opts
        if op == "=":
            r = self.expr(rn)

            def asg(fr: Frame, m: Mask) -> Any:
                v = r(fr, m)
                lv = lvf(fr, m)
                lv.set(v, m)
                return v
            return asg
        bop = op[:-1]
        mul = _mul_operand(rn) if bop in ("+", "-") and opts.fmad else None
        if mul is not None:
            x, y = self.expr(mul.child_by_field_name("left")), self.expr(mul.child_by_field_name("right"))

            def fma_asg(fr: Frame, m: Mask) -> Any:
                lv = lvf(fr, m)
                cur = lv.get(m)
                xv, yv = x(fr, m), y(fr, m)
                if _all_numeric(cur, xv, yv) and promote(dtype(xv), dtype(yv)) == F32 \
                        and promote(F32, dtype(cur)) == F32:
                    xv, yv, zv = cast(xv, F32), cast(yv, F32), cast(cur, F32)
                    if opts.ftz:
                        xv, yv, zv = arith.ftz(xv), arith.ftz(yv), arith.ftz(zv)
                    r = arith.fma32(-xv if bop == "-" else xv, yv, zv)
                    if opts.ftz:
                        r = arith.ftz(r)
                else:
                    r = arith_op(bop, cur, arith_op("*", xv, yv, line, opts), line, opts)
                lv.set(r, m)
                return r
            return fma_asg
        rv = self.expr(rn)

        def casg(fr: Frame, m: Mask) -> Any:
            lv = lvf(fr, m)
            cur = lv.get(m)
            v = arith_op(bop, cur, rv(fr, m), line, opts)
            lv.set(v, m)
            return v
        return casg

    def _update(self, n: Any) -> Expr:
        op = _txt(n.child_by_field_name("operator"))
        argn = n.child_by_field_name("argument")
        lvf = self.lvalue(argn)
        prefix = n.children[0].type in ("++", "--")
        line = _line(n)
        one = np.int32(1)
        opts = self.opts

        def upd(fr: Frame, m: Mask) -> Any:
            lv = lvf(fr, m)
            cur = lv.get(m)
            new = arith_op("+" if op == "++" else "-", cur, one, line, opts)
            lv.set(new, m)
            return new if prefix else cur
        return upd

    def _ternary(self, n: Any) -> Expr:
        c = self.expr(n.child_by_field_name("condition"))
        a = self.expr(n.child_by_field_name("consequence"))
        b = self.expr(n.child_by_field_name("alternative"))
        line = _line(n)

        def tern(fr: Frame, m: Mask) -> Any:
            cv = _truth(c(fr, m))
            if not isinstance(cv, np.ndarray):
                return a(fr, m) if cv else b(fr, m)
            mt, me = m_and(fr, m, cv), m_andnot(fr, m, cv)
            ta = mt is None or mt.any()
            tb = me is None or me.any()
            av = a(fr, mt) if ta else None
            bv = b(fr, me) if tb else None
            if av is None:
                return bv
            if bv is None:
                return av
            if isinstance(av, StructVal | Ptr | ArrRef):
                return where(cv, av, bv, line)
            t = promote(dtype(av), dtype(bv))
            out = np.where(cv, cast(av, t), cast(bv, t))
            return out.astype(t) if out.dtype != t else out
        return tern

    # -- calls -------------------------------------------------------------------------------------
    def _call(self, n: Any, value_used: bool) -> Expr:
        from nkieval.cuda import builtins

        line = _line(n)
        fnode = n.child_by_field_name("function")
        argn = n.child_by_field_name("arguments")
        arg_nodes = list(argn.named_children) if argn is not None else []
        targs: list[Any] = []
        if fnode.type == "template_function":
            tal = fnode.child_by_field_name("arguments")
            targs = list(tal.named_children) if tal is not None else []
            fname = _txt(fnode.child_by_field_name("name"))
        else:
            fname = _txt(fnode)
        fname = fname.replace("std::", "").replace("::", "") if fname.startswith(("std::", "::")) else fname
        if fname.startswith(("wmma::", "nvcuda::wmma::")):
            from nkieval.cuda import wmma

            return wmma.call(self, fname.split("::")[-1], [self.expr(a) for a in arg_nodes], line)
        launch = next((c for c in n.children if c.type == "kernel_call_syntax"), None)
        if launch is not None:
            return self._launch_call(n, fname, targs, launch, arg_nodes, line)
        if fname in ("static_cast", "reinterpret_cast", "const_cast"):
            td = targs[0]
            v = self.expr(arg_nodes[0])
            cache: list[CType] = []

            def scast(fr: Frame, m: Mask) -> Any:
                if not cache:
                    cache.append(self.type_descriptor(td))
                return convert(v(fr, m), cache[0], line)
            return scast
        if fname in self.prog.functions:
            fn = self.prog.functions[fname]
            tnames = self.prog.templates.get(fname, ())
            targ_f = [self.expr(t) if t.type != "type_descriptor" else None for t in targs]
            params = None
            arg_fs: list[Any] = []

            def ucall(fr: Frame, m: Mask) -> Any:
                nonlocal params, arg_fs
                if params is None:
                    params = self._params(fn)
                    arg_fs = [self.lvalue(a) if (i < len(params) and params[i][2]) else self.expr(a)
                              for i, a in enumerate(arg_nodes)]
                if any(f is None for f in targ_f):
                    raise Unsupported("a type template argument", line)
                tp = {nm: f(fr, m) for nm, f in zip(tnames, targ_f)}
                args = [f(fr, m) for f in arg_fs]
                callee = Frame(fr.L, fname)
                return self._invoke(fn, fname, callee, args, m, tp, line)
            return ucall
        if fname in _IGNORED_CALLS:
            arg_fs0 = [self.expr(a) for a in arg_nodes if a.type not in ("string_literal",)]

            def ignored(fr: Frame, m: Mask) -> Any:
                for f in arg_fs0:
                    if fname != "cudaFuncSetAttribute":
                        f(fr, m)
                return np.int32(0)
            return ignored
        if fname == "__syncthreads" or fname.startswith("__syncthreads_"):
            return builtins.syncthreads(self, fname, [self.expr(a) for a in arg_nodes], line)
        tname = fname
        if tname in SCALARS or tname in VECTORS or tname in self.structs:
            t = SCALARS.get(tname) or VECTORS.get(tname) or self.structs[tname]
            arg_fs2 = [self.expr(a) for a in arg_nodes]
            return lambda fr, m: self._construct(t, [f(fr, m) for f in arg_fs2], line)
        impl = builtins.lookup(self, fname, arg_nodes, value_used, line)
        if impl is None:
            raise Unsupported(f"call of {fname}", line)
        return builtins.weighted(self, fname, impl)

    def _launch_call(self, n: Any, fname: str, targs: list[Any], launch: Any, arg_nodes: list[Any],
                     line: int) -> Expr:
        cfg = [self.expr(c) for c in launch.named_children]
        arg_fs = [self.expr(a) for a in arg_nodes]
        targ_f = [self.expr(t) for t in targs]

        def do_launch(fr: Frame, m: Mask) -> Any:
            if is_empty(m):
                return np.int32(0)
            fn = self.prog.functions.get(fname)
            if fn is None:
                raise CudaError(f"launch of unknown kernel {fname}", line)
            vals = [f(fr, m) for f in cfg]
            smem = int(vals[2]) if len(vals) > 2 else 0
            tp = dict(zip(self.prog.templates.get(fname, ()), [f(fr, m) for f in targ_f]))
            self.launch(fn, fname, vals[0], vals[1], smem, [f(fr, m) for f in arg_fs], tp, line)
            return np.int32(0)
        return do_launch


class _Const(LV):
    __slots__ = ("v",)

    def __init__(self, v: Any) -> None:
        self.v = v

    def get(self, m: Mask) -> Any:
        return self.v

    def set(self, v: Any, m: Mask) -> None:
        raise CudaError("assignment to a value that is not an lvalue")

    def ctype(self) -> CType:
        return type_of(self.v)


# ---------------------------------------------------------------------------------------------
# helpers


def _fragment_type(txt: str, line: int) -> FragT:
    import re

    m = re.search(r"fragment\s*<\s*(?:[\w:]*::)?(\w+)\s*,\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*,\s*([\w:]+)"
                  r"\s*(?:,\s*(?:[\w:]*::)?(\w+)\s*)?>", txt)
    if m is None:
        raise Unsupported(f"type {txt}", line)
    use, mm, nn, kk, tname, layout = m.groups()
    rows, cols = {"matrix_a": (int(mm), int(kk)), "matrix_b": (int(kk), int(nn)),
                  "accumulator": (int(mm), int(nn))}[use]
    st = SCALARS.get(tname.split("::")[-1])
    if st is None:
        raise Unsupported(f"fragment element type {tname}", line)
    return FragT(use, rows, cols, st.dtype, layout or "")


def _dim3(v: Any) -> tuple[int, int, int]:
    if isinstance(v, StructVal):
        return (int(v.fields["x"]), int(v.fields["y"]), int(v.fields["z"]))
    if isinstance(v, np.ndarray):
        v = v.reshape(-1)[0]
    return (int(v), 1, 1)


def _zero(t: CType) -> Any:
    if isinstance(t, Scalar):
        return t.dtype.type(0)
    if isinstance(t, StructT):
        return StructVal(t, {f: _zero(ft) for f, ft in t.fields})
    if isinstance(t, PtrT):
        return Ptr(None, 0, t.elem)
    return None


def _truth(v: Any) -> Any:
    if isinstance(v, Ptr):
        return np.bool_(v.buf is not None)
    if isinstance(v, np.ndarray):
        return v if v.dtype == BOOL else v != 0
    return np.bool_(bool(v))


def offset(base: Any, i: Any, step: int) -> Any:
    """``base + i * step`` (element offsets). A unit step, the common one, makes no product array, and a pointer
    at the start of its buffer (a kernel argument) no sum array: the result is then ``i`` itself, which no one
    changes (the executor's values are never written in place)."""
    d = i if step == 1 else i * step
    if isinstance(d, np.ndarray) and not isinstance(base, np.ndarray) and base == 0:
        return d
    return base + d


class IndexSite:
    """One subscript in the kernel's text, finding the element offsets it made before when it meets the same
    operands again: a loop over ``k`` reads ``As[threadIdx.y][k]`` with the same ``threadIdx.y`` array (the same
    object) every time and the same ``k`` once per tile, so each of its offset arrays (a pass over the group's
    lanes, and the bounds check of the access after it: ``_check``) is made once. An array operand is known by
    identity, which is safe because the executor never writes a value in place, and the table holds it, so its
    id is not reused while kept; a number by its value and type. An offset is kept only when its array operands
    were met before (by this subscript at its last call, or kept by another: ``p[i][j]``'s second subscript sees
    the first's), so an index computed afresh at every call keeps nothing, and a subscript that meets only such
    stops looking after a few calls in a row. The kept offsets are the process's (:data:`_KEPT_BY_KEY`),
    dropped when a run ends (``runner.run_host``), within :data:`KEPT_MAX_BYTES`."""

    __slots__ = ("fresh", "keys", "last", "no")

    def __init__(self) -> None:
        self.no = next(_SITE_NUMBERS)
        self.fresh = 0  # misses in a row with a new array operand (-1: the site stopped looking)
        self.last = (0, 0)  # the ids of the last call's array operands (0: a number; ids only, nothing held)
        self.keys: list[tuple[Any, ...]] = []  # its entries in the table

    def offset(self, base: Any, raw: Any, step: int, line: int) -> Any:
        """``base + raw * step``, ``raw`` the subscript's value (``_as_index`` of it)."""
        ab, ai = type(base) is np.ndarray, type(raw) is np.ndarray
        if not (ab or ai) or self.fresh < 0:
            return offset(base, _as_index(raw, line), step)
        key = (self.no, id(base) if ab else base, type(base), id(raw) if ai else raw, type(raw), step)
        kept = _KEPT_BY_KEY.get(key)
        if kept is not None and (kept.base is base or not ab) and (kept.raw is raw or not ai):
            self.fresh = 0
            return kept.out
        out = offset(base, _as_index(raw, line), step)
        ids = (key[1] if ab else 0, key[3] if ai else 0)
        last = self.last
        self.last = ids
        if (ab and ids[0] != last[0] and _kept_of(base) is None) or \
                (ai and ids[1] != last[1] and _kept_of(raw) is None):
            # (an operand not met before: kept only once it comes again, so that an index computed afresh at
            # every call has nothing kept, and a site that meets only such stops looking)
            self.fresh += 1
            if self.fresh >= _FRESH_MAX:
                self.fresh = -1
                self._release()
            return out
        self.fresh = 0
        if type(out) is np.ndarray and len(self.keys) < _SITE_MAX and _keep(key, _KeptOffset(base, raw, out)):
            self.keys.append(key)
        return out

    def _release(self) -> None:
        """Drop this site's entries from the table (a site that stopped looking never reads them)."""
        for key in self.keys:
            kept = _KEPT_BY_KEY.pop(key, None)  # (None: dropped already, by another thread's run ending)
            if kept is not None:
                _KEPT_BYTES[0] -= kept.nbytes()
                if _KEPT.get(id(kept.out)) is kept:  # (another site's entry may name the same array)
                    del _KEPT[id(kept.out)]
        self.keys = []


class _KeptOffset:
    """An element-offset array made by an :class:`IndexSite`, with what it was made of and the size of the smallest
    buffer it was found in bounds of (every offset below it; -1: not checked yet)."""

    __slots__ = ("base", "in_bounds", "out", "raw")

    def __init__(self, base: Any, raw: Any, out: np.ndarray) -> None:
        self.base, self.raw, self.out, self.in_bounds = base, raw, out, -1

    def nbytes(self) -> int:
        """The bytes of the arrays it holds (an operand that is the result itself counted once)."""
        return sum(a.nbytes for a in (self.base, self.raw) if type(a) is np.ndarray and a is not self.out) \
            + self.out.nbytes


#: calls in a row with a new array operand after which a subscript stops looking for kept offsets
_FRESH_MAX = 8
#: offset arrays one subscript keeps at most
_SITE_MAX = 64
#: bytes of arrays kept at most, all together (offsets and their operands). Larger tables made the cause search of a
#: kernel over 2^17 lanes slower in a fresh process (0.79x with 64 MiB and no cap per entry; docs/cuda.md)
KEPT_MAX_BYTES = 8 << 20
#: bytes of one entry at most (larger ones, a group of more than about 2^16 lanes, are never kept)
KEPT_ENTRY_MAX_BYTES = 1 << 20
_SITE_NUMBERS = itertools.count(1)
_KEPT_BYTES = [0]
#: the kept offsets by site and operands, and by the offset array's id (for the bounds check, ``_check``)
_KEPT_BY_KEY: dict[tuple[Any, ...], _KeptOffset] = {}
_KEPT: dict[int, _KeptOffset] = {}


def _kept_of(a: np.ndarray) -> _KeptOffset | None:
    """The entry of ``a`` if it is a kept offset array (which its subscript gives again when it meets the same
    operands, and whose bounds check ``_check`` reads), else None."""
    kept = _KEPT.get(id(a))
    return kept if kept is not None and kept.out is a else None


def _keep(key: tuple[Any, ...], kept: _KeptOffset) -> bool:
    """Keep ``kept`` under ``key``; whether it was kept (not when the table is full)."""
    n = kept.nbytes()
    if n > KEPT_ENTRY_MAX_BYTES or _KEPT_BYTES[0] + n > KEPT_MAX_BYTES:
        return False
    _KEPT_BYTES[0] += n
    _KEPT_BY_KEY[key] = kept
    _KEPT[id(kept.out)] = kept
    return True


def clear_kept() -> None:
    """Drop every kept offset array (at a run's end: no later run meets their operands)."""
    _KEPT_BY_KEY.clear()
    _KEPT.clear()
    _KEPT_BYTES[0] = 0


def _as_index(i: Any, line: int) -> Any:
    if isinstance(i, np.ndarray):
        if i.dtype.kind not in "iub":
            raise CudaError("array subscript is not an integer", line)
        if i.dtype == np.uint64:  # (the same bits: C's conversion to a signed offset; no copy)
            return i.view(np.int64)
        return i.astype(np.int64, copy=False)  # (no copy where it is one already: values are never written in place)
    if isinstance(i, StructVal):
        raise CudaError("array subscript is not an integer", line)
    return int(i)


def _mul_operand(n: Any) -> Any:
    while n.type == "parenthesized_expression" and n.named_children:
        n = n.named_children[0]
    if n.type == "binary_expression" and _txt(n.child_by_field_name("operator")) == "*":
        return n
    return None


def _all_numeric(*vs: Any) -> bool:
    return all(isinstance(v, np.ndarray | np.generic) for v in vs)


def _literal(s: str, line: int) -> Any:
    t = s.lower().replace("'", "")
    is_hex = t.startswith("0x")
    if not is_hex and ("." in t or "e" in t or t.endswith("f")):
        if t.endswith("f"):
            return np.float32(float(t[:-1]))
        return np.float64(float(t.rstrip("l")))
    suffix = ""
    while t and t[-1] in "ul":
        suffix = t[-1] + suffix
        t = t[:-1]
    if is_hex:
        v = int(t, 16)
    elif t.startswith("0b"):
        v = int(t[2:], 2)
    elif len(t) > 1 and t.startswith("0"):
        v = int(t, 8)
    else:
        v = int(t)
    uns = "u" in suffix
    longs = suffix.count("l")
    if longs == 0 and not uns and v < 2**31:
        return np.int32(v)
    if longs == 0 and (uns or is_hex) and v < 2**32:
        return np.uint32(v)
    if not uns and v < 2**63:
        return np.int64(v)
    return np.uint64(v)


def arith_op(op: str, a: Any, b: Any, line: int, opts: Any) -> Any:
    """``a op b`` with C's conversions; fp32 results rounded per operation (and flushed with FTZ)."""
    if isinstance(a, ArrRef):
        a = decay(a)
    if isinstance(b, ArrRef):
        b = decay(b)
    if isinstance(a, Ptr) or isinstance(b, Ptr):
        return _ptr_op(op, a, b, line)
    if isinstance(a, StructVal) or isinstance(b, StructVal):
        raise Unsupported(f"operator {op} on a struct", line)
    da, db = dtype(a), dtype(b)
    if op in ("<<", ">>"):
        t = promote(da, da)
        av = cast(a, t)
        bv = cast(b, t)
        r = np.left_shift(av, bv) if op == "<<" else np.right_shift(av, bv)
        return r.astype(t) if isinstance(r, np.ndarray) else t.type(r)
    t = promote(da, db)
    work = F32 if t in (BF16, F16) else t
    av, bv = cast(a, work), cast(b, work)
    if op in ("<", ">", "<=", ">=", "==", "!="):
        if op == "<":
            return av < bv
        if op == ">":
            return av > bv
        if op == "<=":
            return av <= bv
        if op == ">=":
            return av >= bv
        if op == "==":
            return av == bv
        return av != bv
    ftz = opts.ftz and work == F32
    if ftz:
        av, bv = arith.ftz(av), arith.ftz(bv)
    if op == "+":
        r = av + bv
    elif op == "-":
        r = av - bv
    elif op == "*":
        r = av * bv
    elif op == "/":
        if work == F32 and not opts.prec_div:
            r = arith.fast_div(av, bv)
        else:
            r = arith.c_div(av, bv, work)
    elif op == "%":
        r = arith.c_mod(av, bv, work)
    elif op == "&":
        r = av & bv
    elif op == "|":
        r = av | bv
    elif op == "^":
        r = av ^ bv
    else:
        raise Unsupported(f"operator {op}", line)
    if isinstance(r, np.ndarray):
        if r.dtype != work:
            r = r.astype(work)
    elif not isinstance(r, np.generic) or r.dtype != work:
        r = work.type(r)
    if ftz:
        r = arith.ftz(r)
    if t != work:
        r = cast(r, t)
    return r


def _ptr_op(op: str, a: Any, b: Any, line: int) -> Any:
    if isinstance(a, Ptr) and isinstance(b, Ptr):
        if op == "-":
            return (np.asarray(a.off) - np.asarray(b.off)).astype(np.int64) // units(a.elem)
        if op in ("==", "!=", "<", ">", "<=", ">="):
            same = a.buf is b.buf
            if op == "==":
                return np.bool_(same) & (np.asarray(a.off) == np.asarray(b.off))
            if op == "!=":
                return ~(np.bool_(same) & (np.asarray(a.off) == np.asarray(b.off)))
            return {"<": np.less, ">": np.greater, "<=": np.less_equal, ">=": np.greater_equal}[op](a.off, b.off)
        raise Unsupported(f"operator {op} on two pointers", line)
    if isinstance(b, Ptr) and op == "+":
        a, b = b, a
    if isinstance(a, Ptr) and op in ("+", "-"):
        i = _as_index(b, line)
        step = units(a.elem)
        off = offset(a.off, i, step) if op == "+" else a.off - i * step
        return Ptr(a.buf, off, a.elem)
    if isinstance(a, Ptr) and op in ("==", "!="):
        isnull = a.buf is None
        return np.bool_(isnull if op == "==" else not isnull)
    raise Unsupported(f"operator {op} on a pointer", line)


_ = (F64, FP8_E4M3, I64, U64, scalar_of)
