"""NKI044 monkeypatch: the file assigns to attributes of `nki`, `numpy`, `torch` or other imported modules.

## What it does
Flags assignments (`nl.exp = ...`, `np.allclose = ...`), deletions and `setattr(module, ...)`
targeting an imported module or something reached through one.

## Why is this bad
Replacing library functions changes what the evaluator measures: patching `np.allclose` or a
timer makes every check pass, patching `nki` APIs swaps the simulated semantics. There is no
legitimate reason for a kernel to do it.

## Example
```python
np.allclose = lambda *a, **k: True
```

## Use instead
```python
# nothing: leave library modules as they are
```

## References
- anchors-eval.md §3 B.16 (patching timers or statistics) and C.24–C.25.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from nkieval.analysis.finding import Finding
from nkieval.analysis.nki.model import SourceModel, walk
from nkieval.analysis.rule import make_rule


def _module_target(model: SourceModel, t: ast.AST) -> str | None:
    node = t
    while isinstance(node, ast.Attribute | ast.Subscript):
        node = node.value
    if isinstance(node, ast.Name) and node.id in model.aliases and node is not t:
        return ast.unparse(t)
    return None


def check(model: SourceModel) -> Iterator[Finding]:
    for node in walk(model.tree):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = list(node.targets)
        elif isinstance(node, ast.Call) and model.qualname(node.func) in ("setattr", "delattr") and node.args:
            a0 = node.args[0]
            if isinstance(a0, ast.Name) and a0.id in model.aliases:
                yield RULE.finding(f"`{ast.unparse(node)}` patches the module `{a0.id}`", node.lineno,
                                   node.col_offset + 1, "leave library modules unmodified")
            continue
        for t in targets:
            hit = _module_target(model, t)
            if hit:
                yield RULE.finding(f"assigns to `{hit}`, patching an imported module", node.lineno,
                                   node.col_offset + 1, "leave library modules unmodified")


RULE = make_rule(__doc__, id="NKI044", name="monkeypatch", severity="error", category="integrity", check=check)
