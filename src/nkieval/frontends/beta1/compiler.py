"""Beta-1 ``nki.compiler``: direct-allocation helpers used as ``buffer=`` and compiler directives.

``ncc.sbuf.mod_alloc(base_addr=..., num_free_tiles=(2,))`` places the logical blocks of a tensor
at fixed physical tiles (block ``i`` at tile ``i % 2``); ``ncc.sbuf.alloc(func)`` asks
``func(idx=, pdim_size=, fdim_size=)`` (bytes per partition) for each block's ``(start_partition, byte_addr)``
(PSUM: ``(bank, start_partition, byte_addr)``). Blocks, and tensors, placed at the same
location share one physical tile (see :func:`nkieval.frontends.beta1.language.ndarray`): a
write through one is seen through the other, as on the hardware.
"""

from __future__ import annotations

import contextlib
import inspect
import math
from collections.abc import Callable, Iterator
from typing import Any

from nkieval.frontends.beta1 import state
from nkieval.sim.errors import NkiValidationError
from nkieval.sim.memory import PSUM, SBUF, Buffer


def _modulo(base: int, tiles: tuple[int, ...], scale: int, idx: tuple[int, ...]) -> int:
    """``base + scale * linear(idx mod tiles)``, as the documented reference allocation function computes it
    (``tiles`` empty: one physical tile for every block; entries beyond the block dimensions are ignored)."""
    shape = tuple(int(n) for n in tiles) or (1,) * len(idx)
    mod = [i % n for i, n in zip(idx, shape)]
    lin = sum(i * math.prod(shape[d + 1:]) for d, i in enumerate(mod))
    return base + lin * scale


def _call_alloc_func(func: Callable[..., Any], idx: tuple[int, ...], pdim_size: int, fdim_size: int) -> Any:
    """Call an allocation function with the documented keyword parameters ``idx=, pdim_size=, fdim_size=`` (which
    ``functools.partial(f, other=...)`` with a leading ``other`` parameter relies on), positionally when its
    parameters have other names."""
    kw = {"idx": idx, "pdim_size": pdim_size, "fdim_size": fdim_size}
    try:
        inspect.signature(func).bind(**kw)
    except TypeError:
        return func(idx, pdim_size, fdim_size)
    except ValueError:  # no signature (a builtin): positional
        return func(idx, pdim_size, fdim_size)
    return func(**kw)


class Allocator:
    """What ``ncc.sbuf.mod_alloc(...)`` etc. return; ``nl.ndarray(buffer=...)`` reads ``.buffer``."""

    def __init__(self, buffer: Buffer, kind: str, **params: Any) -> None:
        self.buffer = buffer
        self.kind = kind
        self.params = params

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"nki.compiler.{self.buffer.kind}.{self.kind}({args})"

    @property
    def direct(self) -> bool:
        """Placed by the kernel (alloc / mod_alloc), not by the compiler."""
        return self.kind in ("alloc", "mod_alloc")

    def place(self, idx: tuple[int, ...], pdim_size: int, fdim_bytes: int) -> tuple[int, int, int]:
        """(bank, start_partition, byte_addr) of logical block ``idx`` (bank 0 for SBUF)."""
        p = self.params
        if self.kind == "mod_alloc":
            part = _modulo(int(p.get("base_partition", 0) or 0), p.get("num_par_tiles", ()), pdim_size, idx)
            addr = _modulo(int(p.get("base_addr", 0) or 0), p.get("num_free_tiles", ()), fdim_bytes, idx)
            bank = _modulo(int(p.get("base_bank", 0) or 0), p.get("num_bank_tiles", ()), 1, idx) \
                if self.buffer is PSUM else 0
            return bank, part, addr
        got = _call_alloc_func(p["func"], idx, pdim_size, fdim_bytes)
        try:
            loc = tuple(int(v) for v in got)
        except (TypeError, ValueError):
            loc = (got,)
        if self.buffer is PSUM and len(loc) == 3:
            return loc[0], loc[1], loc[2]
        if len(loc) != 2:
            raise NkiValidationError(f"{self!r}: the allocation function must return (start_partition, byte_addr)"
                                     f"{' or (bank, start_partition, byte_addr)' if self.buffer is PSUM else ''}, "
                                     f"got {loc}", instruction="ndarray", rule="argument")
        return 0, loc[0], loc[1]

    def check(self, shape: tuple[int, ...], pdim: int) -> None:
        p = self.params
        part = int(p.get("base_partition", 0) or 0)
        hw = state.target()
        if part < 0 or part + shape[pdim] > hw.partitions:
            raise NkiValidationError(
                f"{self!r}: partitions [{part}, {part + shape[pdim]}) exceed the {hw.partitions} partitions",
                instruction="ndarray", rule="out-of-bounds")
        for key in ("num_free_tiles", "num_par_tiles", "num_bank_tiles"):
            tiles = p.get(key) or ()
            if any(int(n) <= 0 for n in tiles):
                raise NkiValidationError(f"{self!r}: {key} must be positive", instruction="ndarray", rule="argument")
        if self.buffer is PSUM and "base_bank" in p and not 0 <= int(p["base_bank"]) < hw.psum_banks:
            raise NkiValidationError(f"{self!r}: base_bank must be in [0, {hw.psum_banks})", instruction="ndarray",
                                     rule="out-of-bounds")


class _Memory:
    """``nki.compiler.sbuf`` / ``nki.compiler.psum``."""

    def __init__(self, buffer: Buffer) -> None:
        self._buffer = buffer

    def auto_alloc(self) -> Allocator:
        return Allocator(self._buffer, "auto_alloc")

    def alloc(self, func: Callable[..., Any]) -> Allocator:
        """A user allocation function ``f(idx, pdim_size, fdim_size) -> (partition, byte_addr)``."""
        if not callable(func):
            raise NkiValidationError("alloc needs an allocation function", instruction="ndarray", rule="argument")
        return Allocator(self._buffer, "alloc", func=func)

    def mod_alloc(self, *, base_addr: int = 0, base_partition: int = 0, num_par_tiles: Any = (),
                  num_free_tiles: Any = (), base_bank: int | None = None, num_bank_tiles: Any = ()) -> Allocator:
        params: dict[str, Any] = {"base_addr": base_addr, "base_partition": base_partition,
                                  "num_par_tiles": tuple(num_par_tiles), "num_free_tiles": tuple(num_free_tiles)}
        if self._buffer is PSUM:
            params.update(base_bank=0 if base_bank is None else base_bank, num_bank_tiles=tuple(num_bank_tiles))
        return Allocator(self._buffer, "mod_alloc", **params)


sbuf = _Memory(SBUF)
psum = _Memory(PSUM)


def _passthrough(func: Any = None, **kwargs: Any) -> Any:
    if func is None:
        return lambda f: f
    return func


skip_middle_end_transformations = _passthrough
force_auto_alloc = _passthrough


def enable_stack_allocator(func: Any = None, log_level: int = 50) -> Any:
    return _passthrough(func)


@contextlib.contextmanager
def no_reorder() -> Iterator[None]:
    """Keep program order: the simulator executes in program order anyway."""
    yield


@contextlib.contextmanager
def allocation_scope() -> Iterator[None]:
    yield


def multi_buffer(factor: int = 2) -> int:
    return int(factor)


__all__ = ["Allocator", "allocation_scope", "enable_stack_allocator", "force_auto_alloc", "multi_buffer",
           "no_reorder", "psum", "sbuf", "skip_middle_end_transformations"]
