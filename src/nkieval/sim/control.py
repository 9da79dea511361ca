"""Runtime (device-side) control flow: nl.fori_loop, nl.while_loop, nl.dynamic_range, nl.no_reorder.

Unlike ``affine_range`` & co., which the NKI tracer unrolls, these loops run on the device
with bounds held in engine registers (``VirtualRegister``). The simulator executes them
directly: the body runs once per iteration with the register value of that iteration.
The induction value is handed to the body as a register (read-only for ``dynamic_range``,
a by-value copy for ``fori_loop``/``while_loop``), so kernels cannot treat it as a Python
int — on device its value is unknown at compile time. Iterations appear in the trace's
loop context as ``("dynamic", i, trip)`` (trip is -1 for while loops).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from nkieval.sim.context import current
from nkieval.sim.errors import NkiValidationError
from nkieval.sim.isa.registers import VirtualRegister

#: A while loop that has not ended after this many iterations is reported as non-terminating.
MAX_WHILE_ITERATIONS = 1 << 20


def _bound(x: Any, role: str, api: str) -> int:
    from nkieval.sim.isa.scalars import NkiScalar

    if isinstance(x, VirtualRegister):
        return x.get(role)
    if isinstance(x, NkiScalar):
        if api == "dynamic_range":
            raise NkiValidationError(f"{role}: nl.dynamic_range takes ints or VirtualRegisters; NkiScalar bounds "
                                     "belong to nl.fori_loop", instruction=api, operand=role, rule="argument")
        if x.bits > 32:
            raise NkiValidationError(f"{role} is an {x.dtype} NkiScalar; a loop bound must be 32-bit (the trip-count "
                                     "comparison has no 64-bit form)", instruction=api, operand=role, rule="dtype")
        return x.get(role)
    if isinstance(x, int | np.integer) and not isinstance(x, bool):
        return int(x)
    raise NkiValidationError(f"{role} must be an int, a VirtualRegister or an NkiScalar, got {type(x).__name__}",
                             instruction=api, operand=role, rule="argument")


def _step(step: Any, api: str) -> int:
    if isinstance(step, VirtualRegister) or not isinstance(step, int | np.integer) or isinstance(step, bool):
        raise NkiValidationError(f"step must be a compile-time positive int, got {step!r}", instruction=api,
                                 operand="step", rule="argument")
    if step <= 0:
        raise NkiValidationError(f"step must be positive, got {step}", instruction=api, operand="step",
                                 rule="argument")
    return int(step)


def _not_in_no_reorder(ctx: Any, api: str) -> None:
    if ctx.__dict__.get("no_reorder_depth", 0):
        raise NkiValidationError(f"nl.{api} is not supported inside a no_reorder block", instruction=api,
                                 rule="kernel")


def dynamic_range(start: Any, stop: Any = None, step: int = 1) -> Iterator[VirtualRegister]:
    """Device loop with register (or int) bounds; yields a read-only induction register (deprecated in 0.6)."""
    ctx = current()
    if stop is None:
        start, stop = 0, start
    lo, hi, st = _bound(start, "start", "dynamic_range"), _bound(stop, "stop", "dynamic_range"), _step(step,
                                                                                                  "dynamic_range")
    if ctx.recorder is not None:  # traced once, with a symbolic induction register
        return ctx.recorder.iterate(ctx, "dynamic_range", [start, stop, step], lo)
    return _iterate(ctx, range(lo, hi, st), frozen=True)


def _iterate(ctx: Any, r: range, frozen: bool) -> Iterator[VirtualRegister]:
    frame = ctx.push_loop("dynamic", len(r))
    try:
        for i in r:
            ctx.set_loop_index(frame, i)
            yield VirtualRegister(i, frozen=frozen, name="i")
    finally:
        ctx.pop_loop(frame)


def fori_loop(lower: Any, upper: Any, body_fun: Callable[[VirtualRegister], Any], step: int = 1) -> None:
    """``for i in range(lower, upper, step): body_fun(i)`` on device; ``i`` arrives as a register, by value."""
    ctx = current()
    _not_in_no_reorder(ctx, "fori_loop")
    if not callable(body_fun):
        raise NkiValidationError("body_fun must be callable", instruction="fori_loop", operand="body_fun",
                                 rule="argument")
    r = range(_bound(lower, "lower", "fori_loop"), _bound(upper, "upper", "fori_loop"), _step(step, "fori_loop"))
    from nkieval.sim.isa.scalars import NkiScalar

    # The body gets an NkiScalar when a bound is one (and no bound is a register), else a register.
    as_scalar = any(isinstance(b, NkiScalar) for b in (lower, upper)) and \
        not any(isinstance(b, VirtualRegister) for b in (lower, upper))
    if ctx.recorder is not None:
        first = NkiScalar(r.start, "int32") if as_scalar else VirtualRegister(r.start, name="i")
        _trace_body(ctx, "fori_loop", [lower, upper, step], first, body_fun)
        return
    for reg in _iterate(ctx, r, frozen=False):
        body_fun(NkiScalar(reg.get(), "int32") if as_scalar else reg)


def while_loop(init: Any, body_fun: Callable[[VirtualRegister], Any]) -> None:
    """``r = init; while r != 0: r = body_fun(r)`` on device (a true while: skipped when init is 0)."""
    ctx = current()
    _not_in_no_reorder(ctx, "while_loop")
    if not isinstance(init, VirtualRegister):
        raise NkiValidationError(f"init must be a VirtualRegister, got {type(init).__name__}",
                                 instruction="while_loop", operand="init", rule="argument")
    if not callable(body_fun):
        raise NkiValidationError("body_fun must be callable", instruction="while_loop", operand="body_fun",
                                 rule="argument")
    if ctx.recorder is not None:
        _trace_body(ctx, "while_loop", [init], VirtualRegister(init.get("init"), name="r"), body_fun)
        return
    r = init
    frame = ctx.push_loop("dynamic", -1)
    try:
        i = 0
        while r.get("init") != 0:
            if i >= MAX_WHILE_ITERATIONS:
                raise NkiValidationError(f"while_loop did not terminate within {MAX_WHILE_ITERATIONS} iterations",
                                         instruction="while_loop", rule="kernel")
            ctx.set_loop_index(frame, i)
            r = body_fun(VirtualRegister(r.get(), name="r"))
            if not isinstance(r, VirtualRegister):
                raise NkiValidationError(f"body_fun must return the next condition VirtualRegister, got "
                                         f"{type(r).__name__}", instruction="while_loop", operand="body_fun",
                                         rule="argument")
            i += 1
    finally:
        ctx.pop_loop(frame)


def _trace_body(ctx: Any, kind: str, params: list[Any], induction: Any, body_fun: Callable[[Any], Any]) -> None:
    """Record a device loop: its body traced once with a symbolic induction value (the judge's replay runs
    it as many times as the device values say)."""
    rec = ctx.recorder
    with rec.loop(ctx, kind, params, induction) as ev:
        nxt = body_fun(induction)
        if kind == "while_loop":
            if not isinstance(nxt, VirtualRegister):
                raise NkiValidationError(f"body_fun must return the next condition VirtualRegister, got "
                                         f"{type(nxt).__name__}", instruction=kind, operand="body_fun",
                                         rule="argument")
            ev[5] = rec.encode(nxt)


@contextlib.contextmanager
def no_reorder() -> Iterator[None]:
    """Keep program order in this block. The simulator always runs in program order; this only
    marks the region (and rejects register-based loops inside it, as the compiler does)."""
    ctx = current()
    ctx.no_reorder_depth = ctx.__dict__.get("no_reorder_depth", 0) + 1
    try:
        yield
    finally:
        ctx.no_reorder_depth -= 1


__all__ = ["dynamic_range", "fori_loop", "no_reorder", "while_loop"]
