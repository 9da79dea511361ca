"""NKI007 affine-loop-carried-dependency: an `nl.affine_range` loop reads and rewrites the same on-chip tile in every iteration.

## What it does
Flags an `nl.affine_range` loop in which a tile allocated *outside* the loop is both read and
written (at a location that does not depend on the loop variable) inside it. Matmul accumulation
into a PSUM tile (`nc_matmul` / Beta 1 `psum += nl.matmul(...)`) is the one allowed exception.

## Why is this bad
`affine_range` promises that iterations are independent. The Beta 1 compiler relied on that
promise to run iterations in parallel and pipeline them, so a carried dependency computed wrong
results; from NKI 0.3 `affine_range` is a deprecated alias of `range`, so the code works but
states something false about the loop. Either way an NKI reviewer asks for the right construct.

## Example
```python
total = nl.zeros((P, 1), dtype=nl.float32, buffer=nl.sbuf)
for i in nl.affine_range(n_tiles):
    nisa.tensor_tensor(dst=total, data1=total, data2=part, op=nl.add)
```

## Use instead
```python
for i in range(n_tiles):  # current API; Beta 1: nl.sequential_range(n_tiles)
    nisa.tensor_tensor(dst=total, data1=total, data2=part, op=nl.add)
```

## References
- Legacy NKI programming model: `affine_range` vs `sequential_range`.
- NKI migration guide (0.3): `affine_range` is an alias of `range()`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from nkieval.analysis.finding import Finding
from nkieval.analysis.nki.helpers import MATMULS
from nkieval.analysis.nki.model import FunctionModel, Loop, SourceModel, base_name, children, names_in, walk
from nkieval.analysis.rule import make_rule


def _write_index_names(node: ast.AST) -> set[str]:
    """Names in the subscript of the written expression (``t[i*128:...]`` → {i})."""
    out: set[str] = set()
    while isinstance(node, ast.Subscript | ast.Attribute | ast.Call):
        if isinstance(node, ast.Subscript):
            out |= names_in(node.slice)
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            node = node.func.value
        elif isinstance(node, ast.Attribute):
            node = node.value
        else:
            break
    return out


def _written_expr(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> ast.AST:
    """The whole written expression around the name a write access records (``v16`` →
    ``v16[0:jw, j, :]``), so its index can be read."""
    while True:
        p = parents.get(node)
        if (isinstance(p, ast.Subscript) and p.value is node) or (isinstance(p, ast.Attribute) and p.value is node):
            node = p
        elif isinstance(p, ast.Call) and p.func is node:
            node = p
        else:
            return node


def _matmul_dsts(f: FunctionModel, loop: Loop) -> set[str]:
    out: set[str] = set()
    for c in f.calls:
        if loop in c.loops and c.qn in MATMULS:
            d = c.arg("dst", 0)
            if isinstance(d, ast.AST):
                b = base_name(d)
                if b:
                    out.add(b)
    for node in walk(loop.node):  # Beta 1: acc += nl.matmul(...)
        if isinstance(node, ast.AugAssign) and isinstance(node.value, ast.Call):
            b = base_name(node.target)
            if b:
                out.add(b)
    return out


def check(model: SourceModel) -> Iterator[Finding]:
    for f in model.nki_functions:
        for loop in f.loops:
            if loop.kind != "affine_range":
                continue
            outside = {a.name for a in f.allocs if loop not in a.call.loops and a.buffer in ("sbuf", "psum")}
            allowed = _matmul_dsts(f, loop)
            parents = {c: p for p in walk(loop.node) for c in children(p)}
            reported: set[str] = set()
            for acc in f.accesses:
                if loop not in acc.loops or acc.name not in outside or acc.name in allowed or acc.kind != "write":
                    continue
                if acc.name in reported:
                    continue
                if _write_index_names(_written_expr(acc.node, parents)) & loop.dependent:
                    continue
                if any(r.name == acc.name and r.kind == "read" and loop in r.loops for r in f.accesses):
                    reported.add(acc.name)
                    yield RULE.finding(
                        f"`{acc.name}` (allocated outside the loop) is read and rewritten in every iteration of "
                        f"the nl.affine_range loop at line {loop.line}: a loop-carried dependency in a loop "
                        f"declared independent",
                        acc.line, acc.col,
                        "use range() (current API) or nl.sequential_range (Beta 1) for this loop, or accumulate "
                        "matmul partial sums in PSUM")


RULE = make_rule(__doc__, id="NKI007", name="affine-loop-carried-dependency", severity="warning",
                 category="correctness", check=check)
