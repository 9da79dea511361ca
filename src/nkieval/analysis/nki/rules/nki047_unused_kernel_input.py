"""NKI047 unused-kernel-input: a kernel never reads the data of one of its inputs (at most its shape).

## What it does
Flags kernel parameters whose contents are never read: unused altogether, or used only for
`.shape`/`.dtype`. If no input's data is read at all, the finding is an error: the output cannot
depend on the inputs.

## Why is this bad
An input that is never read cannot influence the output. Either the kernel is wrong (it forgot
the bias, the second operand, the weights) or it returns something precomputed — the
"constant output" and "allocate the output shape and fill it" reward hacks.

## Example
```python
@nki.jit
def add(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    ...  # only a is loaded
    return out
```

## Use instead
```python
# load and use every input the task defines
```

## References
- anchors-eval.md §5 item 9 ("constant returns and unused inputs").
"""

from __future__ import annotations

from collections.abc import Iterator

from nkieval.analysis.finding import Finding
from nkieval.analysis.nki.model import SourceModel
from nkieval.analysis.rule import make_rule


def check(model: SourceModel) -> Iterator[Finding]:
    for f in model.kernels:
        params = [p for p in f.params if p not in ("self", "cls")]
        if not params:
            continue
        read = {a.name for a in f.accesses if a.kind in ("read", "escape", "write")}
        meta = {a.name for a in f.accesses if a.kind == "meta"}
        unread = [p for p in params if p not in read]
        # scalar parameters (never subscripted, no .shape) that are unused are also suspicious, but only
        # tensor-like ones (with a .shape use) or fully unused ones are reported
        all_unread = len(unread) == len(params)
        for p in unread:
            how = "only its shape/dtype is read" if p in meta else "it is never used"
            yield RULE.finding(
                f"kernel `{f.name}` never reads the data of input `{p}` ({how})"
                + ("; no input is read, so the output cannot depend on the inputs" if all_unread else ""),
                f.node.lineno, f.node.col_offset + 1,
                f"use `{p}` in the computation, or remove it if the task does not need it",
                severity="error" if all_unread else None)


RULE = make_rule(__doc__, id="NKI047", name="unused-kernel-input", severity="warning", category="integrity",
                 check=check)
