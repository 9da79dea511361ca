"""MIG001 thread-by-thread-port: the NKI port reproduces the CUDA thread/block decomposition instead of tiling for 128 lanes.

## What it does
When the CUDA kernel computes per thread (`threadIdx`/`blockIdx` indexing), flags an NKI port
that moves or computes one element or one row per instruction (the evidence of NKI014/NKI015),
or that maps the CUDA grid onto the NKI launch grid (`nl.program_id(axis > 0)`, or
`program_id` multiplied by a CUDA block size).

## Why is this bad
A CUDA thread corresponds to one *lane* of a 128-lane engine instruction, not to an iteration of
a Python loop. A literal port issues thousands of tiny instructions and DMAs, each paying fixed
overhead; the NKI launch grid means logical NeuronCores (1 or 2), not CUDA blocks.

## Example
```python
for i in range(n):                       # CUDA: one thread per element
    nisa.dma_copy(dst=t[0:1, 0:1], src=a[i:i + 1, 0:1])
```

## Use instead
```python
for i in range(math.ceil(n / 128)):     # one [128, F] tile per iteration
    rows = min(128, n - i * 128)
    nisa.dma_copy(dst=t[0:rows], src=a[i * 128:i * 128 + rows])
```

## References
- migration.md §1.3 (Thread, Block, Grid rows) and §5.2 criteria I2, I7.
- NKI docs, LNC overview (`program_id` is the logical core id).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from nkieval.analysis.finding import Finding
from nkieval.analysis.migration.context import MigrationContext
from nkieval.analysis.nki.model import walk
from nkieval.analysis.rule import make_rule


def check(ctx: MigrationContext) -> Iterator[Finding]:
    k = ctx.cuda_kernel_with(lambda k: any(i.startswith(("threadIdx", "blockIdx")) for i in k.thread_indexing))
    if k is None:
        return
    evidence = ctx.findings_of("NKI014") + ctx.findings_of("NKI015")
    for ev in evidence[:3]:
        yield RULE.finding(
            f"literal port of CUDA kernel `{k.name}` (line {k.line}, one thread per element): {ev.message}",
            ev.line, ev.col, "map CUDA threads onto the lanes of one instruction over a [128, F] tile; loop over "
                             "tiles, not over elements or rows")
    block_sizes = {v for lc in ctx.cuda.launches for v in lc.block_values}
    for c in ctx.calls:
        if c.qn != "nl.program_id":
            continue
        axis = ctx.nki.int_value(c.arg("axis", 0))
        parent_mult = _multiplied_by(ctx, c.node, block_sizes)
        if (axis is not None and axis > 0) or parent_mult:
            yield RULE.finding(
                f"nl.program_id({axis if axis is not None else ''}) is used as a CUDA block index (CUDA kernel "
                f"`{k.name}` launches a grid of blocks); the NKI launch grid is the logical-core count (1 or 2)",
                c.line, c.col, "iterate over tiles inside one kernel call; use program_id only to split work "
                               "between the two logical cores of LNC=2")


def _multiplied_by(ctx: MigrationContext, call: ast.Call, sizes: set[int]) -> bool:
    for node in walk(ctx.nki.tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult) and call in (node.left, node.right):
            other = node.right if node.left is call else node.left
            v = ctx.nki.int_value(other)
            return v is not None and v in sizes
    return False


RULE = make_rule(__doc__, id="MIG001", name="thread-by-thread-port", severity="warning", category="fidelity",
                 check=check)
