"""Beta-1 kernel launch: ``@nki.jit(mode=...)``, ``baremetal``, ``benchmark``, ``profile``,
``simulate_kernel`` and N-D SPMD grids (``kernel[4, 2]``, ``kernel[nl.nc(2), 2]``).

Every mode that produces values runs on nkieval's simulator: ``simulation`` (what it meant in
Beta 1), ``auto`` / ``baremetal`` / ``torchxla`` / ``jax`` (on hardware these compile and run on
a NeuronCore; the values are the same, so we simulate and say so once). ``benchmark`` and
``profile`` also simulate; their timing comes from nkieval's performance model, clearly
labelled an *estimate*, or a clear error when the model is not available.
"""

from __future__ import annotations

import gc
import importlib
import os
import threading
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from nkieval.frontends.beta1 import ops, restart
from nkieval.frontends.beta1.index import grid_dims
from nkieval.frontends.beta1.language import NeedsConcurrentGrid
from nkieval.frontends.beta1.tensor import wrap
from nkieval.sim.context import maybe_current
from nkieval.sim.errors import NkiValidationError
from nkieval.sim.options import SimOptions
from nkieval.sim.runner import RunResult, run_kernel
from nkieval.sim.tensor import NkiTensor, wrap_hbm

MODES = ("auto", "simulation", "baremetal", "benchmark", "profile", "jax", "torchxla", "trace")
_LAST = threading.local()
_NOTED: set[str] = set()


class Beta1ModeError(NkiValidationError):
    """A launch mode that needs something nkieval does not have (hardware, a framework)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, instruction="launch", rule="kernel")


def last_result() -> RunResult | None:
    """The RunResult (outputs, trace, target) of the most recent Beta-1 launch on this thread."""
    return getattr(_LAST, "result", None)


class _Entry:
    """The kernel function as the runner calls it: arguments become Beta-1 tensors."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.__qualname__ = getattr(fn, "__qualname__", getattr(fn, "__name__", "kernel"))

    @property
    def __code__(self) -> Any:  # the runner names arguments after the kernel's parameters
        return self.fn.__code__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        a = [wrap(x) if isinstance(x, NkiTensor) else x for x in args]
        k = {n: wrap(x) if isinstance(x, NkiTensor) else x for n, x in kwargs.items()}
        result = self.fn(*a, **k)
        names = list(self.fn.__code__.co_varnames[: self.fn.__code__.co_argcount])
        params = {**dict(zip(names, a)), **k}
        check_parameters(self.fn, params, result)
        check_outputs_written(result)
        return _deliver(result)


def _deliver(result: Any) -> Any:
    """A returned on-chip tile is delivered as an array, as the Beta-1 simulator did (its own per-API tests return
    SBUF tiles); the current API's kernels must return HBM tensors."""
    if isinstance(result, NkiTensor) and result.alloc.buffer.kind != "hbm":
        ops.flush(result)
        return wrap_hbm(np.asarray(result.data), f"returned_{result.alloc.name or 'tile'}", dtype=result.dtype)
    if isinstance(result, tuple | list):
        return type(result)(_deliver(r) for r in result)
    if isinstance(result, dict):
        return {k: _deliver(v) for k, v in result.items()}
    return result


def _is_mutable(annotation: Any) -> bool:
    if isinstance(annotation, str):  # `from __future__ import annotations`
        return "mutable_tensor" in annotation
    return getattr(annotation, "name", None) == "mutable_tensor"


def _returned(result: Any) -> list[Any]:
    if isinstance(result, tuple | list):
        return [x for r in result for x in _returned(r)]
    if isinstance(result, dict):
        return [x for r in result.values() for x in _returned(r)]
    return [result]


def check_parameters(fn: Callable[..., Any], params: dict[str, Any], result: Any) -> None:
    """Beta-1 parameter mutability: inputs are immutable unless annotated ``nt.mutable_tensor``, and a mutable
    parameter must be returned. Kernels that return nothing are the older Beta-1 style whose outputs are
    parameters (``simulate_kernel(k, a, b, out)``): their parameters may be written."""
    ann = getattr(fn, "__annotations__", {}) or {}
    returned = {id(x.alloc) for x in _returned(result) if isinstance(x, NkiTensor)}
    for name, t in params.items():
        if not isinstance(t, NkiTensor) or t.is_on_chip:
            continue
        mutable = _is_mutable(ann.get(name))
        if mutable and id(t.alloc) not in returned:
            raise NkiValidationError(
                f"Mutable kernel parameter not returned by 'return' statement: '{name}' is annotated "
                "nt.mutable_tensor; return it with the outputs (return out, " + name + ")", instruction="kernel",
                operand=name, rule="kernel")
        if not mutable and result is not None and t.alloc.written:
            raise NkiValidationError(
                f"Cannot update immutable parameter '{name}': kernel parameters are immutable unless annotated "
                f"nt.mutable_tensor (def kernel({name}: nt.mutable_tensor, ...)), or write a copy",
                instruction="kernel", operand=name, rule="kernel")


