"""Mutation testing of the expert solution: small AST changes a kernel author could make by mistake.

A task's shapes, input families and tolerances discriminate when they *kill* these mutants: the
review of each mutant (in the sandbox, like any candidate) fails a correctness or numerics check on
some case. A mutant that survives is listed with its diff: it is either equivalent to the expert
(a change the op cannot see) or a hole in the task's tests. Mutants that fail before any case runs
(a hardware-rule violation on every case, a parse error) are *stillborn* and do not count.

Operators (``KINDS``), each applied at one site per mutant:

* ``op_swap`` — an NKI operator replaced by a related one (``nl.add`` → ``nl.subtract``,
  ``nl.maximum`` → ``nl.minimum``, ``nl.gelu`` → ``nl.gelu_apprx_tanh``, ...);
* ``loop_bound`` — a loop's trip count one short (``range(n)`` → ``range(n - 1)``): the last tile,
  or the last accumulation step, is dropped;
* ``loop_start`` — a loop's first iteration skipped (``range(n)`` → ``range(1, n)``): the first tile
  or accumulation step is dropped;
* ``slice_extent`` — a variable that bounds slices one short (``rows = min(p, n - r0)`` →
  ``rows = min(p, n - r0) - 1``): every slice it bounds loses its last row or column, consistently,
  so the kernel still runs and the tests must notice;
* ``slice_bound`` (not in the default set) — one slice's upper bound one short (``a[lo:hi]`` →
  ``a[lo:hi - 1]``); most such mutants are shape mismatches the simulator rejects;
* ``drop_branch`` — an ``if`` condition replaced by ``False`` (a tail or special case dropped);
* ``dtype_downgrade`` — an ``nl.float32`` (accumulator, intermediate or output) made ``nl.bfloat16``;
* ``const_perturb`` — a float constant multiplied by 1.01;
* ``swap_operands`` — the operands of a non-commutative binary instruction (``data1``/``data2``)
  or of a matmul (``stationary``/``moving``) exchanged.
"""

from __future__ import annotations

import ast
import difflib
from collections.abc import Callable
from dataclasses import dataclass

from nkieval.tasks.audit.permitted import loaded_operand

KINDS = ("op_swap", "loop_bound", "loop_start", "slice_extent", "drop_branch", "dtype_downgrade", "const_perturb",
         "swap_operands")
#: Operators available but not in the default set (most of their mutants are stillborn shape mismatches).
EXTRA_KINDS = ("slice_bound",)

_OP_SWAP = {
    "add": "subtract", "subtract": "add", "multiply": "add", "divide": "multiply", "maximum": "minimum",
    "minimum": "maximum", "greater_equal": "greater", "greater": "greater_equal", "less_equal": "less",
    "less": "less_equal", "rsqrt": "sqrt", "sqrt": "rsqrt", "gelu": "gelu_apprx_tanh",
    "gelu_apprx_tanh": "gelu", "exp": "copy", "log": "copy", "relu": "copy", "abs": "copy", "square": "copy",
    "silu": "copy", "max": "min", "min": "max",
}
_NON_COMMUTATIVE = {"subtract", "divide", "greater", "greater_equal", "less", "less_equal", "pow", "power"}
_RANGES = {"range", "affine_range", "sequential_range", "static_range"}
_NL = {"nl", "language"}


@dataclass(frozen=True)
class Mutant:
    """One mutant: the operator, where (line), what changed (a short description and a diff), the source."""

    id: str
    kind: str
    line: int
    description: str
    diff: str
    source: str
    #: dtype_downgrade only: the kernel input whose loaded tile it downgrades (None: any other value), which
    #: the task's recipe may permit in its compute dtype (:mod:`nkieval.tasks.audit.permitted`)
    operand: str | None = None


def _is_nl_attr(n: ast.AST) -> bool:
    return isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in _NL


def _call_name(n: ast.Call) -> str:
    f = n.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _minus_one(e: ast.expr) -> ast.expr:
    return ast.BinOp(left=e, op=ast.Sub(), right=ast.Constant(1))


