"""Engine-sequencer registers: VirtualRegister, register_alloc/move/load/store (NKI 0.2–0.7).

A register holds one 32-bit value at run time. In the simulator the "run time" is now, so a
``VirtualRegister`` simply carries its current int value; it can be a loop bound
(``nl.dynamic_range``/``fori_loop``/``while_loop``) or a ``scalar_offset``. What the NKI
tracer forbids we forbid too: a register is not a Python int (``int(reg)``, ``if reg:``
outside ``while reg:``, ``range(reg)`` raise), because on hardware its value is unknown
when the kernel is compiled. Registers per program are counted against the 64 physical
registers of an engine sequencer.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nkieval.sim import dtypes as dt
from nkieval.sim.device_values import VirtualRegister, _wrap32
from nkieval.sim.errors import NkiValidationError
from nkieval.sim.isa.core import check_buffer, instruction, record, tensor_arg, write
from nkieval.sim.tensor import NkiTensor

_REG_DTYPES = (dt.uint8, dt.uint16, dt.uint32, dt.int8, dt.int16, dt.int32, dt.float32)


def _register(x: Any, role: str) -> VirtualRegister:
    if not isinstance(x, VirtualRegister):
        raise NkiValidationError(f"{role} must be a VirtualRegister from nisa.register_alloc(), got "
                                 f"{type(x).__name__}", operand=role, rule="argument")
    return x


def _writable(r: VirtualRegister, role: str) -> None:
    if r.frozen:
        raise NkiValidationError(f"{role} is a loop induction register and is read-only", operand=role,
                                 rule="argument")


def _count(ctx: Any) -> None:
    n = ctx.__dict__.get("registers_live", 0) + 1
    ctx.registers_live = n
    limit = ctx.target.engine_registers
    if n > limit:
        ctx.warn(f"{n} virtual registers allocated; an engine sequencer has {limit} physical registers, so the "
                 "compiler must spill or fail", rule="instruction-limit", instruction="register_alloc")


def _one_element(ctx: Any, t: NkiTensor, role: str) -> None:
    check_buffer(t, role, ("sbuf", "hbm"), "registers load from and store to SBUF or HBM")
    if t.size != 1:
        raise NkiValidationError(f"{role} must hold exactly one element ([1] or [1, 1]), got {list(t.shape)}",
                                 operand=role, rule="shape-mismatch")
    if t.dtype not in _REG_DTYPES:
        raise NkiValidationError(f"{role} dtype {t.dtype} does not fit a 32-bit register (expected one of "
                                 f"{', '.join(d.name for d in _REG_DTYPES)})", operand=role, rule="dtype")


@instruction("register_alloc", "sync")
def register_alloc(ctx: Any, x: Any = None) -> VirtualRegister:
    """A new register, uninitialised (``None``), holding the immediate integer ``x``, or loaded from the one
    element of a tensor ``x`` (SBUF or HBM, as ``register_load``)."""
    if isinstance(x, NkiTensor):
        _count(ctx)
        r = VirtualRegister()
        _load_into(ctx, r, x, "x")
        return r
    if x is not None and (isinstance(x, bool) or not isinstance(x, int | np.integer)):
        raise NkiValidationError(f"register_alloc takes None, an int or a one-element tensor, got "
                                 f"{type(x).__name__}", operand="x", rule="argument")
    _count(ctx)
    return VirtualRegister(x)


@instruction("register_move", "sync")
def register_move(ctx: Any, dst: Any, src: Any) -> None:
    """``dst = src`` where src is an integer constant or another register."""
    d = _register(dst, "dst")
    _writable(d, "dst")
    if isinstance(src, VirtualRegister):
        d.value = src.get("src")
    elif isinstance(src, int | np.integer) and not isinstance(src, bool):
        d.value = _wrap32(src)
    else:
        raise NkiValidationError(f"src must be an int or a VirtualRegister, got {type(src).__name__}", operand="src",
                                 rule="argument")


@instruction("register_load", "sync")
def register_load(ctx: Any, dst: Any, src: Any) -> None:
    """Load the single (≤32-bit) element of ``src`` (SBUF or HBM) into register ``dst``."""
    d = _register(dst, "dst")
    _writable(d, "dst")
    _load_into(ctx, d, src, "src")


def _load_into(ctx: Any, d: VirtualRegister, src: Any, role: str) -> None:
    t = tensor_arg(src, role)
    _one_element(ctx, t, role)
    raw = np.asarray(t.data).reshape(-1)[:1]
    if t.dtype == dt.float32:
        f = float(raw[0])
        if not np.isfinite(f):
            raise NkiValidationError(f"{role} holds {f}, which cannot be used as a register value", operand=role,
                                     rule="argument")
        d.value = int(f) if f.is_integer() else f
    else:
        d.value = _wrap32(int(raw.astype(np.int64)[0]))
    record(ctx, "register_load", "sync", [(t, role, "r")])


@instruction("register_store", "sync")
def register_store(ctx: Any, dst: Any, src: Any) -> None:
    """Store register ``src`` into the single element of ``dst`` (SBUF or HBM)."""
    t = tensor_arg(dst, "dst")
    r = _register(src, "src")
    _one_element(ctx, t, "dst")
    r.get("src")
    write(ctx, t, np.full(t.shape, r._value, dtype=np.float64))
    record(ctx, "register_store", "sync", [(t, "dst", "w")])
