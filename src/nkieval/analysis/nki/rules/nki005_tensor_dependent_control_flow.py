"""NKI005 tensor-dependent-control-flow: Python `if`/`while` (or `int()`, `float()`, `.item()`) on tensor values.

## What it does
Flags Python control flow whose condition reads the *contents* of a tensor or tile (a subscript
of one, a comparison with one, or the result of an `nl.*` computation), and conversions of tile
contents to Python numbers. Conditions on shapes (`x.shape[0] > 128`) and on whether an optional
tensor argument was given (`if bias is not None:`) are fine.

## Why is this bad
A kernel is traced once per input shape: Python runs at trace time, when tile contents do not
exist yet. The NKI compiler rejects such code ("dynamic control-flow depending on tensor value
is not supported"); a simulator that runs eagerly may accept it, which makes the kernel look
correct when it cannot compile. Data-dependent choices need `nl.where`, `select_reduce`,
`affine_select`, or masking arithmetic.

## Example
```python
if t[0, 0] > 0:
    nisa.activation(dst=y, op=nl.relu, data=t)
```

## Use instead
```python
nisa.activation(dst=y, op=nl.relu, data=t)  # or nl.where(mask, a, b) for a real select
```

## References
- NKI docs, "NKI language guide" (tracing; only nisa calls become device instructions).
- Beta 1 error list: `err_dynamic_control_flow_not_supported`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from nkieval.analysis.finding import Finding
from nkieval.analysis.nki.helpers import tensor_params
from nkieval.analysis.nki.model import META_ATTRS, FunctionModel, SourceModel, walk
from nkieval.analysis.rule import make_rule

_STATIC_NL = {"nl.tile_size", "nl.program_id", "nl.num_programs", "nl.program_ndim", "nisa.get_nc_version",
              "nisa.get_nc_sub_version"}


def _tensor_refs(model: SourceModel, e: ast.AST, tensors: set[str]) -> str | None:
    if isinstance(e, ast.Attribute) and e.attr in META_ATTRS:
        return None
    if isinstance(e, ast.Compare) and all(isinstance(op, ast.Is | ast.IsNot) for op in e.ops):
        return None  # (`sink is not None`: whether an optional argument was given, known when the kernel is traced)
    if isinstance(e, ast.Call):
        qn = model.qualname(e.func) or ""
        if qn in ("len", "isinstance") or any(qn.startswith(s) for s in _STATIC_NL):
            return None
        if qn.split(".")[0] in ("nl", "nisa"):
            return ast.unparse(e)
    if isinstance(e, ast.Name) and e.id in tensors:
        return e.id
    for child in ast.iter_child_nodes(e):
        hit = _tensor_refs(model, child, tensors)
        if hit:
            return hit
    return None


def _tensors(f: FunctionModel) -> set[str]:
    return tensor_params(f) | {a.name for a in f.allocs} | f.value_tensors


def check(model: SourceModel) -> Iterator[Finding]:
    for f in model.nki_functions:
        tensors = _tensors(f)
        for node in walk(f.node):
            test = node.test if isinstance(node, ast.If | ast.While | ast.IfExp) else None
            if test is not None:
                hit = _tensor_refs(model, test, tensors)
                if hit:
                    kw = "while" if isinstance(node, ast.While) else "if"
                    yield RULE.finding(
                        f"Python `{kw}` depends on the contents of `{hit}`; tile values do not exist when the "
                        f"kernel is traced, so this cannot compile (the simulator may still run it)",
                        node.lineno, node.col_offset + 1,
                        "compute both branches and select with nl.where / nisa.select_reduce / affine_select, "
                        "or branch on shapes only")
            elif isinstance(node, ast.Call):
                qn = model.qualname(node.func) or ""
                conv = qn in ("int", "float", "bool") and node.args
                item = isinstance(node.func, ast.Attribute) and node.func.attr in ("item", "tolist")
                if conv or item:
                    arg = node.args[0] if conv else node.func.value  # type: ignore[union-attr]
                    hit = _tensor_refs(model, arg, tensors)
                    if hit:
                        yield RULE.finding(
                            f"`{ast.unparse(node)}` turns the contents of `{hit}` into a Python number at trace "
                            f"time, when tile contents do not exist",
                            node.lineno, node.col_offset + 1,
                            "keep the value in a tile and use it as an instruction operand (e.g. a [P,1] scalar)")


RULE = make_rule(__doc__, id="NKI005", name="tensor-dependent-control-flow", severity="error",
                 category="correctness", check=check)