def check_outputs_written(result: Any) -> None:
    """Every HBM tensor the kernel made and returns was written by some instruction: Beta 1 refused one that was
    not (its error ``tensor-output-not-written-to``; a loop that never runs, ``nl.affine_range(M // N)`` with
    ``N > M``, is the usual cause). Checked for a launch of one program only (in a grid, another program may
    write what this one returns)."""
    ctx = maybe_current()
    if ctx is None or ctx.launch.num_programs != 1:
        return
    for t in _returned(result):
        if isinstance(t, NkiTensor) and t.alloc.buffer.kind == "hbm" and not t.alloc.is_kernel_arg \
                and not t.alloc.written:
            name = t.alloc.name or "output"
            raise NkiValidationError(
                f"output '{name}'{list(t.shape)} is returned but no instruction wrote it (Beta 1: "
                "tensor-output-not-written-to): a loop that never runs, such as nl.affine_range(M // N) with N > M, "
                "is the usual cause", instruction="kernel", operand=name, rule="kernel")


class LatencyResult:
    """``benchmark_result.nc_latency``: percentiles from the performance model's estimate (µs)."""

    def __init__(self, estimate_us: float | None, why: str = "") -> None:
        self.estimate_us = estimate_us
        self.why = why
        self.is_estimate = True

    def get_latency_percentile(self, p: int) -> float:
        if self.estimate_us is None:
            raise Beta1ModeError(f"nki.benchmark latency needs Neuron hardware; nkieval's performance-model estimate "
                                 f"is not available ({self.why})")
        return float(self.estimate_us)


class BenchmarkResult:
    def __init__(self, latency: LatencyResult) -> None:
        self.nc_latency = latency


def _estimate(result: RunResult) -> tuple[Any, str]:
    """(perf estimate or None, reason) — the performance model is optional for this front end."""
    try:
        mod = importlib.import_module("nkieval.perf.estimate")
    except ImportError as e:
        return None, f"nkieval.perf.estimate is not available: {e}"
    try:
        return mod.estimate(result.trace, result.target), ""
    except Exception as e:  # the estimate must never break a simulated run
        return None, f"nkieval.perf.estimate failed: {type(e).__name__}: {e}"


def _note_once(mode: str, message: str) -> None:
    if mode not in _NOTED:
        _NOTED.add(mode)
        warnings.warn(message, stacklevel=3)


def default_sim_options(**overrides: Any) -> SimOptions:
    """The Beta-1 front end's simulator options, with ``overrides``.

    Beta 1's compiler freed tiles after their last use; our tiles live until Python drops them, so over-capacity
    is a warning here rather than an error. Precision: the Beta-1 simulator held bf16/fp8 results in fp32 (the
    SDK's own Beta-1 tests pass only that way), so that is this front end's default; NKI_PRECISE_FP=1 rounds to
    the real formats (docs/beta1.md). Its float-to-integer casts were NumPy's (toward zero); NKI 0.6's release
    notes record the switch to the hardware's round-to-nearest-even for nki.simulate, so the Beta-1 default
    truncates."""
    base = {"capacity_check": "warn", "precise_fp": os.environ.get("NKI_PRECISE_FP", "0") != "0",
            "float_to_int": "truncate"}
    return SimOptions.from_env(**{**base, **overrides})


