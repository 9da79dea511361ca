"""``nki.isa``: every registered instruction, the enums, and version queries."""

from __future__ import annotations

from nkieval.sim import isa as _isa
from nkieval.sim.context import maybe_current
from nkieval.sim.errors import NkiValidationError
from nkieval.sim.isa import INSTRUCTIONS as _INSTRUCTIONS
from nkieval.sim.isa.enums import (
    dge_mode,
    dma_engine,
    engine,
    matmul_perf_mode,
    nc_version,
    oob_mode,
    reduce_cmd,
)
from nkieval.sim.isa.registers import VirtualRegister
from nkieval.sim.isa.scalars import NkiScalar

from . import constants  # ``nki.isa.constants`` (``from nki.isa.constants import oob_mode``)

globals().update({name: info.fn for name, info in _INSTRUCTIONS.items()})

# deprecated engine aliases
tensor_engine = engine.tensor
vector_engine = engine.vector
scalar_engine = engine.scalar
gpsimd_engine = engine.gpsimd
unknown_engine = engine.unknown


def get_nc_version() -> nc_version:
    from nkieval.hardware import get_target

    ctx = maybe_current()
    return nc_version((ctx.target if ctx else get_target()).generation)


def get_nc_sub_version() -> int:
    return 0


__all__ = [*sorted(_INSTRUCTIONS), "NkiScalar", "NkiValidationError", "VirtualRegister", "constants", "dge_mode", "dma_engine", "engine", "get_nc_sub_version",
           "get_nc_version", "matmul_perf_mode", "nc_version", "oob_mode", "reduce_cmd"]
del _isa
