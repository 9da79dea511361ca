"""NKI014 per-element-dma: a DMA inside a loop moves one element or one row at a time.

## What it does
Flags DMAs (`dma_copy`, `nl.load`, `nl.store`) inside loops whose HBM-side slice is one element
wide in every dimension, or a single row selected by the loop variable: the data is moved in
pieces the size of a CUDA thread's or warp's work.

## Why is this bad
Every DMA has a fixed cost (the hardware data's `dma_fixed_ns`, plus descriptor overhead), and
transfers below ~2 KiB per partition are overhead-bound. A per-element or per-row DMA loop is
the signature of a thread-by-thread port and runs orders of magnitude below DMA bandwidth.

## Example
```python
for r in range(n):
    nisa.dma_copy(dst=row_tile, src=x[r:r + 1, :])
```

## Use instead
```python
for i in range(math.ceil(n / 128)):
    rows = min(128, n - i * 128)
    nisa.dma_copy(dst=tile[0:rows], src=x[i * 128:i * 128 + rows, :])  # 128 rows per DMA
```

## References
- NKI docs, DMA bandwidth guide (≥2 KiB per partition; fixed cost per DMA).
- migration.md §1.3 ("Global memory" row) and §2.1 P8.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence

from nkieval.analysis.finding import Finding
from nkieval.analysis.nki.helpers import (
    DMA_ALL,
    dma_dst,
    dma_src,
    fact_value,
    hbm_names,
    is_unit_slice,
    loop_label,
    subscript_indices,
)
from nkieval.analysis.nki.model import FunctionModel, Loop, SourceModel, base_name, names_in, walk
from nkieval.analysis.rule import make_rule


def _ranks(f: FunctionModel) -> dict[str, int]:
    """Tensors whose rank the kernel states by unpacking their shape (``b, h, d = q.shape``)."""
    out: dict[str, int] = {}
    for node in walk(f.node):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple) \
                and isinstance(node.value, ast.Attribute) and node.value.attr == "shape" \
                and isinstance(node.value.value, ast.Name):
            out[node.value.value.id] = len(node.targets[0].elts)
    return out


def _transfers(model: SourceModel, f: FunctionModel, loops: Sequence[Loop], cost: str) -> str:
    """How many transfers the loops issue: their trip counts' product when every bound is a constant,
    else one per iteration (the count is not claimed)."""
    n = 1
    for lp in loops:
        k = model.int_value(lp.stop, f)
        if k is None:
            return f"one small transfer per iteration{cost}"
        n *= k
    return f"{n:,} small transfer{'s' if n != 1 else ''}{cost}"


def check(model: SourceModel) -> Iterator[Finding]:
    fixed = fact_value(model.target, "dma_fixed_ns")
    cost = f" (~{fixed} ns fixed cost each on {model.target.name})" if fixed else ""
    for f in model.nki_functions:
        hbm = hbm_names(f)
        ranks = _ranks(f)
        for c in f.calls:
            if c.qn not in DMA_ALL or not c.loops:
                continue
            side = next((e for e in (dma_src(c), dma_dst(c)) if base_name(e) in hbm), None)
            idx = subscript_indices(side)
            if not idx:
                continue
            dependent = set().union(*(lp.dependent for lp in c.loops))
            unit = [is_unit_slice(i) for i in idx]
            varies = bool(names_in(idx[0]) & dependent)
            if not ((unit[0] and varies) or (all(unit) and any(names_in(i) & dependent for i in idx))):
                continue
            if not all(unit[:-1]):  # a range on a middle axis (`k_cache[bi, j0:j0 + jw, h, :]`): a block of rows
                continue
            rank = ranks.get(base_name(side) or "")
            whole = rank - len(idx) if rank is not None else None  # trailing axes the subscript leaves whole
            if whole is not None and whole >= 2:  # `q[bi]` of a 3-D q: a whole [h, d] slab
                continue
            if not all(unit) or whole == 1:
                what = f"one row of `{base_name(side)}`"
            elif whole == 0:
                what = f"one element of `{base_name(side)}`"
            else:  # the rank is unknown: name the slice rather than guess its size
                what = f"`{ast.unparse(side)}`"
            yield RULE.finding(
                f"this DMA moves {what} per iteration of the {loop_label(c.loops[-1])}: "
                f"{_transfers(model, f, c.loops, cost)} instead of a few large ones", c.line, c.col,
                "move a whole [128, F] tile per DMA (128 rows on the partition axis, a long contiguous free "
                "dimension), clamping the last tile with min()")


RULE = make_rule(__doc__, id="NKI014", name="per-element-dma", severity="warning", category="performance",
                 check=check)
