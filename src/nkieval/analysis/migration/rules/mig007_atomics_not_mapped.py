"""MIG007 atomics-not-mapped: CUDA atomics became a read-modify-write of the output in HBM.

## What it does
When the CUDA kernel uses `atomicAdd`/`atomicMax`/... (split-K, histograms, scatter-add), flags
an NKI port that reads back its own HBM output to add into it, instead of accumulating on chip.

## Why is this bad
NKI has no atomics and needs none: matmul partial sums accumulate in PSUM, reductions run over
whole tiles, and scatter-adds use `nisa.dma_compute`. A load-add-store round trip through HBM
costs two DMAs per update and, with duplicate indices, loses updates.

## Example
```python
# CUDA: atomicAdd(&y[row], partial);
nisa.dma_copy(dst=old, src=out[r0:r1])
nisa.tensor_tensor(dst=new, data1=old, data2=part, op=nl.add)
nisa.dma_copy(dst=out[r0:r1], src=new)
```

## Use instead
```python
nisa.nc_matmul(dst=acc_psum, stationary=a_k, moving=x_k)  # all K slices accumulate in PSUM
```

## References
- migration.md §1.3 ("Atomics" row) and §5.2 criterion F6.
- NKI docs, `nki.isa.dma_compute`.
"""

from __future__ import annotations

from collections.abc import Iterator

from nkieval.analysis.finding import Finding
from nkieval.analysis.migration.context import MigrationContext
from nkieval.analysis.nki.helpers import dma_src
from nkieval.analysis.nki.model import base_name
from nkieval.analysis.rule import make_rule


def check(ctx: MigrationContext) -> Iterator[Finding]:
    k = ctx.cuda_kernel_with(lambda k: bool(k.atomics))
    if k is None:
        return
    at = k.atomics[0]
    for c in ctx.hbm_readbacks:
        yield RULE.finding(
            f"CUDA `{k.name}` combines partial results with {at.name} (line {at.line}); the port reads its output "
            f"`{base_name(dma_src(c))}` back from HBM to add into it", c.line, c.col,
            "accumulate on chip: PSUM accumulation across K slices for matmul sums, a reduction over the whole "
            "tile otherwise, nisa.dma_compute for scatter-add")


RULE = make_rule(__doc__, id="MIG007", name="atomics-not-mapped", severity="warning", category="fidelity",
                 check=check)
