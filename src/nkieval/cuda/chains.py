"""The CUDA source's dot-product chains: a float accumulator that one loop fills by multiply-adds in index
order from zero, each step one fp32 rounding (an FMA)::

    float s = 0.0f;
    for (int c = 0; c < d; ++c) s = fmaf(a[c], b[c], s);   // or: s += a[c] * b[c];

Such a chain is the GPU's accumulation order for a contraction of length ``d``. A port that contracts the same
terms in one fp32 matmul instruction (no accumulation onto earlier PSUM contents) accumulates them in that
order too, with the same roundings, so the GPU-vs-Trainium envelope keeps the chain in fp32 in its pivot
(:func:`nkieval.cuda.exact.exact_source`, ``keep``) instead of counting its rounding error on both sides.

:func:`chain_length` says how long a chain is on a case: its loop bound, a literal or a ``__global__`` kernel's
parameter that the launch passes a literal or a host parameter bound to a task dimension.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nkieval.cuda.program import _name_of_declarator, _parser, preprocess

_ZERO = re.compile(r"^0(\.0*)?f?$|^0?\.0+f?$")
_INT = re.compile(r"^\d+$")


@dataclass(frozen=True)
class DotChain:
    """One chain: its accumulator, the function it is in, its loop bound (``inclusive``: ``<=``), and the
    byte span of the accumulator's declaration through the loop in the preprocessed source."""

    var: str
    function: str
    line: int
    bound: str
    inclusive: bool
    start: int
    end: int


def _strip(text: str) -> str:
    text = text.strip()
    while text.startswith("(") and text.endswith(")"):
        text = text[1:-1].strip()
    return text


def _float_zero_declaration(node: Any) -> str | None:
    """The variable a ``float v = 0.0f;`` declaration declares, else None."""
    if node is None or node.type != "declaration":
        return None
    kind = node.child_by_field_name("type")
    decls = [c for c in node.named_children if c.type == "init_declarator"]
    if kind is None or kind.text.decode() != "float" or len(decls) != 1:
        return None
    value = decls[0].child_by_field_name("value")
    if value is None or not _ZERO.match(value.text.decode().strip()):
        return None
    return _name_of_declarator(decls[0].child_by_field_name("declarator"))


def _counted_loop(loop: Any) -> tuple[str, str, bool] | None:
    """(index, bound, inclusive) of ``for (int i = 0; i < bound; ++i)`` (or ``i++``, ``i += 1``), else None."""
    init, cond, upd = (loop.child_by_field_name(f) for f in ("initializer", "condition", "update"))
    if init is None or cond is None or upd is None or init.type != "declaration":
        return None
    m = re.fullmatch(r"int\s+([A-Za-z_]\w*)\s*=\s*0\s*;", init.text.decode().strip())
    if m is None:
        return None
    idx = m.group(1)
    c = re.fullmatch(r"\(?\s*" + idx + r"\s*\)?\s*(<=?)\s*(.+)", cond.text.decode().strip(), re.S)
    if c is None or re.sub(r"\s", "", upd.text.decode()) not in (f"++{idx}", f"{idx}++", f"{idx}+=1"):
        return None
    return idx, _strip(c.group(2)), c.group(1) == "<="


def _accumulates(stmt: Any, var: str) -> bool:
    """Is the loop body one multiply-add into ``var``: ``v = fmaf(a, b, v)``, ``v += a * b``?"""
    if stmt.type == "compound_statement":
        inner = [c for c in stmt.named_children if c.type != "comment"]
        if len(inner) != 1:
            return False
        stmt = inner[0]
    if stmt.type != "expression_statement":
        return False
    text = re.sub(r"\s+", "", stmt.text.decode()).rstrip(";")
    v = re.escape(var)
    if re.fullmatch(rf"{v}=fmaf\((.+),{v}\)", text):
        return True
    m = re.fullmatch(rf"{v}\+=(.+)", text)
    if m is None:
        return False
    # (one product at the top level: a * b, no further + or - outside parentheses)
    depth, prods = 0, 0
    for ch in m.group(1):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0 and ch in "+-?:":
            return False
        prods += depth == 0 and ch == "*"
    return prods == 1


def dot_chains(source: str) -> list[DotChain]:
    """The dot-product chains of ``source``'s device code (``__global__`` and ``__device__`` functions)."""
    text = preprocess(source)
    root = _parser().parse(text.encode()).root_node
    out: list[DotChain] = []
    for fn in root.children:
        if fn.type != "function_definition" or fn.child_by_field_name("body") is None:
            continue
        head = text.encode()[fn.start_byte:fn.child_by_field_name("body").start_byte].decode()
        if "__global__" not in head and "__device__" not in head:
            continue
        name = _name_of_declarator(fn.child_by_field_name("declarator")) or ""
        stack = [fn.child_by_field_name("body")]
        while stack:
            n = stack.pop()
            stack.extend(n.named_children)
            if n.type != "for_statement":
                continue
            var = _float_zero_declaration(n.prev_named_sibling)
            loop = _counted_loop(n)
            body = n.child_by_field_name("body")
            if var is None or loop is None or body is None or not _accumulates(body, var):
                continue
            decl = n.prev_named_sibling
            out.append(DotChain(var, name, decl.start_point[0] + 1, loop[1], loop[2], decl.start_byte, n.end_byte))
    return sorted(out, key=lambda c: c.start)