class Kernel:
    """A Beta-1 kernel. ``kernel[g0, g1](...)`` launches an SPMD grid; calling it runs by ``mode``."""

    def __init__(self, fn: Callable[..., Any], mode: str = "auto", grid: tuple[int, ...] = (), cores: int = 1,
                 **options: Any) -> None:
        if mode not in MODES:
            raise Beta1ModeError(f"unknown nki.jit mode {mode!r}; Beta 1 had {', '.join(MODES[:-1])}")
        self.fn = fn.fn if isinstance(fn, Kernel) else fn
        self.mode = mode
        self.grid = grid
        self.cores = cores
        self.options = options
        self.benchmark_result: BenchmarkResult | None = None
        self.profile_result: Any = None
        self.__name__ = getattr(self.fn, "__name__", "kernel")
        self.__qualname__ = getattr(self.fn, "__qualname__", self.__name__)
        self.__doc__ = getattr(self.fn, "__doc__", None)
        self.__wrapped__ = self.fn

    def __repr__(self) -> str:
        g = f"[{', '.join(map(str, self.grid))}]" if self.grid else ""
        return f"<Beta-1 kernel {self.__qualname__}{g} mode={self.mode}>"

    def __getitem__(self, key: Any) -> Kernel:
        grid, cores = grid_dims(key)
        return Kernel(self.fn, self.mode, grid, cores, **self.options)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if maybe_current() is not None:
            if self.grid:
                raise NkiValidationError(
                    f"Calling kernel with spmd grid ({self.__name__}[{','.join(map(str, self.grid))}]) inside another "
                    "kernel is not supported", instruction="launch", rule="kernel")
            return self.fn(*args, **kwargs)  # sub-kernel: traced inline
        if self.mode == "jax":
            return _to_jax(self.launch(args, kwargs).outputs)
        if self.mode == "torchxla" and not any(type(a).__module__.startswith("torch") for a in args):
            raise Beta1ModeError("mode='torchxla' runs on torch tensors (on an XLA device on hardware); pass torch "
                                 "tensors, or use mode='simulation' with NumPy arrays")
        if self.mode in ("baremetal", "auto", "torchxla"):
            _note_once(self.mode, f"nki.jit(mode={self.mode!r}) compiles and runs on a NeuronCore; nkieval simulates "
                       "the kernel on the CPU instead (same values, no hardware timing)")
        result = self.launch(args, kwargs)
        if self.mode == "benchmark":
            est, why = _estimate(result)
            us = float(est.total_time_us) if est is not None else None
            self.benchmark_result = BenchmarkResult(LatencyResult(us, why))
        elif self.mode == "profile":
            est, why = _estimate(result)
            self.profile_result = est
            if est is None:
                _note_once("profile-none", f"nki.profile: hardware profiles need a NeuronCore; no estimate either "
                           f"({why})")
            else:
                _note_once("profile", f"nki.profile: estimated {est.total_time_us:.3f} µs on {result.target.name} "
                           "(nkieval performance-model estimate, not a hardware profile)")
        return _like_inputs(result.outputs, args)

    def launch(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> RunResult:
        target = self.options.get("platform_target")
        if self.cores > 1:
            from nkieval.hardware import get_target

            t = get_target(target)
            if t.lnc_max < self.cores:
                raise NkiValidationError(f"nl.nc({self.cores}) needs {self.cores} NeuronCores per logical core; "
                                         f"{t.name} has {t.lnc_max}", instruction="launch", rule="generation")
        args = tuple(_placeholder(a) for a in args)
        kwargs = {k: _placeholder(v) for k, v in kwargs.items()}
        options = self.options.get("sim_options") or default_sim_options()
        result: RunResult | None = None
        try:
            limit = restart.threshold()  # (0: never restart, and the arguments are not looked at)
            with restart.may_restart(limit if limit and restart.replayable(args, kwargs) else 0):
                result = self._eager(args, kwargs, target, options)
        except restart.NeedsReplay:
            pass  # (out of the handler first: its traceback holds the abandoned run's tensors)
        if result is None:
            # a declaration too large to hold whole: record the kernel and replay it, which holds its large
            # tensors by live region (nkieval.frontends.beta1.restart); nothing was written back to the inputs.
            # The abandoned run's tensors are held in reference cycles (its context, tiles and frames): let them
            # go before the recording starts, not at the collector's next turn (NKIBench lora: 1.5 GB)
            gc.collect()
            result = _replayed(self.fn, args, kwargs, target, options, self.grid)
            if result is None:  # (the recording refused the kernel: eagerly after all)
                result = self._eager(args, kwargs, target, options)
        _LAST.result = result
        return result

    def _eager(self, args: tuple[Any, ...], kwargs: dict[str, Any], target: Any, options: SimOptions) -> RunResult:
        try:
            return run_kernel(_Entry(self.fn), args, kwargs, target=target, options=options, grid=self.grid,
                              int64_args=False)  # Beta 1 has no 64-bit dtype
        except NeedsConcurrentGrid:
            # nl.all_reduce across programs: run every program at once (threads), the all-reduce a rendezvous.
            # Nothing was written back to the inputs by the aborted run (write-back happens after success).
            return run_kernel(_Entry(self.fn), args, kwargs, target=target, options=options, grid=self.grid,
                              concurrent=True, int64_args=False)


def _tensors_only(ret: Any) -> bool:
    """Whether a program's return value (as recorded) holds nothing but tensors, in tuples or lists, or None."""
    if ret is None:
        return True
    if isinstance(ret, list):
        return all(_tensors_only(e) for e in ret)
    if isinstance(ret, dict) and len(ret) == 1:
        (k, v), = ret.items()
        return k == "T" or (k == "tu" and isinstance(v, list) and all(_tensors_only(e) for e in v))
    return False


def _replayed(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], target: Any,
              options: SimOptions, grid: tuple[int, ...]) -> RunResult | None:
    """``fn`` recorded from its arguments' shapes and dtypes and the program replayed on them, as a review's judge
    runs a kernel; None where the recording (or the program's check) refuses it. The warnings of both runs are
    given once each."""
    from dataclasses import replace

    from nkieval.sim.program import ArgSpec, compile_program, record_program, replay_program

    def spec(a: Any) -> Any:
        return ArgSpec(tuple(a.shape), a.dtype.name) if isinstance(a, np.ndarray) else a

    result: RunResult | None = None
    failure: BaseException | None = None
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            # (no trace: the replay makes the one kept, and judges on-chip capacity on it as the eager run does)
            program = record_program(_Entry(fn), [spec(a) for a in args], {k: spec(v) for k, v in kwargs.items()},
                                     target=target, options=replace(options, record_trace=False), grid=grid).program
            compile_program(program)
        except Exception:  # (e.g. a kernel whose Python reads tensor values: an eager run computes them)
            return None
        if not all(_tensors_only(body.ret) for body in program.programs):
            return None  # (a returned on-chip tile is delivered as an array at record time: the eager run's values)
        try:
            result = replay_program(program, list(args), dict(kwargs), target=target, options=options)
        except BaseException as e:  # (the kernel's own error, raised as an eager run raises it, after its warnings)
            failure = e
    given: set[tuple[str, Any]] = set()
    for w in seen:  # (outside the catch: to the caller's filters, each once)
        key = (str(w.message), w.category)
        if key not in given:
            given.add(key)
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if failure is not None:
        raise failure
    return result


