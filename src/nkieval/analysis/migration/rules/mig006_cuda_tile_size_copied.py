"""MIG006 cuda-tile-size-copied: the port sizes its SBUF tiles from the CUDA block or shared-memory tile size.

## What it does
Flags NKI on-chip tiles whose partition dimension is a literal smaller than the target's
partition count and equal to a CUDA block dimension, a `__shared__` array dimension or a CUDA
`#define`/template tile constant (16, 32, 64, ...).

## Why is this bad
CUDA tile sizes come from warp width, shared-memory banks and occupancy; NKI tile sizes come from
the hardware: 128 partitions, 512-element PSUM banks, matmul limits. Copying `TILE 16` into the
partition dimension leaves 112 of 128 lanes idle in every instruction. Shared-memory tiling
should become SBUF tiling at the NeuronCore's sizes.

## Example
```python
# CUDA: #define TILE 16, __shared__ float As[TILE][TILE]
a_tile = nl.ndarray((16, 16), dtype=nl.float32, buffer=nl.sbuf)
```

## Use instead
```python
a_tile = nl.ndarray((128, 512), dtype=nl.bfloat16, buffer=nl.sbuf)  # K on partitions, N ≤ 512
```

## References
- migration.md §1.3 ("Block" and "`__shared__`" rows) and §5.2 criterion I7.
- NKI docs, "Tiling overview" (tile constraints TC#1–TC#3).
"""

from __future__ import annotations

from collections.abc import Iterator

from nkieval.analysis.finding import Finding
from nkieval.analysis.migration.context import MigrationContext
from nkieval.analysis.rule import make_rule


def _cuda_sizes(ctx: MigrationContext) -> dict[int, str]:
    sizes: dict[int, str] = {}
    for lc in ctx.cuda.launches:
        for v in lc.block_values:
            sizes.setdefault(v, f"block size of the `{lc.kernel}` launch (line {lc.line})")
        for t in lc.template_args:
            if t.isdigit():
                sizes.setdefault(int(t), f"template tile size of `{lc.kernel}` (line {lc.line})")
    for k in ctx.cuda.kernels:
        for sh in k.shared:
            for d in sh.dims:
                v = int(d) if d.isdigit() else (int(ctx.cuda.defines[d]) if ctx.cuda.defines.get(d, "").isdigit() else None)
                if v is not None:
                    sizes.setdefault(v, f"__shared__ tile `{sh.name}` of `{k.name}` (line {sh.line})")
    return sizes


def check(ctx: MigrationContext) -> Iterator[Finding]:
    full = int(ctx.nki.target.partitions)
    sizes = {v: why for v, why in _cuda_sizes(ctx).items() if 1 < v < full}
    if not sizes:
        return
    for f in ctx.nki.nki_functions:
        for a in f.allocs:
            if a.buffer not in ("sbuf", "psum") or not a.shape:
                continue
            p = ctx.nki.int_value(a.shape[0], f)
            if p in sizes:
                yield RULE.finding(
                    f"`{a.name}` has {p} partitions, the {sizes[p]}: a CUDA tile size carried over, leaving "
                    f"{full - p} of {full} lanes idle", a.line, a.call.col,
                    f"size tiles from NeuronCore limits: {full} partitions (nl.tile_size.pmax), free dim up to "
                    f"512 for PSUM/matmul")


RULE = make_rule(__doc__, id="MIG006", name="cuda-tile-size-copied", severity="warning", category="fidelity",
                 check=check)
