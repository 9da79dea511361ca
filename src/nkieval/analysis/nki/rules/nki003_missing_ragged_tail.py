"""NKI003 missing-ragged-tail: a tiling loop over a runtime dimension does not handle the last, partial tile.

## What it does
Looks at loops whose trip count is computed from a tensor's shape:
- `X // T` tiles with no remainder handling anywhere (`X % T`, a `min()` clamp, a `mask=`):
  the last `X % T` rows or columns are never computed;
- a ceil-divided count (`math.ceil(X / T)`, `(X + T - 1) // T`) whose body never clamps the
  slice with `min()` (or a Beta 1 `mask=`): the last tile reads and writes past the end.

A kernel that asserts `X % T == 0` is reported by NKI009 instead.

## Why is this bad
Hidden test shapes are deliberately not multiples of 128/512. Dropping the tail leaves part of
the output unwritten (NaN in the simulator); an unclamped tail is an out-of-bounds access.

## Example
```python
n, f = x.shape
for i in range(n // 128):          # rows n - n % 128 .. n-1 never processed
    nisa.dma_copy(dst=t, src=x[i * 128:(i + 1) * 128])
```

## Use instead
```python
for i in range(math.ceil(n / 128)):
    rows = min(128, n - i * 128)
    nisa.dma_copy(dst=t[0:rows], src=x[i * 128:i * 128 + rows])
```

## References
- NKI docs, "Tiling overview": clamp the last tile with Python `min()` (current API) or `mask=` (Beta 1).
- migration.md §1.3, "Bounds guard" row.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from nkieval.analysis.finding import Finding
from nkieval.analysis.nki.helpers import loop_label
from nkieval.analysis.nki.model import FunctionModel, Loop, SourceModel, names_in, walk
from nkieval.analysis.rule import make_rule


def _shape_dim(f: FunctionModel, e: ast.AST) -> bool:
    return bool(names_in(e) & f.shape_names) or any(
        isinstance(n, ast.Attribute) and n.attr == "shape" for n in walk(e))


def _division(model: SourceModel, f: FunctionModel, stop: ast.expr) -> tuple[str, ast.expr, int] | None:
    """('floor' | 'ceil', X, T) for X // T, ceil(X / T), (X + T - 1) // T, -(-X // T)."""
    if isinstance(stop, ast.Call) and (model.qualname(stop.func) or "").endswith("ceil") and stop.args:
        inner = stop.args[0]
        if isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Div | ast.FloorDiv):
            t = model.int_value(inner.right, f)
            return ("ceil", inner.left, t) if t else None
        return None
    if isinstance(stop, ast.UnaryOp) and isinstance(stop.op, ast.USub) and isinstance(stop.operand, ast.BinOp):
        inner = stop.operand
        if isinstance(inner.op, ast.FloorDiv) and isinstance(inner.left, ast.UnaryOp):
            t = model.int_value(inner.right, f)
            return ("ceil", inner.left.operand, t) if t else None
    if isinstance(stop, ast.BinOp) and isinstance(stop.op, ast.FloorDiv):
        t = model.int_value(stop.right, f)
        if not t:
            return None
        left = stop.left
        if isinstance(left, ast.BinOp) and isinstance(left.op, ast.Sub | ast.Add):
            # (X + T - 1) // T
            if isinstance(left.op, ast.Sub) and isinstance(left.left, ast.BinOp) and isinstance(left.left.op, ast.Add):
                return "ceil", left.left.left, t
            if isinstance(left.op, ast.Add) and model.int_value(left.right, f) == t - 1:
                return "ceil", left.left, t
        return "floor", left, t
    return None


def _clamped(model: SourceModel, nodes: list[ast.AST]) -> bool:
    for root in nodes:
        for n in walk(root):
            if isinstance(n, ast.Call) and model.qualname(n.func) in ("min", "builtins.min"):
                return True
            if isinstance(n, ast.keyword) and n.arg == "mask":
                return True
    return False


def _remainder_handled(model: SourceModel, f: FunctionModel, x: ast.AST) -> bool:
    xs = names_in(x) or {"__shape__"}
    for n in walk(f.node):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod) and (names_in(n.left) & xs or ast.dump(n.left) == ast.dump(x)):
            return True
    return _clamped(model, [f.node])


def _asserted(f: FunctionModel, x: ast.AST) -> bool:
    xs = names_in(x)
    for n in walk(f.node):
        if isinstance(n, ast.Assert) and any(isinstance(m, ast.BinOp) and isinstance(m.op, ast.Mod) and
                                            (names_in(m.left) & xs or ast.dump(m.left) == ast.dump(x))
                                            for m in walk(n.test)):
            return True
    return False


def _check_loop(model: SourceModel, f: FunctionModel, loop: Loop) -> Finding | None:
    if loop.stop is None:
        return None
    div = _division(model, f, loop.stop)
    if div is None:
        return None
    kind, x, t = div
    if t <= 1 or not _shape_dim(f, x) or _asserted(f, x):
        return None
    xs = ast.unparse(x)
    if kind == "floor":
        if _remainder_handled(model, f, x):
            return None
        return RULE.finding(
            f"{loop_label(loop)} runs `{xs} // {t}` tiles and nothing handles the remainder: the last "
            f"`{xs} % {t}` elements are never computed when {xs} is not a multiple of {t}",
            loop.line, loop.node.col_offset + 1,
            f"iterate math.ceil({xs} / {t}) tiles and clamp the last one: size = min({t}, {xs} - i * {t})")
    if _clamped(model, loop.node.body):
        return None
    return RULE.finding(
        f"{loop_label(loop)} runs ceil({xs} / {t}) tiles but never clamps the last one with min(): when "
        f"{xs} is not a multiple of {t} the last tile reads and writes past the end of the tensor",
        loop.line, loop.node.col_offset + 1,
        f"size the last tile with min({t}, {xs} - i * {t}) and slice [0:size]")


def check(model: SourceModel) -> Iterator[Finding]:
    for f in model.nki_functions:
        for loop in f.loops:
            found = _check_loop(model, f, loop)
            if found:
                yield found


RULE = make_rule(__doc__, id="NKI003", name="missing-ragged-tail", severity="error", category="correctness",
                 check=check)
