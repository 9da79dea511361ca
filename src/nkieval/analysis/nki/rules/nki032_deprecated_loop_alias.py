"""NKI032 deprecated-loop-alias: `nl.affine_range`/`sequential_range`/`static_range` in current-API code.

## What it does
In files that import `nki` (0.3+), notes loops written with the Beta 1 loop constructs, which are
now deprecated aliases of Python `range()`. A version note only: the code is correct.

## Why is this bad
It is not wrong. The aliases are fully unrolled like `range()`; readers may believe the loop is
parallel (affine) or sequential when the compiler no longer distinguishes them. Much public
guidance still recommends `affine_range`, so the review never penalises it beyond this note.

## Example
```python
for i in nl.affine_range(n_tiles):
    ...
```

## Use instead
```python
for i in range(n_tiles):
    ...
```

## References
- NKI migration guide (0.3): `affine_range`, `sequential_range`, `static_range` alias `range()`.
- migration.md §1.4, "conflicting guidance".
"""

from __future__ import annotations

from collections.abc import Iterator

from nkieval.analysis.finding import Finding
from nkieval.analysis.nki.model import SourceModel
from nkieval.analysis.rule import make_rule


def check(model: SourceModel) -> Iterator[Finding]:
    if model.api != "current":
        return
    for f in model.functions:
        for loop in f.loops:
            if loop.kind in ("affine_range", "sequential_range", "static_range"):
                yield RULE.finding(f"nl.{loop.kind} is a deprecated alias of range() since NKI 0.3",
                                   loop.line, loop.node.iter.col_offset + 1, "write range(...)")


RULE = make_rule(__doc__, id="NKI032", name="deprecated-loop-alias", severity="info", category="api-version",
                 check=check)
