"""Run a CUDA source's host function on NumPy arrays, and bind a task's signature to it."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from nkieval.cuda.interp import NODE_WORK, Interpreter, LaunchRecord, clear_kept
from nkieval.cuda.program import BuildOptions, Program, parse_program
from nkieval.cuda.values import (
    Buffer,
    CudaError,
    Ptr,
    PtrT,
    Scalar,
    add_work,
    base_dtype,
    executor_seconds,
    safety_seconds,
)


@lru_cache(maxsize=64)
def _program(source: str) -> Program:
    return parse_program(source)


@dataclass
class CudaRun:
    """What a run of the host function left: every pointer argument's memory after the run (by parameter
    name), the launches made, and the build options the run followed."""

    memory: dict[str, np.ndarray]
    launches: list[LaunchRecord]
    options: BuildOptions
    returned: Any = None
    warnings: list[str] = field(default_factory=list)
    #: work units the run counted (:func:`~nkieval.cuda.values.executor_work`; a resumed run counts the work of
    #: the original's run up to where it resumed, as a fresh run would)
    work: int = 0


def host_params(source: str, entry: str) -> list[tuple[str, Any]]:
    """(name, C type) of the host function's parameters."""
    prog = _program(source)
    fn = prog.functions.get(entry)
    if fn is None:
        raise CudaError(f"no function {entry!r} in the CUDA source")
    key = (entry, *_signature_key(prog, fn))
    kept = _SIGNATURES.get(key)
    if kept is None:
        it = Interpreter(prog)
        kept = tuple((n, t) for n, t, _ in it._params(fn))
        if len(_SIGNATURES) >= SIGNATURES_KEPT:
            _SIGNATURES.pop(next(iter(_SIGNATURES)))
        _SIGNATURES[key] = kept
    return list(kept)


def _signature_key(prog: Program, fn: Any) -> tuple[str, ...]:
    """What a function's parameter types are read from: its parameter list, the structs and the top-level
    constants (array sizes). A mutant of the kernel's device code keeps all three, so its host binding is the
    original's (the cause search runs hundreds of mutants of one source)."""
    decl = fn.child_by_field_name("declarator")
    while decl is not None and decl.type != "function_declarator":
        decl = decl.child_by_field_name("declarator")
    head = decl.child_by_field_name("parameters") if decl is not None else None
    return ("" if head is None else head.text.decode(), *(b.text.decode() for b in prog.structs.values()),
            "\0", *(c.text.decode() for c in prog.constants))


#: host signatures kept (:func:`host_params`), by :func:`_signature_key`: the types are immutable records
SIGNATURES_KEPT = 64
_SIGNATURES: dict[tuple[str, ...], tuple[tuple[str, Any], ...]] = {}


def run_host(source: str, entry: str, args: Mapping[str, Any], *, options: BuildOptions | None = None,
             time_limit_s: float | None = None, capture: Any = None, resume: Any = None,
             work_limit: int | None = None) -> CudaRun:
    """Call host function ``entry`` of ``source``: pointer parameters take NumPy arrays (copied; a pointer
    parameter given ``None`` or left out is a workspace that grows as the kernels write it), other
    parameters take numbers. Kernels launched by it run on the executor. ``work_limit``: raise
    :class:`~nkieval.cuda.values.ExecutorTimeout` past that many work units (checked at every loop iteration
    and group of blocks; the run's count is :attr:`CudaRun.work`, and is added to :func:`executor_work`), with
    a CPU-time safety net far above it (:func:`~nkieval.cuda.values.safety_seconds`: past it,
    :class:`~nkieval.cuda.values.ExecutorSafetyNet`, a harness fault). ``time_limit_s`` (without
    ``work_limit``): a plain CPU-time limit, an ``ExecutorTimeout`` past it (machine-dependent: no review
    budget uses it). ``capture``, ``resume``: :mod:`nkieval.cuda.resume`'s states, taken from this run or
    resumed from."""
    prog = _program(source)
    if options is not None:
        prog = Program(prog.source, prog.root, prog.functions, prog.templates, prog.structs, prog.constants,
                       options)
    it = Interpreter(prog)
    # (parsing and compiling the source: counted for a resumed run too, whose count is then the original's at the
    # state it resumes from)
    it.source_work = NODE_WORK * prog.root.descendant_count
    it.work += it.source_work
    if work_limit is not None:
        it.work_limit, it.safety_net = int(work_limit), True
        it.deadline = executor_seconds() + safety_seconds(int(work_limit))
    elif time_limit_s is not None:
        it.deadline = executor_seconds() + time_limit_s
    fn = prog.functions.get(entry)
    if fn is None:
        raise CudaError(f"no function {entry!r} in the CUDA source")
    params = it._params(fn)
    bufs: dict[str, Buffer] = {}
    call_args: list[Any] = []
    for name, t, _ in params:
        v = args.get(name)
        if isinstance(t, PtrT):
            dt = base_dtype(t.elem)
            if v is None:
                buf = Buffer(np.zeros(0, dt), name, growable=True)
            else:
                arr = np.ascontiguousarray(v).reshape(-1)
                if (arr.dtype != dt and arr.dtype.kind == "V") or dt.kind == "V" or (
                        arr.dtype.itemsize == 1 and dt.itemsize == 1 and arr.dtype != dt):
                    # ml_dtypes' floats (fp8 flavours): convert through fp32 (e4m3 values are e4m3fn values)
                    arr = arr.astype(np.float32).astype(dt)
                if arr.dtype != dt:
                    raise CudaError(f"argument {name}: a {arr.dtype} array for a pointer to {dt}")
                buf = Buffer(arr.copy(), name)
            bufs[name] = buf
            call_args.append(Ptr(buf, 0, t.elem))
        else:
            if v is None:
                if (isinstance(t, Scalar) and name in ("stream", "s")) or "stream" in name:
                    v = 0
                else:
                    raise CudaError(f"no value for parameter {name} of {entry}")
            call_args.append(t.dtype.type(v) if isinstance(t, Scalar) else v)
    it.host_buffers = list(bufs.values())
    it.capture, it.resume = capture, resume
    try:
        with np.errstate(all="ignore"):
            ret = it.call_host(entry, call_args)
    finally:  # (a run that faults or times out is charged what it ran)
        add_work(it.work)
        clear_kept()  # (the offsets its subscripts kept: no later run meets their operands)
    return CudaRun({k: b.data for k, b in bufs.items()}, it.launches, prog.options, ret, it.warnings, it.work)


