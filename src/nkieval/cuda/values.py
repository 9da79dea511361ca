"""C types and run-time values of the CUDA executor.

A value is one of:

* a NumPy scalar (the same for every thread: *uniform*) or a 1-D NumPy array with one element per
  thread (*varying*); its dtype is its C type (``int`` is int32, ``unsigned`` uint32, ``long long``
  int64, ``size_t`` uint64, ``float`` float32, ``double`` float64, ``__nv_bfloat16`` bfloat16, ...);
* a :class:`Ptr` (a buffer, an offset in the buffer's elements per thread, the pointee type);
* an :class:`ArrRef` (a local or ``__shared__`` array: a pointer plus the remaining dimensions);
* a :class:`StructVal` (a struct, ``float4``, ``dim3``: one value per field).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from math import prod
from typing import Any

import ml_dtypes
import numpy as np

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
FP8_E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)
FP8_E5M2 = np.dtype(ml_dtypes.float8_e5m2)
F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)
I32 = np.dtype(np.int32)
U32 = np.dtype(np.uint32)
I64 = np.dtype(np.int64)
U64 = np.dtype(np.uint64)
BOOL = np.dtype(np.bool_)
LOW_FLOATS = (BF16, F16, FP8_E4M3, FP8_E5M2)


class CudaError(Exception):
    """The executor could not run the kernel: ``where`` is ``kernel.cu:LINE`` (or empty)."""

    def __init__(self, message: str, line: int | None = None) -> None:
        self.line = line
        self.message = message
        super().__init__(f"{message} at kernel.cu:{line}" if line else message)


class Unsupported(CudaError):
    """A construct outside the executor's subset: "not supported: <construct> at kernel.cu:LINE"."""

    def __init__(self, construct: str, line: int | None = None) -> None:
        super().__init__(f"not supported: {construct}", line)


class ExecutorTimeout(CudaError):
    """The run passed the work it was given (``run_host(..., work_limit=)``, in work units: :func:`executor_work`),
    or the CPU time (``time_limit_s=``, in :func:`executor_seconds`)."""


class ExecutorSafetyNet(RuntimeError):
    """A run given a work limit ran :data:`SAFETY_FACTOR` times the CPU time that work takes at the calibration
    (:data:`WORK_PER_S`) without reaching it: the machine, not the kernel, is at fault (far slower than the one
    calibrated, or stalled). Never a :class:`CudaError`: a review does not turn it into a timeout or a fault
    (what the candidate's report says would then depend on the machine); it propagates, a harness error
    (``nkieval review`` exits 3: retry)."""

    def __init__(self, line: int | None = None) -> None:
        where = f" at kernel.cu:{line}" if line else ""
        super().__init__(f"the CUDA executor's CPU-time safety net fired{where}: the run took over "
                         f"{SAFETY_FACTOR:g}x the CPU time its work limit allows at the calibration (a slow or "
                         "stalled machine: a harness fault, retry)")


#: work units (:func:`executor_work`) the executor runs per CPU second on the calibration machine: the review's
#: budgets, given in seconds there, are converted at this rate (:func:`work_units`). Fitted with
#: :data:`nkieval.cuda.interp.STATEMENT_WORK` and ``NODE_WORK`` over 509 runs of the 46 built-in port tasks (each
#: task's kernel, exact rewrite and six mutants on its three smallest shapes): CPU seconds / calibrated seconds
#: has median 1.04 (p10 0.72, p90 1.53) over all of them, 1.02 (p10 0.67, p90 1.45, at most 1.77) over the 101
#: runs of 100 ms or more (docs/cuda.md, "Work units"). Changing it changes which runs fit a budget, so reports:
#: a deliberate, documented change
WORK_PER_S = 3_000_000_000
#: a run given a work limit stops as a harness fault (:class:`ExecutorSafetyNet`) past this many times the CPU
#: seconds the limit takes at :data:`WORK_PER_S`, plus :data:`SAFETY_FLOOR_S`: above the fit's spread (1.8x for
#: the runs of 100 ms or more) on a machine some four times slower than the calibration's, or the same one loaded
SAFETY_FACTOR = 8.0
SAFETY_FLOOR_S = 1.0

