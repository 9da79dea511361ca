"""NKI010 loop-invariant-load: an input is reloaded from HBM on every iteration of a loop it does not depend on.

## What it does
For each DMA that reads an HBM tensor inside a loop, checks whether the source slice depends on
the loop's variable (directly or through names computed from it). If it does not, the same data
is fetched again on every iteration of that loop. The innermost such loop is reported: as a
warning when the load can simply move out of it, as a note when keeping the data resident needs
one tile per iteration of an inner loop (GEMM blocking, a trade-off against SBUF space).

## Why is this bad
DMA bandwidth is usually the bottleneck and every DMA has a fixed cost. Reloading the same tile
N times multiplies HBM traffic by N. The NKI matmul tutorial's first optimisation is exactly
this hoist (TensorE busy rose from 87% to 99.85%).

## Example
```python
for m in range(m_tiles):
    for n in range(n_tiles):
        nisa.dma_copy(dst=lhs, src=a_t[:, m * 128:(m + 1) * 128])  # does not depend on n
        ...
```

## Use instead
```python
for m in range(m_tiles):
    nisa.dma_copy(dst=lhs, src=a_t[:, m * 128:(m + 1) * 128])  # once per m
    for n in range(n_tiles):
        ...
```

## References
- NKI docs, matrix-multiplication tutorial and performance guide (Opt #1, hoisting loads).
- migration.md §2.1 P6.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from nkieval.analysis.finding import Finding
from nkieval.analysis.nki.helpers import dma_src, is_hbm_load, loop_label
from nkieval.analysis.nki.model import FunctionModel, Loop, SourceModel, base_name, names_in
from nkieval.analysis.rule import make_rule


def _varying(f: FunctionModel, loop: Loop) -> set[str]:
    """Names whose value changes from one iteration of ``loop`` to the next: those derived from its
    variable, and tiles written inside it (an indirect DMA's ``scalar_offset=pid``, where ``pid`` is
    loaded from a block table in the loop, depends on the loop through the data)."""
    return loop.dependent | {a.name for a in f.accesses if a.kind == "write" and loop in a.loops}


def check(model: SourceModel) -> Iterator[Finding]:
    for f in model.nki_functions:
        for c in f.calls:
            if not c.loops or not is_hbm_load(f, c):
                continue
            src = dma_src(c)
            used = names_in(src)
            for depth in range(len(c.loops) - 1, -1, -1):
                loop = c.loops[depth]
                n = model.int_value(loop.stop, f)
                if (n is not None and n <= 1) or used & _varying(f, loop):
                    continue
                inner = [lp for lp in c.loops[depth + 1:] if used & _varying(f, lp)]
                text = ast.unparse(src) if src is not None else "?"
                if not inner:
                    yield RULE.finding(
                        f"`{base_name(src)}` is reloaded from HBM on every iteration of the {loop_label(loop)}, "
                        f"but the slice `{text}` does not depend on that loop", c.line, c.col,
                        "hoist this load out of that loop (load once, keep the tile in SBUF)")
                else:
                    yield RULE.finding(
                        f"`{base_name(src)}` tiles are reloaded on every iteration of the {loop_label(loop)}; the "
                        f"slice `{text}` varies only with the inner {loop_label(inner[0])}", c.line, c.col,
                        "keep all of those tiles resident in SBUF across the outer loop (block the loop nest) if "
                        "the SBUF budget allows, or reorder loops so the largest operand is loaded once",
                        severity="info")
                break


RULE = make_rule(__doc__, id="NKI010", name="loop-invariant-load", severity="warning", category="performance",
                 check=check)
