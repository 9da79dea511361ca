"""Launch a kernel on the simulator: wrap arguments, run each program, collect outputs and trace."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nkieval.hardware import Target, get_target
from nkieval.sim import dtypes as dt
from nkieval.sim.capacity import check_capacity
from nkieval.sim.context import Launch, SimContext, set_current
from nkieval.sim.errors import NkiValidationError
from nkieval.sim.gc_pacing import paced
from nkieval.sim.memory import KERNEL_ARG_HBM
from nkieval.sim.options import SimOptions
from nkieval.sim.races import RaceMarks
from nkieval.sim.tensor import NkiTensor, wrap_hbm
from nkieval.sim.trace import Trace
from nkieval.sim.turns import Turns


@dataclass
class RunResult:
    """What a simulated launch produced: the kernel's return value(s) as arrays, and the trace."""

    outputs: Any
    trace: Trace
    target: Target
    #: what program 0 of the kernel returned, as it returned it (tensors, not arrays): set by a program replay
    raw: Any = None


def _to_numpy(x: Any) -> tuple[Any, Any]:
    """(array or original value, torch-tensor-or-None for write-back)."""
    mod = type(x).__module__
    if mod.startswith("torch"):
        import torch  # optional dependency

        if isinstance(x, torch.Tensor):
            t = x.detach().cpu()
            if t.dtype == torch.bfloat16:
                arr = t.view(torch.int16).numpy().view(dt.bfloat16.storage)
            else:
                arr = t.numpy()
            return arr, x
    return x, None


def _wrap_args(args: Sequence[Any], names: Sequence[str], int64_ok: bool = True
               ) -> tuple[list[Any], list[tuple[NkiTensor, np.ndarray, Any]]]:
    wrapped: list[Any] = []
    links: list[tuple[NkiTensor, np.ndarray, Any]] = []
    for i, a in enumerate(args):
        arr, torch_obj = _to_numpy(a)
        if isinstance(arr, np.ndarray):
            name = names[i] if i < len(names) else f"arg{i}"
            try:
                d = dt.argument_dtype(arr.dtype, int64_ok=int64_ok)
            except dt.UnknownDTypeError as e:
                raise NkiValidationError(f"kernel argument '{name}': {e}", operand=name, rule="kernel") from None
            t = wrap_hbm(arr, name, dtype=d, buffer=KERNEL_ARG_HBM)
            wrapped.append(t)
            links.append((t, arr, torch_obj))
        elif isinstance(arr, list):
            wrapped.append(tuple(arr))  # NKI 0.3+: list arguments become tuples
        else:
            wrapped.append(arr)
    return wrapped, links


def _output(value: Any, instruction: str = "kernel", dry: bool = False, current_api: bool = True) -> Any:
    """The kernel's return value as host arrays (copies); a record-only run's are zeros (``dry``). ``current_api``:
    a launch of the current API (no Beta-1 SPMD grid), whose private-HBM output error names the version."""
    if value is None:
        return None
    if isinstance(value, NkiTensor):
        if value.alloc.buffer.kind != "hbm" or not value.alloc.buffer.shared:
            since = " (since NKI 0.3: NKI 0.2 compiled nl.hbm outputs; NKI's migration guide, 0.2 to 0.3)" \
                if current_api and value.alloc.buffer.kind == "hbm" else ""
            raise NkiValidationError(
                f"kernel returned {value!r}: outputs must be HBM tensors allocated with buffer=nl.shared_hbm{since}",
                instruction=instruction, rule="kernel")
        return np.zeros(value.data.shape, value.data.dtype) if dry else np.array(value.data, copy=True)
    if isinstance(value, tuple | list):
        return type(value)(_output(v, instruction, dry, current_api) for v in value)
    if isinstance(value, dict):
        return {k: _output(v, instruction, dry, current_api) for k, v in value.items()}
    return value


def _param_names(fn: Callable[..., Any]) -> list[str]:
    code = getattr(fn, "__code__", None)
    return list(code.co_varnames[: code.co_argcount]) if code else []


