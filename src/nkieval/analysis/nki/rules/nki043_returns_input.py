"""NKI043 returns-input: a kernel returns one of its input tensors (or a view of one).

## What it does
Flags `return x` (or `return x[...]`, `return (out, x)`) in a kernel where `x` is a parameter.

## Why is this bad
Outputs must be fresh `nl.shared_hbm` tensors. Returning an input means the output aliases it:
either the kernel wrote its result into an input (inputs are read-only in compiled mode and
written back in place by the simulator), or it is returning data it never computed — a way to
pass identity-like tasks or to leak a buffer the harness prepared.

## Example
```python
@nki.jit
def relu(x):
    ...
    return x
```

## Use instead
```python
@nki.jit
def relu(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    ...
    return out
```

## References
- NKI migration guide (0.3): kernel outputs must be `nl.shared_hbm` tensors created in the kernel.
- anchors-eval.md §3 A.3–A.4 (stale buffers, input mutation).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from nkieval.analysis.finding import Finding
from nkieval.analysis.nki.model import SourceModel, base_name, walk
from nkieval.analysis.rule import make_rule


def check(model: SourceModel) -> Iterator[Finding]:
    for f in model.kernels:
        params = set(f.params)
        for node in walk(f.node):
            if isinstance(node, ast.Return) and node.value is not None:
                values = node.value.elts if isinstance(node.value, ast.Tuple | ast.List) else [node.value]
                for v in values:
                    b = base_name(v)
                    if b in params and not isinstance(v, ast.Attribute):
                        yield RULE.finding(f"kernel `{f.name}` returns its input `{b}`: the output aliases an "
                                           f"input instead of being a fresh result", node.lineno,
                                           node.col_offset + 1,
                                           "allocate the output with nl.ndarray(..., buffer=nl.shared_hbm), "
                                           "write it, and return it")


RULE = make_rule(__doc__, id="NKI043", name="returns-input", severity="error", category="integrity", check=check)