@dataclass(frozen=True)
class DimensionConstant:
    """A float scalar of a kernel computed from its integer parameters alone (``float scale =
    rsqrtf((float)d);``): one fp32 rounding of a number the port rounds to fp32 too (an engine's scalar operand
    is fp32). Byte span of the declaration in the preprocessed source."""

    var: str
    function: str
    line: int
    start: int
    end: int


#: math functions a dimension constant may call (of integers converted to float)
_MATH_NAMES = frozenset({"rsqrtf", "sqrtf", "__frsqrt_rn", "__fsqrt_rn", "logf", "log2f", "__logf", "expf", "exp2f",
                         "__expf", "powf", "__powf", "__fdividef"})


def dimension_constants(source: str) -> list[DimensionConstant]:
    """The :class:`DimensionConstant` declarations of ``source``'s ``__global__`` kernels."""
    text = preprocess(source)
    raw = text.encode()
    root = _parser().parse(raw).root_node
    out: list[DimensionConstant] = []
    for fn in root.children:
        body = fn.child_by_field_name("body") if fn.type == "function_definition" else None
        if body is None or b"__global__" not in raw[fn.start_byte:body.start_byte]:
            continue
        name = _name_of_declarator(fn.child_by_field_name("declarator")) or ""
        ints = {n for n, t in _param_types(fn) if re.fullmatch(r"(const\s+)?(unsigned\s+)?(int|long|size_t)", t)}
        for n in body.named_children:
            kind = n.child_by_field_name("type") if n.type == "declaration" else None
            decls = [c for c in n.named_children if c.type == "init_declarator"]
            if kind is None or kind.text.decode() != "float" or len(decls) != 1:
                continue
            value = decls[0].child_by_field_name("value")
            if value is None or "[" in value.text.decode() or "->" in value.text.decode():
                continue
            numbers = r"(?<![A-Za-z_\d])\d+(\.\d*)?([eE][-+]?\d+)?f?"  # (literals, not the digits of names)
            ids = set(re.findall(r"[A-Za-z_]\w*", re.sub(numbers, "", value.text.decode())))
            calls = set(re.findall(r"([A-Za-z_]\w*)\s*\(", value.text.decode()))
            if not ids - {"float"} or any(i not in ints and i != "float" and not (i in calls and i in _MATH_NAMES)
                                          for i in ids):
                continue
            var = _name_of_declarator(decls[0].child_by_field_name("declarator")) or ""
            out.append(DimensionConstant(var, name, n.start_point[0] + 1, n.start_byte, n.end_byte))
    return out


def _param_types(fn: Any) -> list[tuple[str, str]]:
    """(name, type text without the name) of a function's parameters."""
    decl = fn.child_by_field_name("declarator")
    while decl is not None and decl.type != "function_declarator":
        decl = decl.child_by_field_name("declarator")
    params = None if decl is None else decl.child_by_field_name("parameters")
    out = []
    for p in [] if params is None else params.named_children:
        if p.type == "parameter_declaration":
            pname = _name_of_declarator(p.child_by_field_name("declarator")) or ""
            text = p.text.decode()
            out.append((pname, re.sub(r"\s+", " ", text[: text.rfind(pname)] if pname else text).strip()))
    return out


def _launch_args(root: Any, kernel: str) -> list[str] | None:
    """The argument texts of the (only) launch ``kernel<<<...>>>(args)``, else None."""
    found = []
    stack = [root]
    while stack:
        n = stack.pop()
        stack.extend(n.named_children)
        if n.type == "call_expression" and any(c.type == "kernel_call_syntax" for c in n.children):
            f = n.child_by_field_name("function")
            if f is not None and f.text.decode() == kernel:
                args = n.child_by_field_name("arguments")
                found.append([_strip(a.text.decode()) for a in args.named_children if a.type != "comment"])
    return found[0] if len(found) == 1 else None


def _param_names(fn: Any) -> list[str]:
    return [n for n, _ in _param_types(fn)]


def chain_length(source: str, chain: DotChain, binding: Mapping[str, str], dims: Mapping[str, int]) -> int | None:
    """How many steps ``chain`` takes on a case of ``dims`` (``binding``: host parameter -> ``"dim:SYM"``, as
    :func:`nkieval.cuda.runner.bind_task` gives), or None when its bound is not one of the forms above."""
    extra = 1 if chain.inclusive else 0
    if _INT.match(chain.bound):
        return int(chain.bound) + extra
    text = preprocess(source)
    root = _parser().parse(text.encode()).root_node
    fn = next((f for f in root.children if f.type == "function_definition"
               and _name_of_declarator(f.child_by_field_name("declarator")) == chain.function), None)
    if fn is None or b"__global__" not in text.encode()[fn.start_byte:fn.end_byte].split(b"{", 1)[0]:
        return None
    names = _param_names(fn)
    args = _launch_args(root, chain.function)
    if chain.bound not in names or args is None or len(args) != len(names):
        return None
    arg = args[names.index(chain.bound)]
    if _INT.match(arg):
        return int(arg) + extra
    kind, _, sym = binding.get(arg, "").partition(":")
    return int(dims[sym]) + extra if kind == "dim" and sym in dims else None
