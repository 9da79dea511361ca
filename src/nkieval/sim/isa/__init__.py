"""The NKI instruction set (destination-passing ``nisa.*``), one module per engine or family.

Every module in this package is imported here; each registers its instructions in
``INSTRUCTIONS`` with the ``@instruction`` decorator, and every registered instruction is
exported from this package (and from the ``nki.isa`` front end) under its ISA name.
"""

import importlib as _importlib
import pkgutil as _pkgutil

from nkieval.sim.isa.core import INSTRUCTIONS, InstructionInfo
from nkieval.sim.isa.enums import (
    dge_mode,
    dma_engine,
    engine,
    matmul_perf_mode,
    nc_version,
    oob_mode,
    reduce_cmd,
)

for _m in sorted(m.name for m in _pkgutil.iter_modules(__path__)):
    if _m not in ("core", "enums"):
        _importlib.import_module(f"{__name__}.{_m}")
globals().update({_name: _info.fn for _name, _info in INSTRUCTIONS.items()})

__all__ = [*sorted(INSTRUCTIONS), "INSTRUCTIONS", "InstructionInfo", "dge_mode", "dma_engine", "engine",
           "matmul_perf_mode", "nc_version", "oob_mode", "reduce_cmd"]
