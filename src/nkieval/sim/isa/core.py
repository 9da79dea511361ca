"""The instruction framework: registry, operand reading/writing, checks, trace recording.

An instruction is a plain function ``fn(ctx, *args)`` registered with :func:`instruction`;
the wrapper finds the running program, gates by generation, records the kernel source line
and attaches it to any validation error. Checks are small functions that raise
``NkiValidationError`` naming the instruction, the operand and the rule.
"""

from __future__ import annotations

import enum
import functools
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from nkieval.sim import dtypes as dt
from nkieval.sim.context import SimContext, current, dry_run, frame_code_location, user_frame
from nkieval.sim.errors import NkiValidationError
from nkieval.sim.fpstate import IGNORE_ALL
from nkieval.sim.indirect import indirect_call
from nkieval.sim.ops import ARITH, BINARY, BITVEC, GEN4_ONLY, SIMULATOR_ONLY, UNARY, Op

# the storage reads are part of this framework's reading API (the instruction modules import read_bits and
# flag_view from here); they live below it, with the indirect views that use them too
from nkieval.sim.placed import claim_for_write, owned
from nkieval.sim.storage import _check_initialized, drop_f32, flag_view, read_bits, settle  # noqa: F401
from nkieval.sim.tensor import NkiTensor, cover_deferred_fill, fill_around, fill_deferred
from nkieval.sim.trace import TraceRecord


@dataclass(frozen=True)
class InstructionInfo:
    name: str
    engine: str  # default engine
    min_generation: int
    fn: Callable[..., Any]
    doc: str


INSTRUCTIONS: dict[str, InstructionInfo] = {}
_GEN_NAMES = {2: "trn1 (NeuronCore-v2)", 3: "trn2 (NeuronCore-v3)", 4: "trn3 (NeuronCore-v4)"}


#: The instructions that take ``nl.int64`` tensors: the documented scalar_load / scalar_store ("Unlike the compute
#: instructions, scalar_load accepts nl.int64") and DMA, which moves bytes (casting to or from int64 is refused
#: there). Every other instruction refuses an int64 operand (rule ``dtype``).
INT64_INSTRUCTIONS = frozenset({"dma_copy", "scalar_load", "scalar_store"})


