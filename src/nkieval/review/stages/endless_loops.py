"""Mutations of a loop bound that make the loop endless, told from the source without running them.

The cause search (:mod:`.mutation_causes`) runs every hypothesis on the CUDA executor. One kind of mutation
never finishes: a tree reduction's bound moved by one, ``for (int off = 16; off > 0; off >>= 1)`` as
``off > 0 - 1``. ``off`` shrinks to 0 and stays there, so the condition holds forever and the run is stopped
at its work limit (at least :data:`.mutation_causes.MUTANT_MIN_S` calibrated seconds): a quarter of a second
for every such mutation in every review that tries it, a quarter to a half of the whole search on the
reduction kernels.

:func:`never_ends` proves that a mutation makes its loop endless. A hypothesis proved so is charged its limit
and rejected without a run, which is what running it gives: a run of it either reaches the loop, where it
times out (charged exactly its limit: :mod:`.kept_runs`) or faults in the loop's body (no outputs), or never
reaches the loop and so computes what the unmutated kernel computes, which disagrees with the port on the
run the hypotheses are tried on. Each way the hypothesis is rejected.

The proof, all of it read from the loop's own text (anything else: not proved, the mutation runs):

* the mutation replaces the bound of the loop's condition ``V > B`` or ``V >= B`` by an integer constant
  ``c`` (``((0) - 1)``) with ``c < 0`` for ``>`` and ``c <= 0`` for ``>=``;
* ``V`` is declared ``int V = INIT`` in the loop's header, ``INIT`` provably non-negative (a decimal literal,
  ``blockDim.x`` or such divided or shifted right by a literal);
* the update is ``V >>= k`` (a literal ``k`` in 0..31) or ``V /= k`` (a literal ``k >= 1``): ``V`` stays
  non-negative, so the condition always holds;
* the body cannot leave the loop or change ``V``: no ``break``, ``return`` or ``goto``, no assignment,
  increment or address of ``V``, ``V`` itself never an argument of a function the source defines (one taking
  it by reference could change it), no lambda (one could capture it), no declaration of another ``V``.
"""

from __future__ import annotations

import ast
import functools
import re
from typing import Any

#: integer constant expressions a bound mutation writes (``((0) - 1)``, ``((n) + 1)`` has a name: not constant)
_CONSTANT = re.compile(r"[\d\s()+-]+")
_DECIMAL = re.compile(r"[0-9]+")
_LEAVES = ("break_statement", "return_statement", "goto_statement")
_BUILTIN_DIMS = ("blockDim", "gridDim")
_INT_MAX = 2**31 - 1


def never_ends(text: str, m: Any) -> bool:
    """Does mutation ``m`` (a :class:`nkieval.cuda.mutate.Mutation` of the preprocessed source ``text``) make a
    loop that every thread reaching it never leaves (module docstring)? False when not proved."""
    if m.kind != "indexing" or not _CONSTANT.fullmatch(m.new):
        return False
    bound = _constant(m.new)
    parsed = _parse(text)
    if bound is None or parsed is None:
        return False
    root, functions = parsed
    node = root.descendant_for_byte_range(m.start, m.end)  # (the smallest node spanning the mutated bytes)
    cond = node.parent if node is not None else None
    loop = cond.parent if cond is not None else None
    if node is None or (node.start_byte, node.end_byte) != (m.start, m.end) or cond is None or loop is None \
            or cond.type != "binary_expression" or loop.type != "for_statement" \
            or loop.child_by_field_name("condition") != cond or cond.child_by_field_name("right") != node:
        return False
    op = _text(cond.child_by_field_name("operator"))
    if not ((op == ">" and bound < 0) or (op == ">=" and bound <= 0)):
        return False
    var = _identifier(cond.child_by_field_name("left"))
    return var is not None and _declared_non_negative(loop.child_by_field_name("initializer"), var) and \
        _shrinks(loop.child_by_field_name("update"), var) and \
        _body_keeps(loop.child_by_field_name("body"), var, functions)


@functools.lru_cache(maxsize=16)
def _parse(text: str) -> tuple[Any, frozenset[str]] | None:
    """(tree root, names of the functions the source defines) of preprocessed CUDA ``text``, or None when
    parsing it again would not give the same text (offsets would not match)."""
    from nkieval.cuda.program import parse_program

    try:
        prog = parse_program(text)
    except Exception:  # (a source the executor cannot parse: nothing is proved)
        return None
    return (prog.root, frozenset(prog.functions)) if prog.source == text else None