_WORK = threading.local()


def work_units(seconds: float) -> int:
    """Work units of ``seconds`` of executor CPU time at the calibration (:data:`WORK_PER_S`)."""
    return round(seconds * WORK_PER_S)


def safety_seconds(work_limit: int) -> float:
    """The CPU seconds past which a run given ``work_limit`` work units is stopped as a harness fault."""
    return SAFETY_FACTOR * work_limit / WORK_PER_S + SAFETY_FLOOR_S


def executor_work() -> int:
    """The clock of the review's executor budgets: the work units (statements and loop iterations run, each
    weighted by the lanes it runs over: :data:`nkieval.cuda.interp.STATEMENT_WORK`; costly math builtins by
    their lanes too: :data:`nkieval.cuda.builtins.MATH_LANE_WORK`) of every run the calling
    thread has made, counted by the interpreter itself. Deterministic: the same runs count the same on any
    machine, under any load, so what a review covers is a function of its inputs only."""
    return getattr(_WORK, "total", 0)


def add_work(units: int) -> None:
    """Charge ``units`` to the calling thread's :func:`executor_work` (a run's count, when it ends)."""
    _WORK.total = getattr(_WORK, "total", 0) + int(units)


def executor_seconds() -> float:
    """The clock of the executor's CPU-time limits (the safety net of a work limit): CPU seconds of the calling
    thread (the executor runs in its caller's thread). Not a budget's clock: CPU seconds depend on the machine
    (:func:`executor_work` does not)."""
    return time.thread_time()


class KernelFault(CudaError):
    """The kernel did something a GPU would fault on or leave undefined (out-of-bounds access, a
    barrier reached by part of a block)."""


@dataclass(frozen=True)
class Scalar:
    name: str
    dtype: np.dtype


@dataclass(frozen=True)
class PtrT:
    elem: CType


@dataclass(frozen=True)
class StructT:
    name: str
    fields: tuple[tuple[str, CType], ...]

    def field_type(self, f: str) -> CType:
        for n, t in self.fields:
            if n == f:
                return t
        raise KeyError(f)

    def field_offset(self, f: str) -> int:
        off = 0
        for n, t in self.fields:
            if n == f:
                return off
            off += units(t)
        raise KeyError(f)


@dataclass(frozen=True)
class ArrT:
    elem: CType
    dims: tuple[int, ...]


@dataclass(frozen=True)
class FragT:
    """``wmma::fragment<use, M, N, K, T, layout>``: one matrix per warp."""

    use: str  # matrix_a | matrix_b | accumulator
    rows: int
    cols: int
    dtype: np.dtype
    layout: str  # row_major | col_major | "" (accumulator)


class Frag:
    """A fragment's value: ``data[warp, rows, cols]`` for the warps running together."""

    __slots__ = ("data", "ftype")

    def __init__(self, ftype: FragT, data: np.ndarray) -> None:
        self.ftype = ftype
        self.data = data


CType = Scalar | PtrT | StructT | ArrT | FragT

SCALARS: dict[str, Scalar] = {}
for _names, _dt in (
    (("float",), F32), (("double",), F64), (("int", "signed", "signed int", "int32_t", "cudaError_t"), I32),
    (("unsigned", "unsigned int", "uint32_t", "uint"), U32),
    (("long long", "long long int", "long", "long int", "int64_t", "ptrdiff_t", "signed long long"), I64),
    (("unsigned long long", "unsigned long", "size_t", "uint64_t", "unsigned long long int"), U64),
    (("bool",), BOOL), (("char", "signed char", "int8_t"), np.dtype(np.int8)),
    (("unsigned char", "uint8_t"), np.dtype(np.uint8)), (("short", "int16_t"), np.dtype(np.int16)),
    (("unsigned short", "uint16_t"), np.dtype(np.uint16)),
    (("__nv_bfloat16", "nv_bfloat16", "bfloat16"), BF16), (("__half", "half"), F16),
    (("__nv_fp8_e4m3",), FP8_E4M3), (("__nv_fp8_e5m2",), FP8_E5M2),
):
    for _n in _names:
        SCALARS[_n] = Scalar(_n, np.dtype(_dt))


