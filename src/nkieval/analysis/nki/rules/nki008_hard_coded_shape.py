"""NKI008 hard-coded-shape: the kernel bakes in the test shapes instead of reading them from its inputs.

## What it does
Flags three ways of over-specialising a kernel to the shapes it was tested on:
- an HBM output allocated with literal dimensions;
- an `assert`/comparison of an input's `.shape` against literal sizes;
- a tiling loop with a literal trip count in a kernel that never reads any input's `.shape`.

## Why is this bad
Reviews run hidden shapes (including sizes that are not multiples of 128/512). A kernel sized
for the public shapes silently computes the wrong region, or fails, on every other shape. It is
also a known reward hack ("shape hard-coding").

## Example
```python
out = nl.ndarray((256, 1024), dtype=nl.float32, buffer=nl.shared_hbm)
for i in range(2):
    ...
```

## Use instead
```python
n, f = x.shape
out = nl.ndarray((n, f), dtype=x.dtype, buffer=nl.shared_hbm)
for i in range(math.ceil(n / 128)):
    ...
```

## References
- anchors-eval.md §3 A.12 (shape hard-coding and over-specialisation).
- NKI docs, "NKI language guide": kernels are specialised per input shape at trace time.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from nkieval.analysis.finding import Finding
from nkieval.analysis.nki.helpers import HBM_BUFFERS, is_hbm_load
from nkieval.analysis.nki.model import FunctionModel, SourceModel, walk
from nkieval.analysis.rule import make_rule


def _reads_shapes(f: FunctionModel) -> bool:
    params = set(f.params)
    return any(a.kind == "meta" and a.name in params for a in f.accesses) or bool(f.shape_names)


def _literal_sizes(model: SourceModel, f: FunctionModel, node: ast.AST) -> bool:
    if isinstance(node, ast.Tuple | ast.List):
        vals = [model.int_value(e, f) for e in node.elts]
        return bool(vals) and all(v is not None for v in vals)
    return model.int_value(node, f) is not None


def check(model: SourceModel) -> Iterator[Finding]:
    for f in model.kernels:
        for a in f.allocs:
            if a.buffer in HBM_BUFFERS and a.shape:
                dims = [model.int_value(d, f) for d in a.shape]
                if all(d is not None for d in dims) and any(d and d > 1 for d in dims):
                    yield RULE.finding(
                        f"output `{a.name}` has the fixed shape {tuple(dims)}; any other input shape gets a "
                        f"wrongly sized result", a.line, a.call.col,
                        "derive the output shape from the inputs' .shape")
        for node in walk(f.node):
            if isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.Eq | ast.NotEq):
                sides = [node.left, *node.comparators]
                has_shape = any(isinstance(n, ast.Attribute) and n.attr == "shape" for s in sides for n in walk(s))
                if has_shape and any(_literal_sizes(model, f, s) for s in sides):
                    yield RULE.finding(
                        f"`{ast.unparse(node)}` pins the input to one literal shape", node.lineno,
                        node.col_offset + 1, "support every shape, tiling with a clamped last tile")
        if not _reads_shapes(f):
            for loop in f.loops:
                n = model.int_value(loop.stop, f)
                body_loads = any(loop in c.loops and is_hbm_load(f, c) for c in f.calls)
                if n is not None and n > 1 and body_loads:
                    yield RULE.finding(
                        f"loop at line {loop.line} has the literal trip count {n} and the kernel never reads an "
                        f"input's .shape: it only covers the shape it was written for",
                        loop.line, loop.node.col_offset + 1,
                        "compute the trip count from x.shape (e.g. math.ceil(n / 128))")


RULE = make_rule(__doc__, id="NKI008", name="hard-coded-shape", severity="warning", category="correctness",
                 check=check)