# ---------------------------------------------------------------------------------------------
# tasks


def _norm(s: str) -> str:
    return re.sub(r"[^a-z0-9]", "", s.lower())


def bind_task(source: str, entry: str, inputs: Sequence[Any], outputs: Sequence[Any],
              params: Mapping[str, Any]) -> dict[str, str]:
    """How the task's tensors and parameters map onto the host function's parameters:
    ``{host parameter: "in:NAME" | "out:NAME" | "dim:SYM" | "param:NAME" | "workspace" | "stream"}``.

    Pointer parameters take the inputs, then the outputs, in order (the convention of the built-in tasks'
    launch code); further pointers are workspaces. Integer parameters take the dimension or parameter of
    the same name (case and underscores ignored), the rest the remaining dimensions in order of first
    appearance in the inputs' shapes."""
    hp = host_params(source, entry)
    tensors = [("in", s) for s in inputs] + [("out", s) for s in outputs]
    dims: list[str] = []
    for s in [*inputs, *outputs]:
        for d in s.shape:
            if isinstance(d, str) and d not in dims:
                dims.append(d)
    out: dict[str, str] = {}
    ti = 0
    scalar_names = []
    for name, t in hp:
        if isinstance(t, PtrT):
            if ti < len(tensors):
                kind, spec = tensors[ti]
                out[name] = f"{kind}:{spec.name}"
                ti += 1
            else:
                out[name] = "workspace"
        elif "stream" in name.lower():
            out[name] = "stream"
        else:
            scalar_names.append(name)
    if ti < len(tensors):
        raise CudaError(f"the host function {entry} takes {ti} pointers; the task has {len(tensors)} tensors")
    used: set[str] = set()
    pending = []
    for name in scalar_names:
        key = _norm(name)
        hit = next((p for p in params if _norm(p) == key), None)
        if hit is not None:
            out[name] = f"param:{hit}"
            continue
        hitd = next((d for d in dims if _norm(d) == key and d not in used), None)
        if hitd is not None:
            out[name] = f"dim:{hitd}"
            used.add(hitd)
            continue
        pending.append(name)
    rest = [d for d in dims if d not in used]
    for name in pending:
        if not rest:
            raise CudaError(f"cannot tell what the host parameter {name} of {entry} is")
        out[name] = f"dim:{rest.pop(0)}"
    return out


def run_task_cuda(task: Any, inputs: Mapping[str, np.ndarray], dims: Mapping[str, int],
                  params: Mapping[str, Any] | None = None, *, options: BuildOptions | None = None,
                  source: str | None = None, time_limit_s: float | None = None, capture: Any = None,
                  resume: Any = None, work_limit: int | None = None) -> tuple[list[np.ndarray], CudaRun]:
    """Run a task's ``kernel.cu`` on the task's inputs: its outputs (shaped as the signature says) and the
    run. ``task`` is a :class:`nkieval.tasks.Task` (only its signature, kernel name and CUDA file are read);
    ``source`` replaces the task's kernel.cu. ``capture``, ``resume``, ``work_limit``, ``time_limit_s``: as
    :func:`run_host`'s."""
    src = source if source is not None else task.cuda_file.read_text()
    prm = dict(task.params) if params is None else dict(params)
    binding = bind_task(src, task.kernel, task.inputs, task.outputs, prm)
    args: dict[str, Any] = {}
    out_specs = {s.name: s for s in task.outputs}
    for hname, what in binding.items():
        kind, _, name = what.partition(":")
        if kind == "in":
            args[hname] = inputs[name]
        elif kind == "out":
            spec = out_specs[name]
            shape = spec.concrete(dims)
            dt = _out_dtype(src, task.kernel, hname)
            fill = np.nan if dt.kind == "f" else 0
            args[hname] = np.full(shape, fill, dt)
        elif kind == "dim":
            args[hname] = int(dims[name])
        elif kind == "param":
            args[hname] = prm[name]
    run = run_host(src, task.kernel, args, options=options, time_limit_s=time_limit_s, capture=capture,
                   resume=resume, work_limit=work_limit)
    outs = []
    for spec in task.outputs:
        hname = next(h for h, w in binding.items() if w == f"out:{spec.name}")
        outs.append(run.memory[hname].reshape(spec.concrete(dims)))  # in the CUDA pointer's dtype
    return outs, run


def _out_dtype(source: str, entry: str, pname: str) -> np.dtype:
    for n, t in host_params(source, entry):
        if n == pname and isinstance(t, PtrT):
            return base_dtype(t.elem)
    raise CudaError(f"no pointer parameter {pname}")
