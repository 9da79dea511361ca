"""The NKI instruction set (destination-passing ``nisa.*``), one module per engine or family.

Every module in this package is imported here, by name (a test checks that none is left out); each
registers its instructions in ``INSTRUCTIONS`` with the ``@instruction`` decorator, and every registered
instruction is exported from this package (and from the ``nki.isa`` front end) under its ISA name.
"""

# the instruction modules, imported for their registrations (no module is named after one of its
# instructions: the package exports each instruction under its name)
from nkieval.sim.isa import (  # noqa: F401
    collectives,
    dma,
    dma_sum,
    fused,
    gather,
    gpsimd,
    mx,
    random,
    registers,
    scalar,
    scalar_activate2,
    scalars,
    search,
    select,
    stats,
    tensor_engine,
    vector,
    vector_accumulate,
)
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

globals().update({_name: _info.fn for _name, _info in INSTRUCTIONS.items()})

__all__ = [*sorted(INSTRUCTIONS), "INSTRUCTIONS", "InstructionInfo", "dge_mode", "dma_engine", "engine",
           "matmul_perf_mode", "nc_version", "oob_mode", "reduce_cmd"]
