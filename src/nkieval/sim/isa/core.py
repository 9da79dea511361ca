"""The instruction framework: registry, operand reading/writing, checks, trace recording.

An instruction is a plain function ``fn(ctx, *args)`` registered with :func:`instruction`;
the wrapper finds the running program, gates by generation, records the kernel source line
and attaches it to any validation error. Checks are small functions that raise
``NkiValidationError`` naming the instruction, the operand and the rule.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from nkieval.sim import dtypes as dt
from nkieval.sim.context import SimContext, current, user_frame
from nkieval.sim.errors import NkiValidationError
from nkieval.sim.tensor import NkiTensor
from nkieval.sim.trace import OperandAccess, TraceRecord


@dataclass(frozen=True)
class InstructionInfo:
    name: str
    engine: str  # default engine
    min_generation: int
    fn: Callable[..., Any]
    doc: str


INSTRUCTIONS: dict[str, InstructionInfo] = {}
_GEN_NAMES = {2: "trn1 (NeuronCore-v2)", 3: "trn2 (NeuronCore-v3)", 4: "trn3 (NeuronCore-v4)"}


def instruction(name: str, engine: str, *, min_generation: int = 2) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register an ISA instruction. The decorated function receives the SimContext first."""

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            ctx = current()
            f = user_frame(2)
            ctx.loc = (f.f_code.co_filename, f.f_lineno, f.f_code.co_name) if f is not None else (None, None, None)
            if ctx.target.generation < min_generation:
                raise NkiValidationError(
                    f"not available on {_GEN_NAMES[ctx.target.generation]}; needs "
                    f"{_GEN_NAMES[min_generation]} or later", instruction=name, rule="generation",
                    location=_loc(ctx))
            try:
                return fn(ctx, *args, **kwargs)
            except NkiValidationError as e:
                if e.instruction is None:
                    e.instruction = name
                raise e.with_location(_loc(ctx)) from None
            except TypeError as e:
                if e.__traceback__ is not None and e.__traceback__.tb_next is None:
                    # The call itself did not match the signature: the kernel's mistake.
                    raise NkiValidationError(str(e).replace(fn.__name__ + "()", name + "()"), instruction=name,
                                             rule="argument", location=_loc(ctx)) from None
                raise

        wrapper.__signature__ = _public_signature(fn)  # type: ignore[attr-defined]
        INSTRUCTIONS[name] = InstructionInfo(name, engine, min_generation, wrapper, (fn.__doc__ or "").strip())
        return wrapper

    return deco


def _public_signature(fn: Callable[..., Any]) -> Any:
    import inspect

    sig = inspect.signature(fn)
    return sig.replace(parameters=list(sig.parameters.values())[1:])


def _loc(ctx: SimContext) -> str | None:
    file, line, _ = getattr(ctx, "loc", (None, None, None))
    return f"{os.path.basename(file)}:{line}" if file else None


# -- checks -------------------------------------------------------------------------
def tensor_arg(t: Any, role: str) -> NkiTensor:
    if not isinstance(t, NkiTensor):
        raise NkiValidationError(f"{role} must be an NKI tensor, got {type(t).__name__}", operand=role, rule="argument")
    return t


def check_buffer(t: NkiTensor, role: str, allowed: Iterable[str], why: str = "") -> None:
    kind = t.alloc.buffer.kind
    allowed = tuple(allowed)
    if kind not in allowed:
        exp = "|".join(allowed)
        extra = f" ({why})" if why else ""
        raise NkiValidationError(
            f"expected operand '{role}' to be in address space '{exp}', but got a tensor in '{kind}' instead{extra}",
            operand=role, rule="buffer")


def check_partitions(ctx: SimContext, t: NkiTensor, role: str) -> int:
    p = t.shape[0]
    pmax = ctx.target.partitions
    if p > pmax:
        raise NkiValidationError(f"{role} partition dimension {p} exceeds maximum {pmax}", operand=role,
                                 rule="partition-limit")
    return p


def check_same_partitions(pairs: list[tuple[str, NkiTensor]]) -> None:
    (r0, t0), *rest = pairs
    for r, t in rest:
        if t.shape[0] != t0.shape[0]:
            raise NkiValidationError(
                f"number of partitions mismatch: {r0}{list(t0.shape)} has {t0.shape[0]}, {r}{list(t.shape)} has "
                f"{t.shape[0]}", operand=r, rule="partition-mismatch")


def free_size(t: NkiTensor) -> int:
    return t.size // t.shape[0] if t.ndim else 1


def check_same_free(pairs: list[tuple[str, NkiTensor]]) -> None:
    (r0, t0), *rest = pairs
    for r, t in rest:
        if free_size(t) != free_size(t0):
            raise NkiValidationError(
                f"elements per partition mismatch: {r0}{list(t0.shape)} has {free_size(t0)}, {r}{list(t.shape)} has "
                f"{free_size(t)}", operand=r, rule="shape-mismatch")


def check_engine_operands(ctx: SimContext, pairs: list[tuple[str, NkiTensor]], *, allow_psum: bool = True,
                          engine: str = "vector") -> None:
    """Common checks for a compute-engine instruction's tensor operands."""
    allowed = ("sbuf", "psum") if allow_psum else ("sbuf",)
    why = "" if allow_psum else f"the {engine} engine cannot access PSUM"
    for r, t in pairs:
        check_buffer(t, r, allowed, why)
        check_partitions(ctx, t, r)
    check_same_partitions(pairs)


