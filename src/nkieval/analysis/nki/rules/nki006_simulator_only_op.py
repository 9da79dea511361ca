"""NKI006 simulator-only-op: `nl.divide`, `nl.fmod` or `nl.mod`, which run in the simulator but are not hardware instructions.

## What it does
Flags every reference to `nl.divide`, `nl.fmod` and `nl.mod`, whether called as a function or
passed as an `op=` to an instruction.

## Why is this bad
The NKI 0.4 release notes list these as known gaps: they work in the CPU simulator and fail on
the device (`divide` was dropped from the 0.6 API list). A kernel that passes every simulated
test can still fail to compile for Trainium.

## Example
```python
y = nl.divide(x, total)
```

## Use instead
```python
inv = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
nisa.reciprocal(dst=inv, data=total)
nisa.tensor_scalar(dst=y, data=x, op0=nl.multiply, operand0=inv)
```

## References
- NKI 0.4 release notes, known issues ("divide, fmod and mod are not hardware instructions").
- nki-api.md §3.3.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from nkieval.analysis.finding import Finding
from nkieval.analysis.nki.model import SourceModel, walk
from nkieval.analysis.rule import make_rule

_SIM_ONLY = {"nl.divide": "multiply by nisa.reciprocal(...) of the divisor",
             "nl.fmod": "compute x - trunc(x / y) * y from hardware ops",
             "nl.mod": "compute x - floor(x / y) * y from hardware ops"}


def check(model: SourceModel) -> Iterator[Finding]:
    for node in walk(model.tree):
        if isinstance(node, ast.Attribute):
            qn = model.qualname(node)
            if qn in _SIM_ONLY:
                yield RULE.finding(
                    f"`{qn}` runs in the simulator but is not a Trainium instruction; the kernel will not "
                    f"compile for the device",
                    node.lineno, node.col_offset + 1, _SIM_ONLY[qn])


RULE = make_rule(__doc__, id="NKI006", name="simulator-only-op", severity="error", category="correctness",
                 check=check)
