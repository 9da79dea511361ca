"""nkieval's implementation of the current ``nki`` package (NKI 0.3+ semantics), on the simulator.

``@nki.jit`` kernels and ``nki.simulate(kernel)(*args)`` run on nkieval's CPU simulator (the
only backend available without Trainium hardware). ``kernel[2](...)`` launches with LNC 2.
The trace of the last launch on this thread is available from :func:`last_result`.
"""

from __future__ import annotations

import threading as _threading
from collections.abc import Callable
from typing import Any

from nkieval.frontends.nki import isa, language, lnc, typing
from nkieval.sim.context import maybe_current
from nkieval.sim.dtypes import DType as dtype
from nkieval.sim.errors import NkiValidationError
from nkieval.sim.options import SimOptions
from nkieval.sim.runner import RunResult, run_kernel

__version__ = "0.6.0"  # the NKI API version whose semantics this front end follows

_LAST = _threading.local()


def last_result() -> RunResult | None:
    """The RunResult (outputs, trace, target) of the most recent launch on this thread."""
    return getattr(_LAST, "result", None)


class Kernel:
    """A kernel function marked with ``@nki.jit``. Index with the LNC degree: ``kernel[2](...)``."""

    def __init__(self, fn: Callable[..., Any], lnc: int = 1, **options: Any) -> None:
        self.fn = fn
        self.lnc = lnc
        self.options = options
        self.__name__ = getattr(fn, "__name__", "kernel")
        self.__qualname__ = getattr(fn, "__qualname__", self.__name__)
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def __getitem__(self, lnc: Any) -> Kernel:
        if isinstance(lnc, tuple):
            # (a one-dimensional launch grid is the LNC degree: ``kernel[(2,)]``, the form NKI 0.5 and earlier took
            # for LNC 2 and still accept when the grid matches the degree)
            if len(lnc) != 1:
                raise NkiValidationError(
                    f"kernel[{', '.join(map(str, lnc))}]: the current NKI API takes one LNC degree (1 or 2) in the "
                    "launch brackets (NKI's LNC guide: \"the bracket syntax must contain only one number\"); N-D "
                    "SPMD grids are a Beta-1 (neuronxcc.nki) feature", instruction="launch", rule="kernel")
            lnc = lnc[0]
        n = int(lnc)
        if n not in (1, 2):
            raise NkiValidationError(f"LNC degree must be 1 or 2, got {n}", instruction="launch", rule="kernel")
        return Kernel(self.fn, n, **self.options)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if maybe_current() is not None:
            # Called from inside a running kernel: a sub-kernel call, traced inline.
            return self.fn(*args, **kwargs)
        return simulate(self)(*args, **kwargs)


def jit(fn: Callable[..., Any] | None = None, **kwargs: Any) -> Any:
    """Mark a kernel. ``mode=`` is deprecated and ignored since NKI 0.3 (the framework is told from the arguments;
    NKI's migration guide, 0.2 to 0.3), so any value means a plain ``@nki.jit``: the NKI Library writes
    ``mode="trace"`` and ``mode="auto"``, kernels written for NKI 0.2 ``mode="torchxla"``. ``platform_target=``
    (still written by the current NKI samples) selects the target the kernel is simulated for. Other keyword
    options are accepted and ignored."""
    if fn is None:
        return lambda f: Kernel(f, **kwargs)
    return Kernel(fn, **kwargs)


def simulate(kernel: Any, *, target: str | int | None = None, options: SimOptions | None = None) -> Callable[..., Any]:
    """``nki.simulate(kernel)(*args)``: run on the CPU simulator, returning outputs like the inputs' kind."""
    lnc = kernel.lnc if isinstance(kernel, Kernel) else 1
    fn = kernel.fn if isinstance(kernel, Kernel) else kernel

    tgt = target if target is not None else kernel.options.get("platform_target") if isinstance(kernel, Kernel) \
        else None

    def run(*args: Any, **kwargs: Any) -> Any:
        result = run_kernel(fn, args, kwargs, target=tgt, options=options, lnc=lnc)
        _LAST.result = result
        return _like_inputs(result.outputs, (*args, *kwargs.values()))

    return run


def _like_inputs(outputs: Any, args: tuple[Any, ...]) -> Any:
    if not any(type(a).__module__.startswith("torch") for a in args):
        return outputs
    import numpy as np
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


def benchmark(*args: Any, **kwargs: Any) -> Any:
    raise NkiValidationError("nki.benchmark needs Neuron hardware; use `nkieval profile` for a performance-model "
                             "estimate", instruction="benchmark", rule="kernel")


NkiValidationError = NkiValidationError

__all__ = ["Kernel", "NkiValidationError", "dtype", "isa", "jit", "language", "last_result", "lnc", "simulate", "typing"]