def check_not_both_psum(a: tuple[str, NkiTensor], b: tuple[str, NkiTensor]) -> None:
    if a[1].alloc.buffer.kind == "psum" and b[1].alloc.buffer.kind == "psum":
        raise NkiValidationError(f"{a[0]} and {b[0]} cannot both be in PSUM", operand=b[0], rule="buffer")


def check_dtype(t: NkiTensor, role: str, allowed: Iterable[dt.DType], what: str = "") -> None:
    allowed = tuple(allowed)
    if t.dtype not in allowed:
        names = ", ".join(d.name for d in allowed)
        raise NkiValidationError(f"{role} dtype {t.dtype} is not supported{what}; expected one of {names}",
                                 operand=role, rule="dtype")


def check_free_limit(ctx: SimContext, t: NkiTensor, role: str) -> None:
    n = free_size(t)
    if t.alloc.buffer.kind == "psum":
        limit = ctx.target.vector_psum_free_max
        where = "PSUM"
    else:
        limit = ctx.target.vector_sbuf_free_max
        where = "SBUF"
    if n > limit:
        raise NkiValidationError(f"{role} has {n} elements per partition, exceeding the {limit}-element limit for "
                                 f"{where} operands of compute engines", operand=role, rule="instruction-limit")


# -- reading and writing ----------------------------------------------------------------
def read(t: NkiTensor) -> np.ndarray:
    """Operand values in the engines' fp32 compute type (ints as exact float64 when wide)."""
    a = t.data
    if a.dtype == np.float32:
        return a
    if a.dtype.kind in "iu" and a.dtype.itemsize >= 4:
        return a.astype(np.float64)
    return a.astype(np.float32)


def read_exact(t: NkiTensor) -> np.ndarray:
    return np.asarray(t.data)


def flag_view(t: NkiTensor, flags: np.ndarray) -> np.ndarray:
    """The view of a per-element flag array (same shape as storage) matching ``t``'s view."""
    isz = t.data.dtype.itemsize
    off = t.offset
    strides = tuple((s // isz) * flags.itemsize for s in t.data.strides)
    return np.lib.stride_tricks.as_strided(flags.reshape(-1)[off:], shape=t.shape, strides=strides)


def write(ctx: SimContext, t: NkiTensor, values: Any, *, matmul: bool = False) -> None:
    """Round ``values`` into ``t`` (shape matched per partition), mark PSUM state."""
    v = np.asarray(values)
    if v.shape != t.shape:
        if v.size == t.size:
            v = v.reshape(t.shape)
        else:
            v = np.broadcast_to(v, t.shape)
    if v.dtype == t.data.dtype and not t.dtype.tf32:
        t.data[...] = v
    else:
        t.data[...] = dt.cast(v, t.dtype, fp8_overflow=ctx.options.fp8_overflow, precise=ctx.options.precise_fp)
    a = t.alloc
    a.written = True
    if a.mm_written is not None:
        flag_view(t, a.mm_written)[...] = matmul
        flag_view(t, a.other_written)[...] = not matmul


def scalar_or_vector(ctx: SimContext, x: Any, role: str, p: int) -> np.ndarray | float:
    """An fp32 scalar operand: Python number, or an on-chip [P, 1] tensor broadcast along free dims."""
    if isinstance(x, NkiTensor):
        if x.alloc.buffer.kind == "hbm":
            raise NkiValidationError(f"{role} vector must be in SBUF or PSUM", operand=role, rule="buffer")
        if x.shape[0] != p or free_size(x) != 1:
            raise NkiValidationError(f"{role} must be a scalar or a [{p}, 1] vector, got {list(x.shape)}",
                                     operand=role, rule="shape-mismatch")
        return read(x).reshape(p, 1).astype(np.float32)
    if isinstance(x, bool | int | float | np.number):
        return np.float32(x)
    raise NkiValidationError(f"{role} must be a number or a [P, 1] tensor, got {type(x).__name__}", operand=role,
                             rule="argument")


def as2d(values: np.ndarray, p: int) -> np.ndarray:
    return values.reshape(p, -1)


# -- trace ------------------------------------------------------------------------------
def record(ctx: SimContext, opcode: str, engine: str, accesses: list[OperandAccess], **attrs: Any) -> None:
    if not ctx.options.record_trace:
        return
    file, line, func = getattr(ctx, "loc", (None, None, None))
    ctx.trace.append(TraceRecord(0, opcode, engine, accesses, attrs, ctx.program_id, ctx.loop_context, file, line,
                                 func))


def resolve_engine(engine: Any, default: str, allowed: Iterable[str], instruction_name: str) -> str:
    """Map an ``engine=`` argument (nisa.engine enum or None) to an engine name, checking legality."""
    name = getattr(engine, "name", engine)
    if name in (None, "unknown", 0):
        return default
    name = str(name)
    allowed = tuple(allowed)
    if name not in allowed:
        raise NkiValidationError(f"engine {name} is not supported; use one of {', '.join(allowed)}",
                                 operand="engine", rule="argument")
    return name
