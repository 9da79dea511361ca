"""NKI016 underfilled-partitions: the kernel tiles a large dimension with fewer than 128 partitions per tile.

## What it does
Flags SBUF/PSUM tiles whose partition dimension is a constant below the target's partition
count when the same constant is used as the tiling step of a dimension read from an input
shape (`range(n // 32)`, `math.ceil(n / 32)`), and `[1, F]` tiles allocated inside a loop over
a runtime dimension.

## Why is this bad
An instruction over 32 partitions takes as long as one over 128: a quarter of every engine sits
idle. Tile sizes copied from a CUDA `blockDim` (32, 64, 256) are a common cause.

## Example
```python
for i in range(n // 32):
    t = nl.ndarray((32, f), dtype=x.dtype, buffer=nl.sbuf)
```

## Use instead
```python
P = nl.tile_size.pmax
for i in range(math.ceil(n / P)):
    t = nl.ndarray((P, f), dtype=x.dtype, buffer=nl.sbuf)
```

## References
- NKI docs, performance guide Opt #5b (fill the partition dimension).
- migration.md §2.1 P1 and §5.2 criterion I1.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from nkieval.analysis.finding import Finding
from nkieval.analysis.nki.model import FunctionModel, SourceModel, names_in, walk
from nkieval.analysis.rule import make_rule


def _tiling_steps(model: SourceModel, f: FunctionModel) -> set[int]:
    steps: set[int] = set()
    for loop in f.loops:
        for n in walk(loop.stop) if loop.stop is not None else ():
            if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div | ast.FloorDiv):
                shapey = bool(names_in(n.left) & f.shape_names) or any(
                    isinstance(m, ast.Attribute) and m.attr == "shape" for m in walk(n.left))
                v = model.int_value(n.right, f)
                if shapey and v:
                    steps.add(v)
    return steps


def check(model: SourceModel) -> Iterator[Finding]:
    full = int(model.target.partitions)
    for f in model.nki_functions:
        steps = _tiling_steps(model, f)
        for a in f.allocs:
            if a.buffer not in ("sbuf", "psum") or not a.shape:
                continue
            p = model.int_value(a.shape[0], f)
            if p is None or p >= full:
                continue
            if 1 < p and p in steps:
                yield RULE.finding(
                    f"`{a.name}` uses {p} of {full} partitions and the kernel tiles a runtime dimension in "
                    f"steps of {p}: {full - p} lanes of every engine idle", a.line, a.call.col,
                    f"tile that dimension by nl.tile_size.pmax ({full}) rows")
            elif p == 1 and len(a.shape) >= 2 and any(
                    lp.stop is not None and names_in(lp.stop) & f.shape_names for lp in a.call.loops):
                yield RULE.finding(
                    f"`{a.name}` is a [1, ...] tile allocated inside a loop over a runtime dimension: one "
                    f"partition per tile, {full - 1} lanes idle", a.line, a.call.col,
                    "put 128 rows on the partition axis per tile")


RULE = make_rule(__doc__, id="NKI016", name="underfilled-partitions", severity="warning", category="performance",
                 check=check)