def _placeholder(a: Any) -> Any:
    """``nt.tensor[[K, M], dtype]`` passed as an argument (Beta-1 benchmark drivers): a zero array."""
    if type(a).__name__ == "TensorType" and getattr(a, "shape", None) is not None:
        from nkieval.sim import dtypes as dt

        d = dt.to_dtype(a.dtype) if a.dtype is not None else dt.float32
        return np.zeros(a.shape, dtype=d.storage)
    return a


def _like_inputs(outputs: Any, args: tuple[Any, ...]) -> Any:
    if not any(type(a).__module__.startswith("torch") for a in args):
        return outputs
    import torch

    def conv(x: Any) -> Any:
        if isinstance(x, np.ndarray):
            if x.dtype.name == "bfloat16":
                return torch.from_numpy(x.view(np.int16).copy()).view(torch.bfloat16)
            return torch.from_numpy(np.ascontiguousarray(x))
        if isinstance(x, tuple | list):
            return type(x)(conv(v) for v in x)
        return x

    return conv(outputs)


def _to_jax(outputs: Any) -> Any:
    try:
        import jax.numpy as jnp
    except ImportError:
        raise Beta1ModeError("mode='jax' returns JAX arrays and needs JAX installed; use mode='simulation' with "
                             "NumPy arrays") from None
    if isinstance(outputs, np.ndarray):
        return jnp.asarray(outputs)
    if isinstance(outputs, tuple | list):
        return type(outputs)(_to_jax(o) for o in outputs)
    return outputs


def _decorator(mode: str, fn: Any, kwargs: dict[str, Any]) -> Any:
    if fn is None:
        return lambda f: Kernel(f, mode, **kwargs)
    return Kernel(fn, mode, **kwargs)


def jit(func: Any = None, mode: str = "auto", **kwargs: Any) -> Any:
    """``@nki.jit`` / ``@nki.jit(mode=...)`` (auto, simulation, baremetal, benchmark, jax, torchxla)."""
    return _decorator(mode, func, kwargs)


def baremetal(kernel: Any = None, **kwargs: Any) -> Any:
    """``@nki.baremetal``: NumPy in/out on a NeuronCore; simulated here."""
    return _decorator("baremetal", kernel, kwargs)


def benchmark(kernel: Any = None, **kwargs: Any) -> Any:
    """``@nki.benchmark(warmup=, iters=)``: runs (simulated) and sets ``.benchmark_result`` from the perf estimate."""
    return _decorator("benchmark", kernel, kwargs)


def profile(func: Any = None, **kwargs: Any) -> Any:
    """``@nki.profile(working_directory=...)``: simulates; the profile is the perf model's estimate, if available."""
    return _decorator("profile", func, kwargs)


def trace(func: Any = None, **kwargs: Any) -> Any:
    """``@nki.trace``: a sub-kernel traced into its caller (runs inline; launched alone, it simulates)."""
    return _decorator("trace", func, kwargs)


def simulate_kernel(kernel: Any, *args: Any, **kwargs: Any) -> Any:
    """``nki.simulate_kernel(kernel[grid], *numpy_args)``: run on the CPU simulator, NumPy outputs."""
    k = kernel if isinstance(kernel, Kernel) else Kernel(getattr(kernel, "__wrapped__", kernel), "simulation")
    result = k.launch(args, kwargs)
    return result.outputs


__all__ = ["BenchmarkResult", "Beta1ModeError", "Kernel", "LatencyResult", "baremetal", "benchmark", "jit",
           "last_result", "profile", "simulate_kernel", "trace"]