def _sites(tree: ast.AST) -> list[tuple[str, int, str]]:
    """Every mutation site as (kind, index of the node in ast.walk order, description)."""
    out: list[tuple[str, int, str]] = []
    bounds: set[str] = set()  # names that appear in a slice's upper bound
    defaults: set[int] = set()  # constants that are parameter defaults: the task passes its params, so
    for n in ast.walk(tree):      # perturbing a default is an equivalent mutant
        if isinstance(n, ast.Slice) and n.upper is not None:
            bounds |= {x.id for x in ast.walk(n.upper) if isinstance(x, ast.Name)}
        if isinstance(n, ast.arguments):
            defaults |= {id(x) for d in (*n.defaults, *n.kw_defaults) if d is not None for x in ast.walk(d)}
    for i, n in enumerate(ast.walk(tree)):
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) \
                and n.targets[0].id in bounds and isinstance(n.value, ast.BinOp | ast.Call):
            out.append(("slice_extent", i, f"{n.targets[0].id} = ... one short (every slice it bounds)"))
        if _is_nl_attr(n) and isinstance(n, ast.Attribute):
            if n.attr in _OP_SWAP:
                out.append(("op_swap", i, f"nl.{n.attr} -> nl.{_OP_SWAP[n.attr]}"))
            if n.attr == "float32":
                out.append(("dtype_downgrade", i, "nl.float32 -> nl.bfloat16"))
        elif isinstance(n, ast.Call) and _call_name(n) in _RANGES and n.args and not n.keywords:
            out.append(("loop_bound", i, f"{_call_name(n)}(...) one iteration short"))
            if len(n.args) == 1:
                out.append(("loop_start", i, f"{_call_name(n)}(...) skips its first iteration"))
        elif isinstance(n, ast.Subscript):
            for s in (n.slice.elts if isinstance(n.slice, ast.Tuple) else [n.slice]):
                if isinstance(s, ast.Slice) and s.upper is not None:
                    out.append(("slice_bound", i, "slice upper bound one short"))
                    break
        elif isinstance(n, ast.If):
            out.append(("drop_branch", i, f"if {ast.unparse(n.test)} -> if False"))
        elif isinstance(n, ast.Constant) and isinstance(n.value, float) and n.value not in (0.0,) \
                and n.value == n.value and id(n) not in defaults:
            out.append(("const_perturb", i, f"{n.value!r} -> {n.value * 1.01!r}"))
        elif isinstance(n, ast.Call):
            kw = {k.arg: k for k in n.keywords if k.arg}
            op = kw.get("op") or kw.get("op0")
            opname = op.value.attr if op is not None and isinstance(op.value, ast.Attribute) else ""
            if "data1" in kw and "data2" in kw and opname in _NON_COMMUTATIVE:
                out.append(("swap_operands", i, f"{_call_name(n)}: data1 <-> data2"))
            elif "stationary" in kw and "moving" in kw:
                out.append(("swap_operands", i, f"{_call_name(n)}: stationary <-> moving"))
    return out


def _apply(node: ast.AST, kind: str) -> None:
    if kind == "op_swap":
        assert isinstance(node, ast.Attribute)
        node.attr = _OP_SWAP[node.attr]
    elif kind == "dtype_downgrade":
        assert isinstance(node, ast.Attribute)
        node.attr = "bfloat16"
    elif kind == "loop_bound":
        assert isinstance(node, ast.Call)
        j = 0 if len(node.args) == 1 else 1
        node.args[j] = _minus_one(node.args[j])
    elif kind == "loop_start":
        assert isinstance(node, ast.Call)
        node.args = [ast.Constant(1), node.args[0]]
    elif kind == "slice_extent":
        assert isinstance(node, ast.Assign)
        node.value = _minus_one(node.value)
    elif kind == "slice_bound":
        assert isinstance(node, ast.Subscript)
        for s in (node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]):
            if isinstance(s, ast.Slice) and s.upper is not None:
                s.upper = _minus_one(s.upper)
                break
    elif kind == "drop_branch":
        assert isinstance(node, ast.If)
        node.test = ast.Constant(False)
    elif kind == "const_perturb":
        assert isinstance(node, ast.Constant)
        node.value = node.value * 1.01
    elif kind == "swap_operands":
        assert isinstance(node, ast.Call)
        kw = {k.arg: k for k in node.keywords if k.arg}
        a, b = ("data1", "data2") if "data1" in kw else ("stationary", "moving")
        kw[a].value, kw[b].value = kw[b].value, kw[a].value


def _spread(items: list, n: int) -> list:
    """``n`` items spread evenly over ``items`` (all of them when there are fewer)."""
    if len(items) <= n:
        return list(items)
    step = len(items) / n
    return [items[int(k * step)] for k in range(n)]


def mutants(source: str, *, max_mutants: int = 16, kinds: tuple[str, ...] = KINDS,
            keep: Callable[[str], bool] | None = None) -> tuple[list[Mutant], int]:
    """Up to ``max_mutants`` distinct mutants of ``source``, spread over the operators round-robin.

    Returns (mutants, number of sites found), so a report can say how many were sampled.
    """
    tree = ast.parse(source)
    base = ast.unparse(tree)
    sites = [s for s in _sites(tree) if s[0] in kinds]
    by_kind = {k: [s for s in sites if s[0] == k] for k in kinds}
    # round-robin over the operators, each operator's sites spread over the file
    per_kind = {k: _spread(v, max_mutants) for k, v in by_kind.items()}
    order: list[tuple[str, int, str]] = []
    while any(per_kind.values()) and len(order) < 4 * max_mutants:
        for k in kinds:
            if per_kind[k]:
                order.append(per_kind[k].pop(0))
    out: list[Mutant] = []
    seen = {base}
    base_lines = base.splitlines()
    for kind, idx, desc in order:
        if len(out) >= max_mutants:
            break
        t = ast.parse(source)
        node = next(n for i, n in enumerate(ast.walk(t)) if i == idx)
        line = getattr(node, "lineno", 0)
        operand = loaded_operand(t, node) if kind == "dtype_downgrade" else None
        _apply(node, kind)
        ast.fix_missing_locations(t)
        try:
            text = ast.unparse(t)
        except Exception:  # an operator produced an invalid tree: skip the site
            continue
        if text in seen or (keep is not None and not keep(text)):
            continue
        seen.add(text)
        diff = "\n".join(x for x in difflib.unified_diff(base_lines, text.splitlines(), lineterm="", n=0)
                         if not x.startswith(("---", "+++", "@@")))
        out.append(Mutant(f"M{len(out) + 1:02d}", kind, line, desc, diff, text, operand))
    return out, len(sites)
