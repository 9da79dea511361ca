"""NKI011 vector-accumulated-matmul: matmul partial products are summed with vector adds instead of in PSUM.

## What it does
Flags a matmul result (`nc_matmul` dst or `nl.matmul` value) that is then added into a separate
accumulator with `nisa.tensor_tensor(op=nl.add)`, `nl.add` or `+=` — the pattern of a K loop
that computes one product per iteration and sums them on VectorE.

## Why is this bad
TensorE accumulates into PSUM in fp32 at no extra cost: successive `nc_matmul` calls on the
same PSUM tile add up (the first write overwrites, later writes accumulate). A VectorE add per K
tile costs an extra instruction over the whole output tile, plus a PSUM→SBUF copy per step.

## Example
```python
for k in range(k_tiles):
    nisa.nc_matmul(dst=part, stationary=a_k, moving=b_k)
    nisa.tensor_tensor(dst=acc, data1=acc, data2=part, op=nl.add)
```

## Use instead
```python
for k in range(k_tiles):
    nisa.nc_matmul(dst=acc_psum, stationary=a_k, moving=b_k)  # accumulates across k
```

## References
- NKI docs, Trainium architecture guide (PSUM near-memory accumulation).
- NKI docs, `nki.isa.nc_matmul` (`accumulate=`).
- migration.md §2.1 P5.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from nkieval.analysis.finding import Finding
from nkieval.analysis.nki.helpers import MATMULS, matmul_results
from nkieval.analysis.nki.model import SourceModel, base_name, walk
from nkieval.analysis.rule import make_rule


def check(model: SourceModel) -> Iterator[Finding]:
    for f in model.nki_functions:
        results: set[str] = set()
        for c in f.calls:
            if c.qn in MATMULS and c.loops:
                results |= matmul_results(c)
        if not results:
            continue
        for c in f.calls:
            if c.qn == "nisa.tensor_tensor" and model.qualname(c.arg("op", 3)) == "nl.add":
                d = base_name(c.arg("dst", 0))
                ops = {base_name(c.arg("data1", 1)), base_name(c.arg("data2", 2))}
                part = ops & results
                if part and d in ops and d not in results:
                    yield _finding(d, next(iter(part)), c.line, c.col)
            elif c.qn == "nl.add" and len(c.node.args) >= 2:
                ops = {base_name(c.node.args[0]), base_name(c.node.args[1])}
                part = ops & results
                acc = set(c.assigned_to) & ops
                if part and acc and not acc & results:
                    yield _finding(next(iter(acc)), next(iter(part)), c.line, c.col)
        for node in walk(f.node):
            if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add) and isinstance(node.value, ast.Name):
                acc_name = base_name(node.target)
                if node.value.id in results and acc_name not in results:
                    yield _finding(acc_name or "?", node.value.id, node.lineno, node.col_offset + 1)


def _finding(acc: str, part: str, line: int, col: int) -> Finding:
    return RULE.finding(
        f"matmul result `{part}` is added into `{acc}` with a vector add; the K-loop sum should accumulate in "
        f"PSUM, where TensorE adds partial products for free", line, col,
        "issue every K-tile nc_matmul into the same PSUM tile (first write overwrites, later ones accumulate) "
        "and copy it to SBUF once after the loop")


RULE = make_rule(__doc__, id="NKI011", name="vector-accumulated-matmul", severity="warning",
                 category="performance", check=check)