def _constant(expr: str) -> int | None:
    """The value of an integer constant expression of decimal literals, ``+``, ``-`` and parentheses."""
    try:
        tree = ast.parse(expr, mode="eval").body
    except SyntaxError:
        return None

    def value(n: ast.AST) -> int | None:
        if isinstance(n, ast.Constant) and type(n.value) is int:
            return n.value
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub | ast.UAdd):
            v = value(n.operand)
            return None if v is None else (-v if isinstance(n.op, ast.USub) else v)
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add | ast.Sub):
            a, b = value(n.left), value(n.right)
            return None if a is None or b is None else (a + b if isinstance(n.op, ast.Add) else a - b)
        return None

    return value(tree)


def _text(n: Any) -> str:
    return "" if n is None else n.text.decode()


def _strip(n: Any) -> Any:
    while n is not None and n.type == "parenthesized_expression" and n.named_child_count == 1:
        n = n.named_children[0]
    return n


def _identifier(n: Any) -> str | None:
    n = _strip(n)
    return _text(n) if n is not None and n.type == "identifier" else None


def _literal(n: Any) -> int | None:
    n = _strip(n)
    if n is None or n.type != "number_literal" or not _DECIMAL.fullmatch(_text(n)):
        return None
    v = int(_text(n))
    return v if v <= _INT_MAX else None


def _non_negative(n: Any) -> bool:
    """Is the ``int`` expression ``n`` non-negative: a decimal literal, ``blockDim.x`` (or ``gridDim``, any
    axis), or such divided by a positive literal or shifted right by a literal in 0..31?"""
    n = _strip(n)
    if n is None:
        return False
    if n.type == "number_literal":
        return _literal(n) is not None
    if n.type == "field_expression":
        return _identifier(n.child_by_field_name("argument")) in _BUILTIN_DIMS and \
            _text(n.child_by_field_name("field")) in ("x", "y", "z")
    if n.type == "binary_expression":
        op, k = _text(n.child_by_field_name("operator")), _literal(n.child_by_field_name("right"))
        return k is not None and ((op == "/" and k >= 1) or (op == ">>" and k <= 31)) and \
            _non_negative(n.child_by_field_name("left"))
    return False


def _declared_non_negative(init: Any, var: str) -> bool:
    """Is ``init`` (a for loop's initializer) ``int var = INIT;`` with ``INIT`` non-negative?"""
    if init is None or init.type != "declaration" or _text(init.child_by_field_name("type")) != "int":
        return False
    decls = [c for c in init.named_children if c.type == "init_declarator"]
    if len(decls) != 1 or len([c for c in init.named_children if c.type not in ("primitive_type",)]) != 1:
        return False
    d = decls[0]
    return _identifier(d.child_by_field_name("declarator")) == var and _non_negative(d.child_by_field_name("value"))


def _shrinks(update: Any, var: str) -> bool:
    """Is ``update`` ``var >>= k`` (``k`` in 0..31) or ``var /= k`` (``k >= 1``): non-negative stays so?"""
    if update is None or update.type != "assignment_expression" or \
            _identifier(update.child_by_field_name("left")) != var:
        return False
    op, k = _text(update.child_by_field_name("operator")), _literal(update.child_by_field_name("right"))
    return k is not None and ((op == ">>=" and k <= 31) or (op == "/=" and k >= 1))


def _body_keeps(body: Any, var: str, functions: frozenset[str]) -> bool:
    """Can the loop's body neither leave the loop nor change ``var``?"""
    if body is None:
        return False
    stack = [body]
    while stack:
        n = stack.pop()
        t = n.type
        if t in _LEAVES:
            return False
        if t == "assignment_expression" and _identifier(n.child_by_field_name("left")) == var:
            return False
        if t in ("update_expression", "pointer_expression") and \
                _identifier(n.child_by_field_name("argument")) == var:
            return False
        if t == "lambda_expression":  # (one defined here may capture var by reference)
            return False
        if t == "call_expression" and _text(n.child_by_field_name("function")) in functions and \
                var in {_identifier(a) for a in n.child_by_field_name("arguments").named_children}:
            return False  # (a function of the source may take var by reference: an lvalue argument)
        if t in ("declaration", "init_declarator") and var in {_identifier(c) for c in n.named_children}:
            return False
        stack.extend(n.children)
    return True