def _int64_operand(params: tuple[str, ...], args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    """The role of the first int64 tensor among the arguments (one level into lists/tuples), or None."""
    for role, a in (*zip(params, args), *kwargs.items()):
        for x in (a if isinstance(a, list | tuple) else (a,)):
            if isinstance(x, NkiTensor) and x.dtype is dt.int64:
                return role
    return None


def _refuse_int64(name: str, role: str) -> NkiValidationError:
    return NkiValidationError(
        f"{role} is an nl.int64 tensor, which {name} does not take: no compute instruction accepts nl.int64 "
        "(\"Unlike the compute instructions, scalar_load accepts nl.int64\"); only dma_copy (without a cast) and "
        "nisa.scalar_load / scalar_store move 64-bit integers", operand=role, rule="dtype")


def instruction(name: str, engine: str, *, min_generation: int = 2) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register an ISA instruction. The decorated function receives the SimContext first."""

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        import inspect

        params = tuple(inspect.signature(fn).parameters)[1:]
        int64_ok = name in INT64_INSTRUCTIONS
        deferrable = name in DEFERRABLE and params[:1] == ("dst",)
        shared_access = engine in SHARED_MEMORY_ENGINES

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            ctx = current()
            f = user_frame(2)
            if f is not None:
                code, ctx.loc = frame_code_location(f)  # (the code: what the deferral check reads of ``f`` too)
            else:
                code, ctx.loc = None, (None, None, None)
            ctx.instruction_name = name
            if ctx.target.generation < min_generation:
                raise NkiValidationError(
                    f"not available on {_GEN_NAMES[ctx.target.generation]}; needs "
                    f"{_GEN_NAMES[min_generation]} or later", instruction=name, rule="generation",
                    location=_loc(ctx))
            if shared_access:
                turns = ctx.launch.turns
                if turns is not None:  # (an LNC-2 pair: the peer goes up to its next access first, nkieval.sim.turns)
                    turns.step(ctx.program_id)
            try:
                if dt.int64_seen() and not int64_ok:
                    role = _int64_operand(params, args, kwargs)
                    if role is not None:
                        raise _refuse_int64(name, role)
                rec = ctx.recorder
                if rec is not None and not rec.depth:  # recording a program: keep the call, then make it
                    if deferrable and rec.defers(args[0] if args else kwargs.get("dst"), f, code):
                        # (its checks and effects are left to the judge's replay: see Recorder.defers)
                        count_instruction(ctx, name)
                        return rec.instruction(ctx, name, _deferred, args, kwargs)
                    return rec.instruction(ctx, name, lambda: _call(ctx, name, engine, fn, args, kwargs), args,
                                           kwargs)
                return _call(ctx, name, engine, fn, args, kwargs)
            except NkiValidationError as e:
                if e.instruction is None:
                    e.instruction = name
                raise e.with_location(_loc(ctx)) from None
            except TypeError as e:
                if _signature_mismatch(e):
                    # The call itself did not match the signature: the kernel's mistake.
                    raise NkiValidationError(str(e).replace(fn.__name__ + "()", name + "()"), instruction=name,
                                             rule="argument", location=_loc(ctx)) from None
                raise

        wrapper.__signature__ = _public_signature(fn)  # type: ignore[attr-defined]
        INSTRUCTIONS[name] = InstructionInfo(name, engine, min_generation, wrapper, (fn.__doc__ or "").strip())
        return wrapper

    return deco


#: The engines whose instructions reach memory the programs of an LNC-2 pair share (DMA queues, the sync
#: engine's scalar and register loads and stores): the programs take turns at each (``nkieval.sim.turns``).
SHARED_MEMORY_ENGINES = frozenset({"dma", "sync"})


#: Instructions a recording may leave to the judge's replay (``Recorder.defers``): each writes only its ``dst``
#: (and other operand tensors) and returns None, so what the kernel's Python sees of a call, in a record-only run,
#: is only whether it raised. Not here: registers, scalars, random state, collectives and barriers (their state
#: or synchronisation is the recording's own), and the instructions that return a value.
DEFERRABLE = frozenset({
    "activate2", "activation", "activation_reduce", "affine_select", "bn_aggr", "bn_stats", "dma_compute",
    "dma_copy", "dma_transpose", "exponential", "iota", "local_gather", "max8", "memset", "nc_find_index8",
    "nc_match_replace8", "nc_matmul", "nc_matmul_mx", "nc_n_gather", "nc_stream_shuffle", "nc_transpose",
    "quantize_mx", "range_select", "reciprocal", "scalar_tensor_tensor", "select_reduce", "tensor_copy",
    "tensor_copy_predicated", "tensor_partition_reduce", "tensor_reduce", "tensor_scalar",
    "tensor_scalar_cumulative", "tensor_scalar_reduce", "tensor_tensor", "tensor_tensor_scan",
})


def _deferred() -> None:
    """A deferred instruction's body in a recording: nothing (its result is None)."""
    return None


def _call(ctx: SimContext, name: str, engine: str, fn: Callable[..., Any], args: tuple[Any, ...],
          kwargs: dict[str, Any]) -> Any:
    indirect = ctx.__dict__.get("has_indirect")  # set once the program makes an indirect view
    if ctx.unfilled:  # (only while a tile allocated with defer_fill lives untouched)
        _fill_operands(name if not indirect else "", args, kwargs)
    if indirect:
        return indirect_call(ctx, name, engine, fn, args, kwargs)
    return fn(ctx, *args, **kwargs)


#: Instructions that store every element of ``dst`` and never read its values (their first parameter). A
#: ``dst`` whose fill is deferred is left to the store (:func:`write`, :func:`write_exact`, :func:`mark_written`):
#: a store covering its whole storage needs no fill, and one that raises first leaves it deferred.
WRITE_ONLY_DST = frozenset({"activation", "affine_select", "memset", "nc_transpose", "scalar_tensor_tensor",
                            "tensor_copy", "tensor_scalar", "tensor_tensor"})


def _fill_operands(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Write the deferred sentinels of the operands' storage (nkieval.sim.tensor.fill_deferred) before the
    instruction reads it or writes part of it: its values are then what an eager fill would have left. The
    ``dst`` of a :data:`WRITE_ONLY_DST` instruction is left to its store, unless it is also another operand or
    another operand views the same storage (it is read)."""
    dst = dst_alloc = None
    if name in WRITE_ONLY_DST:
        dst = kwargs["dst"] if "dst" in kwargs else (args[0] if args else None)
        if isinstance(dst, NkiTensor):
            dst_alloc = dst.alloc
    seen_dst = 0
    for group in (args, kwargs.values()):
        for a in group:
            for x in (a if isinstance(a, (list, tuple)) else (a,)):  # (a tuple of types: a union is slower)
                if not isinstance(x, NkiTensor):
                    continue
                xa = x.alloc
                if x is dst:
                    seen_dst += 1
                    if seen_dst == 1:
                        continue
                if xa is dst_alloc:
                    dst_alloc = None  # read as well: filled below
                if xa.unfilled is not None:
                    fill_deferred(xa)
    if dst_alloc is None and isinstance(dst, NkiTensor) and dst.alloc.unfilled is not None:
        fill_deferred(dst.alloc)


def _signature_mismatch(e: TypeError) -> bool:
    """Whether ``e`` was raised by calling the instruction function itself (its arguments did not match)."""
    tb = e.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame.f_code is _call.__code__


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
    if t.data.size == 0:
        raise NkiValidationError(f"{role} {list(t.shape)} has no elements (an empty HBM slice cannot be an "
                                 "instruction operand)", operand=role, rule="indexing")
    return t


def check_buffer(t: NkiTensor, role: str, allowed: Iterable[str], why: str = "") -> None:
    kind = t.alloc.buffer.kind
    if type(allowed) is not tuple:
        allowed = tuple(allowed)
    if kind not in allowed:
        exp = "|".join(allowed)
        extra = f" ({why})" if why else ""
        raise NkiValidationError(
            f"expected operand '{role}' to be in address space '{exp}', but got a tensor in '{kind}' instead{extra}",
            operand=role, rule="buffer")


def check_partitions(ctx: SimContext, t: NkiTensor, role: str) -> int:
    p = t.data.shape[0]
    pmax = ctx.target.partitions
    if p > pmax:
        raise NkiValidationError(f"{role} partition dimension {p} exceeds maximum {pmax}", operand=role,
                                 rule="partition-limit")
    return p


def check_same_partitions(pairs: list[tuple[str, NkiTensor]]) -> None:
    (r0, t0), *rest = pairs
    p0 = t0.data.shape[0]
    for r, t in rest:
        if t.data.shape[0] != p0:
            raise NkiValidationError(
                f"number of partitions mismatch: {r0}{list(t0.shape)} has {t0.shape[0]}, {r}{list(t.shape)} has "
                f"{t.shape[0]}", operand=r, rule="partition-mismatch")


def free_size(t: NkiTensor) -> int:
    d = t.data
    return d.size // d.shape[0] if d.ndim else 1


def check_same_free(pairs: list[tuple[str, NkiTensor]]) -> None:
    (r0, t0), *rest = pairs
    f0 = free_size(t0)
    for r, t in rest:
        if free_size(t) != f0:
            raise NkiValidationError(
                f"elements per partition mismatch: {r0}{list(t0.shape)} has {free_size(t0)}, {r}{list(t.shape)} has "
                f"{free_size(t)}", operand=r, rule="shape-mismatch")


def _operands_key(kind: str, allow_psum: bool, pairs: list[tuple[str, NkiTensor]]) -> tuple[Any, ...]:
    """What the operand checks below read of their operands, as a key of the checks that passed: each operand's
    storage-view shape (its partitions and elements per partition) and buffer kind, in order. The target (its
    partition count and free-size limits) is the program's own: the memo lives on its SimContext. The roles and
    the engine name appear only in the messages of checks that fail, which are never remembered."""
    key: list[Any] = [kind, allow_psum]
    for _r, t in pairs:
        key.append(t.data.shape)
        key.append(t.alloc.buffer.kind)
    return tuple(key)


def _passed(ctx: SimContext) -> set[tuple[Any, ...]]:
    """The operand-check keys that passed in this program (:func:`_operands_key`): kernels issue the same
    instruction on fresh tiles of the same geometry in every loop iteration, and only what the key holds decides
    the checks, so a key seen passing passes again. A check that fails is never remembered, so every error is
    raised by the checks themselves, in their own order."""
    memo = ctx.__dict__.get("checks_passed")
    if memo is None:
        memo = ctx.checks_passed = set()
    elif len(memo) >= _PASSED_MAX:
        memo.clear()
    return memo


_PASSED_MAX = 1 << 14


def check_engine_operands(ctx: SimContext, pairs: list[tuple[str, NkiTensor]], *, allow_psum: bool = True,
                          engine: str = "vector") -> None:
    """Common checks for a compute-engine instruction's tensor operands (remembered by geometry: :func:`_passed`)."""
    memo = _passed(ctx)
    key = _operands_key("engine", allow_psum, pairs)
    if key in memo:
        return
    _check_engine_operands(ctx, pairs, allow_psum, engine)
    memo.add(key)


def _check_engine_operands(ctx: SimContext, pairs: list[tuple[str, NkiTensor]], allow_psum: bool,
                           engine: str) -> None:
    allowed = ("sbuf", "psum") if allow_psum else ("sbuf",)
    why = "" if allow_psum else f"the {engine} engine cannot access PSUM"
    for r, t in pairs:  # partition count first: it is the most fundamental tile rule
        check_partitions(ctx, t, r)
        check_buffer(t, r, allowed, why)
    check_same_partitions(pairs)


def check_elementwise_operands(ctx: SimContext, pairs: list[tuple[str, NkiTensor]], *, allow_psum: bool = True,
                               engine: str = "vector") -> None:
    """The operand checks an element-wise compute instruction starts with (``pairs``: dst first, then its
    inputs). Their order decides which error a kernel breaking several rules gets: per operand its partition
    count and buffer, the same partitions across operands, the same elements per partition, and last the
    free-size limit of the first input. Remembered by geometry (:func:`_passed`)."""
    memo = _passed(ctx)
    key = _operands_key("elementwise", allow_psum, pairs)
    if key in memo:
        return
    _check_engine_operands(ctx, pairs, allow_psum, engine)
    check_same_free(pairs)
    check_free_limit(ctx, pairs[1][1], pairs[1][0])
    memo.add(key)


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


def check_op_available(ctx: SimContext, op: Op, instruction_name: str, role: str = "op", dst: Any = None) -> None:
    """Generation gating of ALU operators, and the flag for operators that exist only in simulation.

    The simulator-only flag is the current API's (NKI 0.4 release notes: ``divide``, ``fmod`` and ``mod`` are
    not hardware instructions); Beta-1 kernels (``dst`` a Beta-1 tensor) compiled them, and ran on trn1."""
    if op.name not in BINARY and op.name not in UNARY:
        raise NkiValidationError(f"{role} nl.{op.name} is an activation function ({instruction_name} takes ALU "
                                 "operators; nl.prelu works only as nisa.activate2's op)", operand=role,
                                 rule="argument")
    if op.name in GEN4_ONLY and not ctx.target.has("abs_max"):
        raise NkiValidationError(f"{role} {op.name} needs trn3 (NeuronCore-v4); target is {ctx.target.name}",
                                 operand=role, rule="generation")
    if op.name in SIMULATOR_ONLY and getattr(dst, "api_generation", "current") != "beta1":
        mode = ctx.options.simulator_only
        msg = f"nl.{op.name} is not a hardware instruction: it runs in simulation but fails on device"
        if mode == "error":
            raise NkiValidationError(msg, operand=role, rule="simulator-only")
        if mode == "warn":
            ctx.warn(msg, rule="simulator-only", instruction=instruction_name)


def check_arith_op(op: Op, role: str) -> None:
    """Instructions documented as 'arithmetic operators only' reject bitvec and unary operators."""
    if op.name in BITVEC or op.name not in ARITH:
        raise NkiValidationError(f"{role} {op.name} is not a binary arithmetic operator (bitvec and unary operators "
                                 "are not supported here)", operand=role, rule="argument")


def check_max_free_dims(t: NkiTensor, role: str, max_free_dims: int) -> None:
    if t.ndim - 1 > max_free_dims:
        raise NkiValidationError(f"{role}{list(t.shape)} has {t.ndim - 1} free dimensions; at most {max_free_dims} "
                                 "are supported", operand=role, rule="instruction-limit")


# -- reading and writing ----------------------------------------------------------------
def read(t: NkiTensor) -> np.ndarray:
    """Operand values as the engines see them: cast to fp32 (engines compute in fp32).

    Integers wider than 24 bits lose precision here, as they do on the Vector/Scalar engines;
    bit-exact paths (same-dtype copies, bitvec operators, GpSimd int32 math) use :func:`read_bits`.
    """
    _check_initialized(t)
    a = t.data
    if a.dtype == np.float32:
        return a
    if dry_run():  # a record-only run: the values are not used
        return np.zeros(a.shape, np.float32)
    return _to_f32(a)


def _to_f32(a: np.ndarray) -> np.ndarray:
    if a.dtype == _BF16:  # bf16 -> fp32 is a 16-bit shift; ~1.5x faster than ml_dtypes' astype
        out = a.view(np.uint16).astype(np.uint32)
        out <<= 16
        return out.view(np.float32)
    return a.astype(np.float32)


_BF16 = np.dtype(dt.bfloat16.storage)
_F32 = np.dtype(np.float32)
# NKIEVAL_SIM_CHECK_F32_CACHE=1: compare every cached fp32 read with a fresh conversion (a debug
# aid proving that every write path drops the copies; the test-suite can be run with it).
_CHECK_F32_CACHE = os.environ.get("NKIEVAL_SIM_CHECK_F32_CACHE", "") not in ("", "0")


def read_f32(t: NkiTensor) -> np.ndarray:
    """Like :func:`read`, for instructions that only *read* the result (never modify it).

    SBUF operands in a narrow float dtype are read again and again by tiled matmuls (the same
    stationary tile for every output column block, the same moving tile for every row block), so
    their fp32 conversion is kept, per view geometry, on the allocation (read-only arrays, at most
    twice the allocation's element count in all) until the next write to it: every write path
    drops the copies (:func:`mark_written`, :func:`note_write`, :func:`drop_f32`), so the values are
    always those of :func:`read`. The conversion work is never more than converting on every read.
    """
    data = t.data
    if data.dtype == _F32:
        _check_initialized(t)
        return data
    a = t.alloc
    if a.buffer.kind != "sbuf" or not t.dtype.is_float:
        return read(t)
    _check_initialized(t)
    if dry_run():  # a record-only run: the values are not used
        return np.zeros(data.shape, np.float32)
    key = (t._byte_offset(), data.shape, data.strides, data.dtype)
    cache = a.f32
    if cache is None:
        cache = a.f32 = {}
    else:
        hit = cache.get(key)
        if hit is not None:
            if _CHECK_F32_CACHE and not np.array_equal(hit.view(np.uint32), _to_f32(data).view(np.uint32)):
                raise AssertionError(f"stale fp32 copy of allocation {a.name or a.id}: a write bypassed "
                                     "isa.core.mark_written / note_write")
            return hit
    v = _to_f32(data)
    v.flags.writeable = False
    n = a.f32_elems + v.size
    if n <= 2 * a.storage.size and owned(a):  # (a tile read after another placed over it wrote: no copy kept)
        a.f32_elems = n
        cache[key] = v
    return v


def read_exact(t: NkiTensor) -> np.ndarray:
    """The stored values, uncast (bit-exact copies)."""
    _check_initialized(t)
    return np.asarray(t.data)


def write_bits(t: NkiTensor, values: np.ndarray) -> None:
    """Store int64 results as bit patterns truncated to ``t``'s width (no saturation), as bitvec ops do."""
    if dry_run():  # a record-only run stores no values
        mark_written(t, matmul=False)
        return
    bits = 8 * t.data.dtype.itemsize
    v = np.asarray(values).astype(np.int64)
    if bits < 64:  # an int64 destination keeps all 64 bits
        v = v & ((1 << bits) - 1)
    udt = np.dtype(f"u{t.data.dtype.itemsize}")
    t.data[...] = v.astype(udt).view(t.data.dtype).reshape(t.shape) if v.size == t.size else \
        np.broadcast_to(v.astype(udt).view(t.data.dtype), t.shape)
    mark_written(t, matmul=False)


def mark_written(t: NkiTensor, *, matmul: bool) -> None:
    """Record that ``t``'s elements were written (and, in PSUM, by which kind of instruction).

    Every store into simulated memory must end here or in :func:`note_write`: they also drop the
    allocation's cached fp32 copies (:func:`read_f32`)."""
    a = t.alloc
    if a.unfilled is not None:  # (a store that bypassed write / write_exact: the rest keeps its sentinels)
        fill_around(t)
    if a.slot is not None:
        claim_for_write(a, t.data)
    a.written = True
    if a.f32 is not None:
        drop_f32(a)
    if a.buffer.shared:
        ctx = current()
        if ctx.launch.races is not None:  # (an LNC-2 launch: which program stored here last, nkieval.sim.races)
            ctx.launch.races.mark(ctx, t)
    if a.elem_written is not None:
        flag_view(t, a.elem_written)[...] = True
    mm = a.mm_written
    if mm is not None:
        data = t.data
        if data.shape == mm.shape and t._byte_offset() == 0 and data.flags.c_contiguous:
            # (the whole tile as allocated, the common case: flag_view would give the whole flag arrays, which are
            # C-contiguous and of the view's shape; set them without making two views)
            mm.fill(matmul)
            a.other_written.fill(not matmul)
        else:
            flag_view(t, mm)[...] = matmul
            flag_view(t, a.other_written)[...] = not matmul


def note_write(alloc: Any) -> None:
    """Record a store made straight into ``alloc``'s storage (scatters): written, fp32 copies dropped."""
    if alloc.slot is not None:
        claim_for_write(alloc, None)
    alloc.written = True
    if alloc.elem_written is not None:  # (which elements a scatter stored to is not kept: all count as written)
        alloc.elem_written.fill(True)
    drop_f32(alloc)


def write(ctx: SimContext, t: NkiTensor, values: Any, *, matmul: bool = False) -> None:
    """Round ``values`` into ``t`` (shape matched per partition), mark PSUM state."""
    if t.alloc.unfilled is not None:  # (a deferred fill: needed only if the store leaves some of the storage)
        cover_deferred_fill(t)
    if ctx.dry:  # a record-only run stores no values
        mark_written(t, matmul=matmul)
        return
    v = np.asarray(values)
    if v.shape != t.shape:
        if v.size == t.size:
            v = v.reshape(t.shape)
        elif v.size == 1:  # one value for every element (memset): cast it once, the store broadcasts it
            v = v.reshape((1,) * t.data.ndim)
        else:
            v = np.broadcast_to(v, t.shape)
    if v.dtype != t.data.dtype or t.dtype.tf32:
        v = dt.cast(v, t.dtype, fp8_overflow=ctx.options.fp8_overflow, precise=ctx.options.precise_fp,
                    float_to_int=ctx.options.float_to_int)
    if t.alloc.buffer.shared:
        _check_race(ctx, t, v)
    t.data[...] = v
    mark_written(t, matmul=matmul)


def write_exact(t: NkiTensor, values: np.ndarray) -> None:
    """Bit-exact store of values already in ``t``'s storage dtype (same-dtype copies)."""
    if t.alloc.unfilled is not None:  # (a deferred fill: needed only if the store leaves some of the storage)
        cover_deferred_fill(t)
    if dry_run():  # a record-only run stores no values
        mark_written(t, matmul=False)
        return
    v = np.asarray(values)
    if v.shape != t.shape and v.size == t.size:
        v = v.reshape(t.shape)
    if t.alloc.buffer.shared:
        _check_race(current(), t, v)
    t.data[...] = v
    mark_written(t, matmul=False)


def _check_race(ctx: SimContext, t: NkiTensor, stored: np.ndarray) -> None:
    """A store of ``stored`` (storage dtype) into shared memory: in an LNC-2 launch, reported if it races a
    store or a read of the other program (nkieval.sim.races)."""
    races = ctx.launch.races
    if races is not None:
        races.check_store(ctx, t, stored)


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


# -- trace ------------------------------------------------------------------------------
def count_instruction(ctx: SimContext, opcode: str) -> None:
    """One more instruction issued: refused past ``SimOptions.max_instructions`` or the run's deadline."""
    limit = ctx.options.max_instructions
    if limit is not None:
        launch = ctx.launch
        launch.n_instructions += 1
        if launch.n_instructions > limit:
            raise NkiValidationError(f"the kernel issued more than {limit} instructions (SimOptions.max_instructions); "
                                     "a kernel this long is almost certainly looping without bound or over-tiled",
                                     instruction=opcode, rule="instruction-budget")
    if ctx.launch.deadline is not None:
        check_deadline(ctx, opcode)


#: An instruction's operand as :func:`record` takes it: the tensor (view), its role and its mode ("r", "w", "rw")
Operand = tuple[NkiTensor, str, str]


def record(ctx: SimContext, opcode: str, engine: str, operands: list[Operand], **attrs: Any) -> None:
    """Count the instruction and, when the run keeps a trace, append its record. The operands' trace records
    (``NkiTensor.access``) are made here, only for a kept trace: a run without one (the tracer's recording, a
    judge's untraced replay) spent about a third of an instruction-bound kernel's replay making them."""
    count_instruction(ctx, opcode)
    if not ctx.options.record_trace:
        return
    file, line, func = getattr(ctx, "loc", (None, None, None))
    accesses = [t.access(role, mode) for t, role, mode in operands]
    ctx.trace.append(TraceRecord(0, opcode, engine, accesses, attrs, ctx.program_id, ctx.loop_context, file, line,
                                 func))


def check_deadline(ctx: SimContext, where: str) -> None:
    """Stop a run that has used its wall-clock time (SimOptions.time_limit_s)."""
    deadline = ctx.launch.deadline
    if deadline is not None and time.perf_counter() > deadline:
        raise NkiValidationError(f"the run took more than its {ctx.options.time_limit_s:g} s "
                                 "(SimOptions.time_limit_s)", instruction=where, rule="time-budget")


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


# -- engine accumulator registers ---------------------------------------------------------
_REDUCE_UFUNC = {"add": np.add, "maximum": np.maximum, "minimum": np.minimum, "multiply": np.multiply}


def accumulate(regs: np.ndarray, p: int, cmd: int, values: np.ndarray | None, op_name: str,
               init: np.ndarray | float | None = None) -> None:
    """Apply a ``reduce_cmd`` to an engine's per-partition fp32 accumulator registers (in place).

    ``reset`` sets the registers to the operator's identity (0 for add, -inf for max …);
    ``reduce`` folds the free-dim reduction of ``values`` into them; ``reset_reduce`` does both;
    ``load_reduce`` seeds them with ``init`` first; ``idle`` leaves them alone.
    """
    from nkieval.sim.isa.enums import reduce_cmd as rc
    from nkieval.sim.ops import REDUCE_IDENTITY

    uf = _REDUCE_UFUNC[op_name]
    if cmd in (rc.reset, rc.reset_reduce):
        regs[:p] = REDUCE_IDENTITY[op_name]
    elif cmd == rc.load_reduce:
        regs[:p] = np.broadcast_to(np.asarray(init if init is not None else 0.0, dtype=np.float32).reshape(-1), (p,))
    if cmd in (rc.reduce, rc.reset_reduce, rc.load_reduce) and values is not None:
        with IGNORE_ALL():
            regs[:p] = uf(regs[:p], uf.reduce(values.reshape(p, -1).astype(np.float32), axis=1))


def check_reduce_res(t: Any, p: int, role: str = "reduce_res") -> NkiTensor:
    """A reduction output must be an on-chip [P, 1] tensor."""
    rr = tensor_arg(t, role)
    check_buffer(rr, role, ("sbuf", "psum"))
    if rr.shape[0] != p or free_size(rr) != 1:
        raise NkiValidationError(f"{role} must be [{p}, 1], got {list(rr.shape)}", operand=role,
                                 rule="shape-mismatch")
    return rr


# -- argument normalisation (added for the fuzz contract: bad values raise NkiValidationError) --------
def int_value(x: Any, role: str) -> int:
    """A compile-time integer argument; anything else (inf, None, a tuple …) is the kernel's error."""
    if isinstance(x, bool) or not isinstance(x, int | np.integer | float | np.floating) or not np.isfinite(x) \
            or float(x) != int(x):
        raise NkiValidationError(f"{role} must be an integer, got {x!r}", operand=role, rule="argument")
    if not -(2**31) <= int(x) < 2**32:
        raise NkiValidationError(f"{role} = {int(x)} does not fit a 32-bit immediate", operand=role, rule="argument")
    return int(x)


_ENUM_VALUES: dict[Any, frozenset[int]] = {}
#: arguments already accepted, by (enum class, the argument's type, the argument): most calls pass the same few
#: members or ints, and reading a member's ``value`` goes through the enum's descriptor (about 1 µs a call)
_ENUM_ACCEPTED: dict[tuple[Any, type, Any], int] = {}


def enum_value(x: Any, enum_cls: Any, role: str) -> int:
    """The int value of an ``nki.isa`` enum argument (member or its int), validated against the enum."""
    try:
        key = (enum_cls, type(x), x)
        hit = _ENUM_ACCEPTED.get(key)
    except TypeError:  # (an unhashable argument: checked below, and refused)
        key = hit = None
    if hit is not None:
        return hit
    v = getattr(x, "value", x)
    values = _ENUM_VALUES.get(enum_cls)
    if values is None:
        values = _ENUM_VALUES[enum_cls] = frozenset(int(m) for m in enum_cls)
    if isinstance(v, bool) or not isinstance(v, int | np.integer) or int(v) not in values:
        names = ", ".join(f"{enum_cls.__name__}.{m.name}" for m in enum_cls)
        raise NkiValidationError(f"{role} must be one of {names}, got {x!r}", operand=role, rule="argument")
    if key is not None and (type(x) is int or isinstance(x, enum.Enum)) and len(_ENUM_ACCEPTED) < 4096:
        _ENUM_ACCEPTED[key] = int(v)  # (only ints and enum members: another object's ``value`` could change)
    return int(v)
