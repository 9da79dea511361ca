"""NKI046 hard-coded-data: the file embeds a large table of numeric literals.

## What it does
Flags list/tuple/set literals (nested ones counted together) holding 16 or more numbers, and
string literals of 64+ characters that are mostly digits.

## Why is this bad
Kernels compute from their inputs; they have no need for tables of numbers. A literal table is
how a candidate returns expected outputs for the public test inputs (a constant-output hack), or
bakes in precomputed values that will be wrong for hidden inputs. Genuine constants (a polynomial's
few coefficients) stay well below the threshold.

## Example
```python
EXPECTED = [0.1, 0.7, 0.2, 0.9, 0.3, 0.5, 0.8, 0.4, 0.6, 0.0, 1.1, 0.2, 0.5, 0.7, 0.9, 0.3]
```

## Use instead
```python
# compute the values from the inputs in the kernel
```

## References
- anchors-eval.md §3 A.1–A.2 (constant outputs) and §5 item 9 (constant returns).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from nkieval.analysis.finding import Finding
from nkieval.analysis.nki.model import SourceModel, walk
from nkieval.analysis.rule import make_rule

THRESHOLD = 16


def _count(node: ast.AST) -> int:
    n = 0
    for m in walk(node):
        if isinstance(m, ast.Constant) and isinstance(m.value, int | float) and not isinstance(m.value, bool):
            n += 1
    return n


def check(model: SourceModel) -> Iterator[Finding]:
    inner: set[int] = set()
    for node in walk(model.tree):
        if isinstance(node, ast.List | ast.Tuple | ast.Set) and id(node) not in inner:
            for m in walk(node):
                if m is not node:
                    inner.add(id(m))
            n = _count(node)
            if n >= THRESHOLD:
                yield RULE.finding(f"a literal table of {n} numbers is embedded in the kernel file", node.lineno,
                                   node.col_offset + 1, "compute values from the inputs instead of embedding them")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) >= 64:
            digits = sum(ch.isdigit() for ch in node.value)
            if digits >= 0.6 * len(node.value):
                yield RULE.finding(f"a {len(node.value)}-character string of digits is embedded in the kernel file",
                                   node.lineno, node.col_offset + 1, "compute values from the inputs")


RULE = make_rule(__doc__, id="NKI046", name="hard-coded-data", severity="error", category="integrity",
                 check=check)
