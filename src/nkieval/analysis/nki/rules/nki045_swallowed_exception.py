"""NKI045 swallowed-exception: a `try`/`except` (or `contextlib.suppress`) hides errors instead of letting them surface.

## What it does
Flags `except` handlers that do not re-raise, and `contextlib.suppress(...)` blocks, anywhere in
the file.

## Why is this bad
In a kernel file an exception handler is almost always a fallback: "if the NKI path fails, do
something else" — typically compute the answer on the host, or return a placeholder. That turns a
compile or hardware-rule failure into a silent pass (one public NKI project published CPU
`torch.matmul` timings as NKI results this way).

## Example
```python
try:
    nisa.nc_matmul(dst=acc, stationary=a, moving=b)
except Exception:
    pass
```

## Use instead
```python
nisa.nc_matmul(dst=acc, stationary=a, moving=b)  # let failures surface
```

## References
- anchors-eval.md §3 A.6 (try/except fallback; the trnblas incident).
- KernelBench static checker (try/except fallbacks).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from nkieval.analysis.finding import Finding
from nkieval.analysis.nki.model import SourceModel, walk
from nkieval.analysis.rule import make_rule


def check(model: SourceModel) -> Iterator[Finding]:
    for node in walk(model.tree):
        if isinstance(node, ast.ExceptHandler):
            if not any(isinstance(n, ast.Raise) for b in node.body for n in walk(b)):
                what = ast.unparse(node.type) if node.type is not None else "everything"
                yield RULE.finding(f"`except {what}` swallows the error and carries on: a fallback that hides "
                                   f"failures", node.lineno, node.col_offset + 1,
                                   "remove the try/except so that errors surface")
        elif isinstance(node, ast.withitem) and isinstance(node.context_expr, ast.Call):
            qn = model.qualname(node.context_expr.func) or ""
            if qn.endswith("suppress"):
                yield RULE.finding("`contextlib.suppress` hides errors", node.context_expr.lineno,
                                   node.context_expr.col_offset + 1, "remove it so that errors surface")


RULE = make_rule(__doc__, id="NKI045", name="swallowed-exception", severity="error", category="integrity",
                 check=check)
