"""NKI017 unused-allocation: a tile or tensor is allocated and never used.

## What it does
Flags names bound to `nl.ndarray`/`nl.zeros`/... that are never read, written or passed on.

## Why is this bad
Dead allocations take SBUF/PSUM space (PSUM has only 8 banks per partition) and usually mean
leftover code from an earlier version, or a step the author meant to do and forgot.

## Example
```python
scratch = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)  # never used
```

## Use instead
```python
# delete it, or use it
```

## References
- NKI docs, SBUF/PSUM memory hierarchy overview (software-managed on-chip memory).
"""

from __future__ import annotations

from collections.abc import Iterator

from nkieval.analysis.finding import Finding
from nkieval.analysis.nki.model import SourceModel
from nkieval.analysis.rule import make_rule


def check(model: SourceModel) -> Iterator[Finding]:
    for f in model.nki_functions:
        used = {a.name for a in f.accesses if a.kind != "define"}
        for a in f.allocs:
            if a.name not in used and not a.name.startswith("_"):
                yield RULE.finding(f"`{a.name}` ({a.buffer}) is allocated and never used", a.line, a.call.col,
                                   f"remove `{a.name}` or use it")


RULE = make_rule(__doc__, id="NKI017", name="unused-allocation", severity="info", category="idiom", check=check)
