"""MIG009 sync-emulated: CUDA barriers or warp-shuffle reductions are re-created step by step in the port.

## What it does
When the CUDA kernel uses `__syncthreads` or warp shuffles, flags NKI code that imitates them:
`nl.no_reorder` blocks or `core_barrier` calls in a single-core kernel, `nc_stream_shuffle`, and
loops that halve a stride (`s //= 2`, `s >>= 1`) — a shuffle-reduction tree rebuilt in Python.

## Why is this bad
NKI programs have sequential semantics; the compiler inserts every cross-engine synchronisation
from data dependencies, so barriers are noise that also blocks reordering. A reduction is one
`tensor_reduce` (free axis) or one matmul against a ones vector (partition axis) per tile, not
log2(n) shifted copies.

## Example
```python
s = 64
while s > 0:
    nisa.tensor_tensor(dst=buf[0:s], data1=buf[0:s], data2=buf[s:2 * s], op=nl.add)
    s //= 2
```

## Use instead
```python
nisa.tensor_reduce(dst=total, op=nl.add, data=buf, axis=1)
```

## References
- migration.md §1.3 ("__syncthreads" and "Warp shuffles" rows).
- NKI docs, "NKI language guide" (sequential semantics).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from nkieval.analysis.finding import Finding
from nkieval.analysis.migration.context import MigrationContext
from nkieval.analysis.nki.model import walk
from nkieval.analysis.rule import make_rule


def check(ctx: MigrationContext) -> Iterator[Finding]:
    k = ctx.cuda_kernel_with(lambda k: k.syncthreads > 0 or bool(k.warp_ops))
    if k is None:
        return
    what = "__syncthreads" if k.syncthreads else k.warp_ops[0].name
    for c in ctx.calls:
        if c.qn in ("nl.no_reorder", "nisa.core_barrier", "nisa.nc_stream_shuffle"):
            yield RULE.finding(
                f"`{c.qn}` imitates CUDA `{k.name}`'s {what}; NKI inserts synchronisation from data dependencies",
                c.line, c.col, "remove it, and express reductions as one tensor_reduce per tile",
                severity="info" if c.qn != "nisa.nc_stream_shuffle" else None)
    for f in ctx.nki.nki_functions:
        for node in walk(f.node):
            if isinstance(node, ast.AugAssign) and (
                    (isinstance(node.op, ast.FloorDiv | ast.Div) and ctx.nki.int_value(node.value) == 2)
                    or (isinstance(node.op, ast.RShift) and ctx.nki.int_value(node.value) == 1)):
                yield RULE.finding(
                    f"a halving stride (`{ast.unparse(node)}`) rebuilds CUDA `{k.name}`'s tree reduction step by "
                    f"step", node.lineno, node.col_offset + 1,
                    "reduce the whole tile at once: nisa.tensor_reduce along the free axis, or nc_matmul with a ones "
                    "vector across partitions")


RULE = make_rule(__doc__, id="MIG009", name="sync-emulated", severity="warning", category="fidelity", check=check)
