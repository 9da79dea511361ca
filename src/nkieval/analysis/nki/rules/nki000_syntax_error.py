"""NKI000 syntax-error: the file does not parse as Python, so nothing else can be checked.

## What it does
Reports the position of the first syntax error. The analyser emits this finding itself (the
rule's check never runs, since there is no syntax tree to give it).

## Why is this bad
A kernel that does not parse cannot be traced by the NKI compiler or the simulator; every other
criterion is unassessable.

## Example
```python
@nki.jit
def add(a, b)
    ...
```

## Use instead
```python
@nki.jit
def add(a, b):
    ...
```

## References
- Python language reference, "Full grammar specification".
"""

from __future__ import annotations

from collections.abc import Iterator

from nkieval.analysis.finding import Finding
from nkieval.analysis.nki.model import SourceModel
from nkieval.analysis.rule import make_rule


def check(model: SourceModel) -> Iterator[Finding]:
    return iter(())


RULE = make_rule(__doc__, id="NKI000", name="syntax-error", severity="error", category="correctness", check=check)
