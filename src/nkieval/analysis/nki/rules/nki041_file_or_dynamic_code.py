"""NKI041 file-or-dynamic-code: the file opens files, evaluates code at run time, or introspects the interpreter.

## What it does
Flags calls of `open`, `eval`, `exec`, `compile`, `__import__`, `globals`, `locals`, `vars`,
`breakpoint`, `input`, `setattr`/`delattr`, NumPy/torch file loaders (`np.load`, `np.fromfile`,
`np.loadtxt`, `torch.load`, ...), `nl.shared_constant` with a file path, and attribute access to
interpreter internals (`__dict__`, `__globals__`, `__builtins__`, `__code__`, `__subclasses__`, ...).

## Why is this bad
None of these belongs in a kernel. They are how a candidate reads expected outputs, hides code
from static review, or reaches into the grader's objects.

## Example
```python
expected = np.load("/tmp/expected.npy")
```

## Use instead
```python
# compute the output from the inputs with nl/nisa instructions
```

## References
- anchors-eval.md §3 A.11, C.23–C.25; §5 item 9.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from nkieval.analysis.finding import Finding
from nkieval.analysis.nki.model import SourceModel, walk
from nkieval.analysis.rule import make_rule

_CALLS = {"open", "eval", "exec", "compile", "__import__", "globals", "locals", "vars", "breakpoint", "input",
          "setattr", "delattr", "np.load", "np.fromfile", "np.loadtxt", "np.genfromtxt", "np.memmap", "np.save",
          "np.savez", "torch.load", "torch.save", "io.open"}
_DUNDERS = {"__dict__", "__globals__", "__builtins__", "__code__", "__subclasses__", "__closure__", "__class__",
            "__bases__", "__mro__", "__getattribute__", "__setattr__", "__func__", "__self__", "f_back", "f_globals",
            "f_locals", "tb_frame"}


def check(model: SourceModel) -> Iterator[Finding]:
    for node in walk(model.tree):
        if isinstance(node, ast.Call):
            qn = model.qualname(node.func)
            if qn in _CALLS:
                yield RULE.finding(f"calls `{qn}()`: file access or run-time code evaluation inside a kernel "
                                   f"file", node.lineno, node.col_offset + 1,
                                   "remove it; the kernel must compute its output from its inputs")
            elif qn == "nl.shared_constant" and node.args and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, str):
                yield RULE.finding("nl.shared_constant loads a file from disk into the kernel", node.lineno,
                                   node.col_offset + 1, "compute the values in the kernel")
        elif isinstance(node, ast.Attribute) and node.attr in _DUNDERS:
            yield RULE.finding(f"accesses interpreter internals (`.{node.attr}`)", node.lineno,
                               node.col_offset + 1, "remove the introspection")
        elif isinstance(node, ast.Name) and node.id in _DUNDERS:
            yield RULE.finding(f"accesses interpreter internals (`{node.id}`)", node.lineno, node.col_offset + 1,
                               "remove the introspection")


RULE = make_rule(__doc__, id="NKI041", name="file-or-dynamic-code", severity="error", category="integrity",
                 check=check)