@paced
def run_kernel(fn: Callable[..., Any], args: Sequence[Any] = (), kwargs: dict[str, Any] | None = None, *,
               target: str | int | Target | None = None, options: SimOptions | None = None, lnc: int = 1,
               grid: tuple[int, ...] = (), concurrent: bool = False, int64_args: bool = True,
               arg_names: Sequence[str] | None = None,
               recorder_factory: Callable[[int], Any] | None = None) -> RunResult:
    """Run ``fn`` on the simulator.

    ``lnc`` (1 or 2) runs that many programs concurrently (threads, as the reference simulator
    does); ``grid`` (Beta-1 SPMD) runs one program per grid point, in order, or all at once in threads
    with ``concurrent`` (for collectives across programs, Beta-1 ``nl.all_reduce``). Arguments that are
    NumPy arrays (or torch tensors) become shared-HBM tensors; inputs the kernel writes are
    updated in place; returned HBM tensors come back as NumPy arrays. ``int64_args`` (the current ``nki`` API,
    the default) lets int64 arrays become ``nl.int64`` tensors; the Beta-1 front end, which has no 64-bit type,
    passes False. ``arg_names`` names the HBM arguments (default: ``fn``'s own parameters).
    ``recorder_factory(program_id)`` gives each program a recorder (``nkieval.sim.program`` records the kernel
    as a program).
    """
    tgt = target if isinstance(target, Target) else get_target(target)
    opts = options or SimOptions.from_env()
    kwargs = dict(kwargs or {})
    if lnc not in (1, 2):
        raise NkiValidationError(f"LNC degree must be 1 or 2, got {lnc}", instruction="launch", rule="kernel")
    if lnc > tgt.lnc_max:
        raise NkiValidationError(f"LNC degree {lnc} is not available on {tgt.name} (max {tgt.lnc_max})",
                                 instruction="launch", rule="generation")
    trace = Trace(target=tgt.name, kernel=getattr(fn, "__qualname__", getattr(fn, "__name__", None)))
    points: list[tuple[int, ...]]
    if grid:
        import itertools

        points = list(itertools.product(*(range(int(g)) for g in grid)))
    else:
        points = [(i,) for i in range(lnc)]
    launch = Launch(target=tgt, options=opts, trace=trace, num_programs=len(points), grid=tuple(grid))
    if opts.time_limit_s is not None:
        launch.deadline = time.perf_counter() + opts.time_limit_s
    trace.num_programs = len(points)
    ctx0 = SimContext(launch, 0, points[0])
    prev = set_current(ctx0)
    try:
        names = list(arg_names) if arg_names is not None else _param_names(fn)
        wrapped, links = _wrap_args(args, names, int64_args)
        kw_wrapped, kw_links = _wrap_args(list(kwargs.values()), list(kwargs.keys()), int64_args)
        kwargs = dict(zip(kwargs.keys(), kw_wrapped))
        links += kw_links
    finally:
        set_current(prev)
    results: list[Any] = [None] * len(points)
    errors: list[BaseException | None] = [None] * len(points)

    def run_program(i: int, ctx: SimContext) -> None:
        turns = launch.turns
        if turns is not None:
            turns.begin(i)
        old = set_current(ctx)
        try:
            results[i] = fn(*wrapped, **kwargs)
        except BaseException as e:
            errors[i] = e
        finally:
            set_current(old)
            with launch.lock:
                launch.finished.add(i)
            if turns is not None:  # (after ``finished``: the peer that gets the turn sees this program ended)
                turns.end(i)

    contexts = [ctx0] + [SimContext(launch, i, pt) for i, pt in enumerate(points) if i > 0]
    if recorder_factory is not None:
        for c in contexts:
            c.recorder = recorder_factory(c.program_id)
    if (lnc == 2 and not grid) or (concurrent and len(points) > 1):
        launch.turns = Turns(len(points))  # one program at a time, in a fixed order (nkieval.sim.turns)
        if not grid and opts.compute_values:  # (a record-only run stores no values: nothing to race)
            launch.races = RaceMarks()  # (an LNC-2 pair: accesses to shared memory that race, nkieval.sim.races)
        threads = [threading.Thread(target=run_program, args=(i, c), name=f"nki-lnc{i}") for i, c in enumerate(contexts)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    else:
        for i, c in enumerate(contexts):
            run_program(i, c)
            if errors[i] is not None:
                break
    # A core that stopped waiting because its peer ended (with its own error) is not the cause: report the peer's.
    for e in sorted((e for e in errors if e is not None), key=lambda e: bool(getattr(e, "peer_consequence", False))):
        raise e
    for finish in launch.after_run:
        finish(trace)
    if opts.record_trace:
        check_capacity(trace, {"sbuf": tgt.sbuf_bytes_per_partition, "psum": tgt.psum_bytes_per_partition},
                       opts.capacity_check, emit=opts.emit_warnings)
    outputs = _output(results[0], dry=not opts.compute_values, current_api=not grid)
    for t, arr, torch_obj in links:
        if t.alloc.written and opts.compute_values:  # (a record-only run has no values to give back)
            _write_back(t, arr, torch_obj)
    return RunResult(outputs=outputs, trace=trace, target=tgt)


def _write_back(t: NkiTensor, arr: np.ndarray, torch_obj: Any) -> None:
    vals = t.alloc.storage
    if torch_obj is not None:
        import torch

        src = torch.from_numpy(np.ascontiguousarray(vals.astype(np.float32) if vals.dtype.kind == "V" or
                                                    (vals.dtype.itemsize == 2 and vals.dtype != np.float16 and
                                                    vals.dtype.kind not in "iu") else vals))
        torch_obj.copy_(src.to(torch_obj.dtype).reshape(torch_obj.shape))
        return
    if arr.flags.writeable:
        arr[...] = vals.astype(arr.dtype, copy=False).reshape(arr.shape)
