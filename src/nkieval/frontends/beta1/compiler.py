"""Beta-1 ``nki.compiler``: direct-allocation helpers used as ``buffer=`` and compiler directives.

``ncc.sbuf.mod_alloc(base_addr=..., num_free_tiles=(2,))`` places the blocks of a tensor at
fixed addresses (block ``i`` at physical tile ``i % n``). nkieval accepts these allocators and
checks their arguments, but allocates each logical block separately (no aliasing between
blocks that share a physical tile), so a kernel whose correctness *depends* on that aliasing,
or that overlaps live blocks by mistake, is not caught here (see docs/beta1.md).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from nkieval.sim.errors import NkiValidationError
from nkieval.sim.memory import PSUM, SBUF, Buffer


class Allocator:
    """What ``ncc.sbuf.mod_alloc(...)`` etc. return; ``nl.ndarray(buffer=...)`` reads ``.buffer``."""

    def __init__(self, buffer: Buffer, kind: str, **params: Any) -> None:
        self.buffer = buffer
        self.kind = kind
        self.params = params

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"nki.compiler.{self.buffer.kind}.{self.kind}({args})"

    def check(self, shape: tuple[int, ...], pdim: int) -> None:
        p = self.params
        part = int(p.get("base_partition", 0) or 0)
        if part < 0 or part + shape[pdim] > 128:
            raise NkiValidationError(
                f"{self!r}: partitions [{part}, {part + shape[pdim]}) exceed the 128 partitions",
                instruction="ndarray", rule="out-of-bounds")
        for key in ("num_free_tiles", "num_par_tiles", "num_bank_tiles"):
            tiles = p.get(key) or ()
            if any(int(n) <= 0 for n in tiles):
                raise NkiValidationError(f"{self!r}: {key} must be positive", instruction="ndarray", rule="argument")
        if self.buffer is PSUM and "base_bank" in p and not 0 <= int(p["base_bank"]) < 8:
            raise NkiValidationError(f"{self!r}: base_bank must be in [0, 8)", instruction="ndarray",
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
