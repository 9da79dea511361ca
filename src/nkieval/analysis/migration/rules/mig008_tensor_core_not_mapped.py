"""MIG008 tensor-core-not-mapped: the CUDA kernel contracts on tensor cores or in an inner-product loop, the port never uses TensorE.

## What it does
When the CUDA kernel uses WMMA/`mma.sync`, or accumulates `a[..] * b[..]` in a loop (a matmul or
GEMV written by hand), flags an NKI port with no `nc_matmul`/`nl.matmul`. When CUDA fed 16-bit
inputs to tensor cores and the port feeds fp32 tiles to `nc_matmul`, adds a performance note.

## Why is this bad
Contractions belong on TensorE, which provides over 90% of a NeuronCore's FLOPs. A port that
does them on VectorE (multiply + reduce) or in Python loops is orders of magnitude slower; fp32
matmul inputs run at a quarter of the bf16 rate when CUDA already used half precision.

## Example
```python
# CUDA: wmma::mma_sync(fc, fa, fb, fc);
nisa.tensor_tensor(dst=prod, data1=a_t, data2=b_t, op=nl.multiply)
nisa.tensor_reduce(dst=c_t, op=nl.add, data=prod, axis=1)
```

## Use instead
```python
nisa.nc_matmul(dst=c_psum, stationary=a_k, moving=b_k)  # K on partitions, PSUM accumulation
```

## References
- migration.md §1.3 ("Tensor cores" row) and §5.2 criterion I3.
- NKI docs, `nki.isa.nc_matmul`; Trainium architecture guide (TensorE).
"""

from __future__ import annotations

from collections.abc import Iterator

from nkieval.analysis.finding import Finding
from nkieval.analysis.migration.context import MigrationContext
from nkieval.analysis.rule import make_rule

_HALF = {"half", "__half", "__nv_bfloat16", "nv_bfloat16", "at::Half", "at::BFloat16"}


def check(ctx: MigrationContext) -> Iterator[Finding]:
    k = ctx.cuda_kernel_with(lambda k: bool(k.tensor_core) or "inner_product_loop" in k.patterns)
    if k is None or not ctx.nki.kernels:
        return
    tc = sorted(k.tensor_core, key=lambda c: "mma" not in c.name)
    how = f"tensor cores ({tc[0].name}, line {tc[0].line})" if tc else "an inner-product loop"
    if not ctx.matmuls:
        kern = ctx.nki.kernels[0]
        ev = ctx.findings_of("NKI012")
        line, col = (ev[0].line, ev[0].col) if ev else (kern.node.lineno, kern.node.col_offset + 1)
        yield RULE.finding(
            f"CUDA `{k.name}` (line {k.line}) contracts with {how}; the port has no nc_matmul/nl.matmul, so the "
            f"contraction runs on VectorE or in loops", line, col,
            "put the contraction dimension on the partition axis and use nisa.nc_matmul with PSUM accumulation",
            severity="error" if k.tensor_core else None)
        return
    if k.tensor_core and set(k.float_types) & _HALF and "float32" in ctx.matmul_input_dtypes():
        c = ctx.matmuls[0]
        yield RULE.finding(
            f"CUDA `{k.name}` feeds 16-bit inputs to tensor cores; the port's matmul inputs are fp32 (4x slower on "
            f"TensorE)", c.line, c.col, "use bf16 matmul inputs; PSUM still accumulates in fp32", severity="info")


RULE = make_rule(__doc__, id="MIG008", name="tensor-core-not-mapped", severity="warning", category="fidelity",
                 check=check)
