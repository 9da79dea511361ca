"""The NKI instruction set (destination-passing ``nisa.*``), one module per engine."""

from nkieval.sim.isa.core import INSTRUCTIONS, InstructionInfo
from nkieval.sim.isa.dma import dma_copy, dma_transpose
from nkieval.sim.isa.enums import dge_mode, dma_engine, engine, matmul_perf_mode, nc_version, oob_mode, reduce_cmd
from nkieval.sim.isa.gpsimd import iota
from nkieval.sim.isa.scalar import activation, activation_reduce
from nkieval.sim.isa.tensor_engine import nc_matmul, nc_transpose
from nkieval.sim.isa.vector import memset, reciprocal, tensor_copy, tensor_reduce, tensor_scalar, tensor_tensor

__all__ = [
    "INSTRUCTIONS", "InstructionInfo", "activation", "activation_reduce", "dge_mode", "dma_copy", "dma_engine",
    "dma_transpose", "engine", "iota", "matmul_perf_mode", "memset", "nc_matmul", "nc_transpose", "nc_version",
    "oob_mode", "reciprocal", "reduce_cmd", "tensor_copy", "tensor_reduce", "tensor_scalar", "tensor_tensor",
]