def _vec(name: str, dt: np.dtype, n: int) -> StructT:
    return StructT(name, tuple((f, Scalar(str(dt), dt)) for f in "xyzw"[:n]))


VECTORS: dict[str, StructT] = {
    "float2": _vec("float2", F32, 2), "float3": _vec("float3", F32, 3), "float4": _vec("float4", F32, 4),
    "int2": _vec("int2", I32, 2), "int4": _vec("int4", I32, 4), "double2": _vec("double2", F64, 2),
    "dim3": _vec("dim3", U32, 3), "uint3": _vec("uint3", U32, 3),
}


def scalar_of(dt: np.dtype) -> Scalar:
    return Scalar(str(dt), np.dtype(dt))


def units(t: CType) -> int:
    """Size of ``t`` in elements of the buffer holding it (a struct's fields are one element each)."""
    if isinstance(t, StructT):
        return sum(units(ft) for _, ft in t.fields)
    if isinstance(t, ArrT):
        return prod(t.dims) * units(t.elem)
    return 1


def base_dtype(t: CType, line: int | None = None) -> np.dtype:
    """The dtype of a buffer holding values of ``t`` (a struct's fields must share one)."""
    if isinstance(t, Scalar):
        return t.dtype
    if isinstance(t, ArrT):
        return base_dtype(t.elem, line)
    if isinstance(t, StructT):
        dts = {base_dtype(ft, line) for _, ft in t.fields}
        if len(dts) != 1:
            raise Unsupported(f"a struct with fields of different types in memory ({t.name})", line)
        return dts.pop()
    return np.dtype(np.int64)  # pointer arrays: not used in memory


def sizeof(t: CType) -> int:
    if isinstance(t, Scalar):
        return t.dtype.itemsize
    if isinstance(t, PtrT):
        return 8
    if isinstance(t, StructT):
        return sum(sizeof(ft) for _, ft in t.fields)
    return prod(t.dims) * sizeof(t.elem)


class Buffer:
    """A flat region of memory: a kernel argument, a workspace, a ``__shared__`` or local array."""

    __slots__ = ("data", "dirty", "growable", "name", "race", "space", "writer")

    def __init__(self, data: np.ndarray, name: str, space: str = "global", growable: bool = False) -> None:
        self.data = data
        self.name = name
        self.space = space
        self.growable = growable
        #: ``__shared__`` memory: the lane that wrote each element since the last barrier (-1: none), and the
        #: first read-after-write race seen, (line, reading lane, writing lane, element)
        self.writer: np.ndarray | None = np.full(data.size, -1, np.int64) if space == "shared" else None
        #: whether ``writer`` holds any lane (an element written since the last barrier): a read of a buffer with
        #: none cannot race, so it skips the check
        self.dirty = False
        self.race: tuple[int, int, int, int] | None = None

    def grow(self, n: int) -> None:
        if n > self.data.size:
            new = np.zeros(max(n, 2 * self.data.size), self.data.dtype)
            new[: self.data.size] = self.data
            self.data = new


class Ptr:
    """A pointer: ``buf`` and an offset ``off`` (uniform int or int64 array) in the buffer's elements."""

    __slots__ = ("buf", "elem", "off")

    def __init__(self, buf: Buffer | None, off: Any, elem: CType) -> None:
        self.buf = buf
        self.off = off
        self.elem = elem


class ArrRef:
    """An array object (local, ``__shared__``, or a row of one): decays to a pointer to its first element."""

    __slots__ = ("dims", "ptr")

    def __init__(self, ptr: Ptr, dims: tuple[int, ...]) -> None:
        self.ptr = ptr
        self.dims = dims


class StructVal:
    __slots__ = ("fields", "stype")

    def __init__(self, stype: StructT, fields: dict[str, Any]) -> None:
        self.stype = stype
        self.fields = fields


def type_of(v: Any) -> CType:
    if isinstance(v, Ptr):
        return PtrT(v.elem)
    if isinstance(v, ArrRef):
        return PtrT(v.ptr.elem)
    if isinstance(v, StructVal):
        return v.stype
    return scalar_of(np.asarray(v).dtype if not isinstance(v, np.generic) else v.dtype)
