"""The CUDA fact sheet: plain frozen records, JSON-ready through ``to_dict()``.

Everything here is a *static* fact about the source text (what the code says), which is what the
migration-fidelity rules compare an NKI port against.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Param:
    name: str
    type: str  # as written, without the name: "const float* __restrict__"
    pointer: bool
    const: bool


@dataclass(frozen=True)
class SharedArray:
    """A ``__shared__`` declaration; ``dynamic`` for ``extern __shared__ T x[]``."""

    name: str
    dtype: str
    dims: tuple[str, ...]
    dynamic: bool
    line: int


@dataclass(frozen=True)
class CallSite:
    """A call of interest (intrinsic, atomic, warp primitive, tensor-core op)."""

    name: str
    line: int
    text: str = ""


@dataclass(frozen=True)
class LoopInfo:
    kind: str  # for | while | do
    var: str
    init: str
    cond: str
    step: str
    line: int
    grid_stride: bool = False


@dataclass(frozen=True)
class BoundsCheck:
    """A comparison guarding an index (``if (i < n)``, ``row < rows ? ... : ...``)."""

    lhs: str
    op: str
    rhs: str
    line: int
    context: str  # if | for | while | ternary
    bound_params: tuple[str, ...] = ()  # kernel parameters on the bound side (n, rows, ...)


@dataclass(frozen=True)
class Accumulator:
    """A variable summed/maxed inside a loop (``acc += a[i] * b[i]``), with its declared type."""

    name: str
    dtype: str
    op: str
    line: int


@dataclass(frozen=True)
class Launch:
    """A ``kernel<<<grid, block, smem, stream>>>(...)`` launch."""

    kernel: str
    grid: str
    block: str
    smem: str
    stream: str
    line: int
    template_args: tuple[str, ...] = ()
    block_values: tuple[int, ...] = ()  # block dims when statically known (literals, #define, dim3 vars)


@dataclass(frozen=True)
class KernelInfo:
    """One ``__global__`` function; facts include those of the ``__device__`` helpers it calls."""

    name: str
    line: int
    end_line: int
    templated: bool
    template_params: tuple[str, ...]
    params: tuple[Param, ...]
    shared: tuple[SharedArray, ...] = ()
    syncthreads: int = 0
    atomics: tuple[CallSite, ...] = ()
    warp_ops: tuple[CallSite, ...] = ()
    loops: tuple[LoopInfo, ...] = ()
    bounds_checks: tuple[BoundsCheck, ...] = ()
    math_calls: tuple[CallSite, ...] = ()
    accumulators: tuple[Accumulator, ...] = ()
    tensor_core: tuple[CallSite, ...] = ()
    thread_indexing: tuple[str, ...] = ()
    float_types: tuple[str, ...] = ()
    device_calls: tuple[str, ...] = ()
    patterns: tuple[str, ...] = ()
    """Derived facts: max_subtraction, online_softmax, two_pass_variance, welford, one_pass_variance,
    erf_gelu, tanh_gelu, inner_product_loop, fast_math, grid_stride_loop."""

    def math_names(self) -> set[str]:
        return {c.name for c in self.math_calls}


@dataclass(frozen=True)
class ParseIssue:
    line: int
    col: int
    text: str


@dataclass(frozen=True)
class CudaSummary:
    kernels: tuple[KernelInfo, ...]
    device_functions: tuple[str, ...]
    launches: tuple[Launch, ...]
    defines: dict[str, str] = field(default_factory=dict)
    parse_errors: tuple[ParseIssue, ...] = ()

    def kernel(self, name: str) -> KernelInfo:
        for k in self.kernels:
            if k.name == name:
                return k
        raise KeyError(f"no __global__ kernel named {name!r}; kernels: {[k.name for k in self.kernels]}")

    @property
    def patterns(self) -> set[str]:
        return {p for k in self.kernels for p in k.patterns}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
