"""The compiler model: documented Neuron-compiler transformations applied to the trace before it is
scheduled, so that the estimate times what the compiled program would run, not what the simulator
executed. Each pass is named, switchable and reports what it changed (docs/perf.md, "Compiler model").

Passes read the trace only (``perf`` never calls the simulator) and are conservative: a pass that cannot
show a change is safe leaves the instructions as they are.
"""

from __future__ import annotations

from types import MappingProxyType

from nkieval.perf.compiler import broadcast, dead_stores, engine_balance, merge_iterations, redundant_loads
from nkieval.perf.compiler.model import (
    CompilerOptionError,
    CompilerOptions,
    CompilerPass,
    CompilerReport,
    PassReport,
    run_passes,
)
from nkieval.sim.trace import Trace

_NKI_DOCS = "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.23.0/general/nki/"

#: the passes, in the order they run
PASSES: tuple[CompilerPass, ...] = (
    CompilerPass(
        "broadcast-lowering", "a partition broadcast (nl.broadcast_to of [1, F] to [P, F]) evacuates its PSUM "
        "chunks straight into the result tile, each on the least loaded engine that may read PSUM",
        "nki.isa.tensor_copy casts to the destination's dtype and leaves the engine to the compiler "
        f"({_NKI_DOCS}api/generated/nki.isa.tensor_copy.html); nki.language.broadcast_to returns a new SBUF tile "
        f"and takes no engine argument ({_NKI_DOCS}api/generated/nki.language.broadcast_to.html); the "
        "alternative, nki.isa.nc_stream_shuffle per 32-partition quadrant, costs max(64, F) Vector cycles each "
        f"({_NKI_DOCS}api/generated/nki.isa.nc_stream_shuffle.html)",
        True, broadcast.run),
    CompilerPass(
        "dead-stores", "remove on-chip writes that are overwritten whole or never read; fold memset(0) into the "
        "first accumulating matmul of its PSUM region",
        "dead-code elimination of the Neuron compiler's middle end; nki.isa.nc_matmul accumulate semantics "
        f"(a new accumulation group overwrites PSUM): {_NKI_DOCS}api/generated/nki.isa.nc_matmul.html",
        True, dead_stores.run),
    CompilerPass(
        "redundant-loads", "hoist a load repeated unchanged by consecutive iterations of its innermost "
        "affine_range loop out of that loop",
        "nki.language.affine_range: iterations without loop-carried dependencies let the compiler optimise "
        f"across them ({_NKI_DOCS}api/generated/nki.language.affine_range.html); loop-invariant code motion "
        "limited to the innermost loop, as the matmul tutorial's manual 'hoist loads' step shows "
        f"({_NKI_DOCS}tutorials/matrix_multiplication.html)",
        True, redundant_loads.run),
    CompilerPass(
        "merge-iterations", "merge consecutive affine_range iterations of an elementwise instruction on "
        "adjacent slices into one wider instruction",
        "nki.language.affine_range: 'allows the compiler to perform more aggressive optimizations such as loop "
        f"vectorization' ({_NKI_DOCS}api/generated/nki.language.affine_range.html); NKI performance guide: fewer, "
        f"larger instructions amortise the fixed instruction overhead ({_NKI_DOCS}nki_perf_guide.html)",
        True, merge_iterations.run),
    CompilerPass(
        "engine-balance", "place tensor_copy / tensor_scalar / memset left to the compiler on the least loaded "
        "allowed engine (off by default: the trace does not say whether the kernel pinned the engine)",
        "nki.isa engine selection: engine=unknown lets the compiler choose "
        f"({_NKI_DOCS}api/nki.api.shared.html); allowed engines per instruction from the nki.isa reference "
        f"({_NKI_DOCS}api/generated/nki.isa.tensor_copy.html, nki.isa.tensor_scalar.html, nki.isa.memset.html)",
        False, engine_balance.run),
)
PASS_BY_NAME = MappingProxyType({p.name: p for p in PASSES})


def compile_trace(trace: Trace, options: CompilerOptions | None = None) -> tuple[Trace, CompilerReport]:
    """The trace the compiled program would run, and what each pass did (``options``: which run)."""
    return run_passes(trace, PASSES, options or CompilerOptions())


def parse_options(settings: list[str] | tuple[str, ...]) -> CompilerOptions:
    """``--compiler-pass NAME=on|off`` settings (``all=off`` first switches every pass off)."""
    return CompilerOptions.parse(settings, PASS_BY_NAME)


__all__ = ["PASSES", "PASS_BY_NAME", "CompilerOptionError", "CompilerOptions", "CompilerPass", "CompilerReport",
           "PassReport", "compile_trace", "parse_options"]
