"""NKI015 per-element-compute: compute instructions inside a loop work on one partition or one element at a time.

## What it does
Flags a loop whose body issues `nl`/`nisa` compute instructions on on-chip tiles sliced to a
single partition (`t[p:p + 1, ...]`, `t[p, ...]`) or a single element, indexed by the loop
variable. Reported once per loop.

## Why is this bad
Each instruction drives 128 lanes (one per partition) and carries a fixed issue overhead of
roughly 100+ cycles. One partition per instruction uses 1/128 of the engine and pays the
overhead per element: the thread-by-thread transliteration of a CUDA kernel.

## Example
```python
for p in range(128):
    nisa.activation(dst=y[p:p + 1, :], op=nl.exp, data=x[p:p + 1, :])
```

## Use instead
```python
nisa.activation(dst=y, op=nl.exp, data=x)  # all 128 partitions in one instruction
```

## References
- NKI docs, performance guide Opt #5a/#5b (instruction overhead, partition vectorisation).
- migration.md §1.3 ("Thread" row) and §5.2 criterion I2.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from nkieval.analysis.finding import Finding
from nkieval.analysis.nki.helpers import DMA_ALL, is_unit_slice, loop_label, subscript_indices
from nkieval.analysis.nki.model import SourceModel, base_name, names_in
from nkieval.analysis.rule import make_rule


def check(model: SourceModel) -> Iterator[Finding]:
    for f in model.nki_functions:
        onchip = {a.name for a in f.allocs if a.buffer in ("sbuf", "psum")} | f.value_tensors
        reported: set[int] = set()
        for c in f.calls:
            if not c.loops or c.qn in DMA_ALL or not c.qn or c.qn.split(".")[0] not in ("nl", "nisa"):
                continue
            inner = c.loops[-1]
            if id(inner) in reported:
                continue
            for arg in [*c.node.args, *(k.value for k in c.node.keywords)]:
                if base_name(arg) not in onchip:
                    continue
                idx = subscript_indices(arg)
                if idx and is_unit_slice(idx[0]) and names_in(idx[0]) & inner.dependent:
                    reported.add(id(inner))
                    yield RULE.finding(
                        f"`{c.qn}` on `{ast.unparse(arg)}` touches one partition per iteration of the "
                        f"{loop_label(inner)}: 1 of {model.target.partitions} lanes busy, instruction overhead "
                        f"paid per element", c.line, c.col,
                        "issue one instruction over the whole [128, F] tile instead of looping over partitions "
                        "or elements")
                    break


RULE = make_rule(__doc__, id="NKI015", name="per-element-compute", severity="warning", category="idiom",
                 check=check)
