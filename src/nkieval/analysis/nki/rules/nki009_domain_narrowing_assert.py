"""NKI009 domain-narrowing-assert: an `assert` restricts a runtime dimension to multiples of a tile size.

## What it does
Flags assertions such as `assert n % 128 == 0` on dimensions read from an input's shape.

## Why is this bad
The assert turns "I did not handle the ragged tail" into a crash on every shape that is not a
multiple of the tile size — which is exactly what hidden test shapes contain. It is acceptable
only when the task states that restriction; otherwise the tail should be handled.

## Example
```python
n, f = x.shape
assert n % 128 == 0
```

## Use instead
```python
for i in range(math.ceil(n / 128)):
    rows = min(128, n - i * 128)
    ...
```

## References
- migration.md §5.2, criterion F2: a domain-narrowing assert scores at most 2 unless the task permits it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from nkieval.analysis.finding import Finding
from nkieval.analysis.nki.model import SourceModel, names_in, walk
from nkieval.analysis.rule import make_rule


def check(model: SourceModel) -> Iterator[Finding]:
    for f in model.nki_functions:
        for node in walk(f.node):
            if not isinstance(node, ast.Assert):
                continue
            for m in walk(node.test):
                if isinstance(m, ast.BinOp) and isinstance(m.op, ast.Mod):
                    shapey = bool(names_in(m.left) & f.shape_names) or any(
                        isinstance(n, ast.Attribute) and n.attr == "shape" for n in walk(m.left))
                    t = model.int_value(m.right, f)
                    if shapey and t and t > 1:
                        yield RULE.finding(
                            f"`assert {ast.unparse(node.test)}` rejects every shape whose "
                            f"`{ast.unparse(m.left)}` is not a multiple of {t}", node.lineno, node.col_offset + 1,
                            f"handle the last partial tile with min({t}, remaining) instead of asserting it away")
                        break


RULE = make_rule(__doc__, id="NKI009", name="domain-narrowing-assert", severity="warning", category="correctness",
                 check=check)
