"""Hypothesised changes to a CUDA source: the mutations a port's semantic mistake may correspond to.

Each :class:`Mutation` is one small edit of the (preprocessed) source text, made on its tree-sitter parse:

* ``formula``: a binary operator replaced (``+ - * /`` among themselves), a term dropped (``a op b`` kept as
  ``a`` or ``b``), a statement dropped (an assignment or compound assignment), two call arguments swapped;
* ``order``: the operands of ``-`` or ``/`` swapped, an expression re-associated (``(a op b) op2 c`` as
  ``a op (b op2 c)`` and back), two adjacent statements swapped;
* ``indexing``: a subscript off by one (``a[e]`` as ``a[(e) + 1]`` / ``a[(e) - 1]``), a comparison bound off
  by one (loop conditions included), a divisor off by one (``n - 1`` for ``n``), an ``int`` declaration's
  value off by one, a ``%`` dropped;
* ``precision``: the value of a ``float`` declaration, an arithmetic expression, a math function's result or
  an element read from a ``float`` array rounded to bf16.

The review's differential stage runs the CUDA kernel with a mutation and states the mutation as the cause
of a disagreement only when the mutated kernel reproduces the port's outputs: a mutation is a hypothesis,
never a diagnosis. Host launch statements (``<<<``), error reporting and loop headers (but for their
conditions' bounds) are not mutated.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise, permutations
from typing import Any

from nkieval.cuda.program import _parser, preprocess

ARITH = ("+", "-", "*", "/")
COMPARE = ("<", "<=", ">", ">=")
#: statements that are plumbing, not the kernel's math
_SKIP_STATEMENT = ("<<<", "cudaGetLastError", "fprintf", "printf", "cudaGetErrorString")
KINDS = ("formula", "precision", "order", "indexing")
#: math functions whose result a port may keep in bf16
_MATH = ("expf", "__expf", "exp2f", "logf", "__logf", "sqrtf", "rsqrtf", "tanhf", "powf", "__powf", "sinf", "cosf",
         "erff", "fmaxf", "fminf", "__fdividef")


@dataclass(frozen=True)
class Mutation:
    """One edit: bytes ``start:end`` of the preprocessed source become ``new``."""

    kind: str  # one of KINDS
    what: str  # a short description: "`a + b` as `a - b`"
    line: int  # 1-based line in kernel.cu
    start: int
    end: int
    old: str
    new: str
    #: what the port's corresponding instruction is found by (:mod:`nkieval.review.stages.port_lines`):
    #: "combine" (two operands' flows meet: an operator replaced, operands or arguments swapped), "drop" (a
    #: term dropped: ``parts`` is (kept, dropped)), "precision", "index" (an index or a bound), "" (none)
    site: str = ""
    #: byte spans of the operands in the preprocessed source
    parts: tuple[tuple[int, int], ...] = ()

    def apply(self, text: str) -> str:
        b = text.encode()
        return (b[: self.start] + self.new.encode() + b[self.end:]).decode()


def _t(n: Any) -> str:
    return n.text.decode()


def _short(s: str, limit: int = 60) -> str:
    s = " ".join(s.split())
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _in_subscript(n: Any) -> bool:
    p = n.parent
    while p is not None:
        if p.type == "subscript_argument_list":
            return True
        if p.type in ("expression_statement", "declaration", "compound_statement"):
            return False
        p = p.parent
    return False


def _statement_text(n: Any) -> str:
    p = n
    while p is not None and p.type not in ("expression_statement", "declaration", "for_statement",
                                            "return_statement", "if_statement"):
        p = p.parent
    return "" if p is None else _t(p)


def _integer_context(n: Any) -> bool:
    """Inside an ``int`` declaration's value or a comparison (a bound, a mask): arithmetic a port does not
    keep in bf16."""
    p = n.parent
    while p is not None and p.type not in ("expression_statement", "compound_statement", "return_statement"):
        if p.type == "binary_expression" and _t(p.child_by_field_name("operator")) in COMPARE:
            return True
        if p.type == "declaration":
            ty = p.child_by_field_name("type")
            return ty is not None and _t(ty) in ("int", "size_t", "long", "unsigned")
        p = p.parent
    return False


def _in_loop_header(n: Any) -> bool:
    p = n
    while p is not None and p.parent is not None:
        if p.parent.type == "for_statement" and p.type != "compound_statement" \
                and p != p.parent.child_by_field_name("body"):
            return True
        if p.type == "compound_statement":
            return False
        p = p.parent
    return False


def _thread_index(n: Any) -> bool:
    """An expression over the thread's coordinates: where a thread works, not what it computes."""
    t = _t(n)
    return any(k in t for k in ("threadIdx", "blockIdx", "blockDim", "gridDim"))


def _span(n: Any) -> tuple[int, int]:
    return (n.start_byte, n.end_byte)


def _m(kind: str, what: str, node: Any, new: str, start: int | None = None, end: int | None = None,
       site: str = "", parts: tuple[tuple[int, int], ...] = ()) -> Mutation:
    s = node.start_byte if start is None else start
    e = node.end_byte if end is None else end
    return Mutation(kind, what, node.start_point[0] + 1, s, e, _t(node) if start is None else "", new, site, parts)


def _binary(n: Any) -> Iterator[Mutation]:
    left, right, op = n.child_by_field_name("left"), n.child_by_field_name("right"), n.child_by_field_name("operator")
    if left is None or right is None or op is None:
        return
    o = _t(op)
    a, b = _t(left), _t(right)
    whole = _short(_t(n))
    idx = _in_subscript(n)
    both = (_span(left), _span(right))
    if o in ARITH and not idx:
        yield _m("formula", f"`{whole}` as `{_short(a)}` (term `{_short(o + ' ' + b)}` dropped)", n, f"({a})",
                 site="drop", parts=both)
        if o == "/":  # a mean over a count one too many or too few (n - 1 for n: the unbiased variance)
            for d in ("- 1", "+ 1"):
                yield _m("indexing", f"`{whole}` as `{_short(f'{a} / ({b} {d})')}` (count off by one)", right,
                         f"(({b}) {d})")
        if o in ("+", "*"):
            yield _m("formula", f"`{whole}` as `{_short(b)}` (term `{_short(a + ' ' + o)}` dropped)", n, f"({b})",
                     site="drop", parts=both[::-1])
        for o2 in ARITH:
            if o2 != o:
                yield _m("formula", f"`{whole}` as `{_short(f'{a} {o2} {b}')}`", n, f"({a}) {o2} ({b})",
                         site="combine", parts=both)
        if o in ("-", "/"):
            yield _m("order", f"`{whole}` as `{_short(f'{b} {o} {a}')}` (operands swapped)", n, f"({b}) {o} ({a})",
                     site="combine", parts=both)
        yield from _reassociate(n, left, right, o)
        if not _integer_context(n):
            yield _m("precision", f"`{whole}` rounded to bf16", n, f"__bfloat162float(__float2bfloat16({_t(n)}))",
                     site="precision")
    elif o == "%":
        yield _m("indexing", f"`{whole}` as `{_short(a)}` (the `% {_short(b)}` dropped)", n, f"({a})",
                 site="index", parts=(_span(n),))
    elif o in ("+", "-") and idx:
        yield _m("indexing", f"`{whole}` as `{_short(a)}` (the offset `{_short(o + ' ' + b)}` dropped)", n, f"({a})",
                 site="index", parts=(_span(n),))
    elif o in COMPARE:
        for d in ("+ 1", "- 1"):
            yield _m("indexing", f"`{whole}` as `{_short(f'{a} {o} {b} {d}')}` (bound off by one)", right,
                     f"(({b}) {d})")


def _strip_parens(n: Any) -> Any:
    while n is not None and n.type == "parenthesized_expression" and n.named_child_count == 1:
        n = n.named_children[0]
    return n


def _reassociate(n: Any, left: Any, right: Any, o: str) -> Iterator[Mutation]:
    """``(a p b) o c`` as ``a p (b o c)`` and ``a o (b p c)`` as ``(a o b) p c``, for arithmetic p."""
    inner_l = _strip_parens(left)
    if left.type == "parenthesized_expression" and inner_l is not None and inner_l.type == "binary_expression":
        p = _t(inner_l.child_by_field_name("operator"))
        if p in ARITH:
            a, b, c = _t(inner_l.child_by_field_name("left")), _t(inner_l.child_by_field_name("right")), _t(right)
            new = f"({a}) {p} (({b}) {o} ({c}))"
            yield _m("order", f"`{_short(_t(n))}` as `{_short(new)}` (grouping changed)", n, new)
    inner_r = _strip_parens(right)
    if right.type == "parenthesized_expression" and inner_r is not None and inner_r.type == "binary_expression":
        p = _t(inner_r.child_by_field_name("operator"))
        if p in ARITH:
            a, b, c = _t(left), _t(inner_r.child_by_field_name("left")), _t(inner_r.child_by_field_name("right"))
            new = f"(({a}) {o} ({b})) {p} ({c})"
            yield _m("order", f"`{_short(_t(n))}` as `{_short(new)}` (grouping changed)", n, new)


def _read_precision(n: Any, floats: set[str]) -> Iterator[Mutation]:
    """A read of a float array element rounded to bf16 (the port loads the row into a bf16 tile)."""
    arr = n.child_by_field_name("argument")
    p = n.parent
    written = p is not None and p.type in ("assignment_expression", "update_expression") and \
        (p.child_by_field_name("left") == n or p.child_by_field_name("argument") == n)
    if arr is None or arr.type != "identifier" or _t(arr) not in floats or written:
        return
    yield _m("precision", f"the element `{_short(_t(n))}` read in bf16", n,
             f"__bfloat162float(__float2bfloat16({_t(n)}))", site="precision")


def _subscript(n: Any) -> Iterator[Mutation]:
    lst = n.child_by_field_name("indices") or n.child_by_field_name("index")
    if lst is None:
        return
    idx = lst.named_children[0] if lst.type == "subscript_argument_list" and lst.named_children else lst
    if idx is None:
        return
    e = _t(idx)
    arr = _t(n.child_by_field_name("argument"))
    for d in ("+ 1", "- 1"):
        new = _short(f"{arr}[{e} {d}]")
        yield _m("indexing", f"`{_short(_t(n))}` as `{new}` (index off by one)", idx, f"({e}) {d}",
                 site="index", parts=(_span(idx),))


def _statements(block: Any) -> Iterator[Mutation]:
    stmts = [c for c in block.named_children if c.type in ("expression_statement", "declaration")]
    for s in stmts:
        text = _t(s)
        if any(k in text for k in _SKIP_STATEMENT):
            continue
        if s.type == "expression_statement" and s.named_children and \
                s.named_children[0].type in ("assignment_expression", "update_expression"):
            yield _m("formula", f"the statement `{_short(text)}` dropped", s, "")
    for a, b in pairwise(block.named_children):
        if a.type == b.type == "expression_statement" and not any(k in _t(a) + _t(b) for k in _SKIP_STATEMENT):
            # (the whitespace between the two becomes one newline: only this mutant's later lines shift)
            yield Mutation("order", f"the statements `{_short(_t(a))}` and `{_short(_t(b))}` swapped",
                           a.start_point[0] + 1, a.start_byte, b.end_byte, _t(a) + "\n" + _t(b), _t(b) + "\n" + _t(a))


def _declaration(n: Any) -> Iterator[Mutation]:
    """A float value rounded to bf16; an integer value (an index, a bound) off by one."""
    ty = n.child_by_field_name("type")
    if ty is None or _t(ty) not in ("float", "int"):
        return
    for d in n.named_children:
        if d.type != "init_declarator":
            continue
        v = d.child_by_field_name("value")
        if v is None or v.type == "initializer_list" or (_t(ty) == "int" and _thread_index(v)):
            continue
        name = _t(d.child_by_field_name("declarator"))
        if _t(ty) == "float" and v.type != "number_literal":
            yield _m("precision", f"`{name}` rounded to bf16", v, f"__bfloat162float(__float2bfloat16({_t(v)}))",
                     site="precision")
        else:
            for k in ("+ 1", "- 1"):
                yield _m("indexing", f"`{name} = {_short(_t(v))}` as `{_short(_t(v))} {k}` (off by one)", v,
                         f"({_t(v)}) {k}", site="index" if _t(ty) == "int" else "", parts=(_span(v),))


def _call(n: Any) -> Iterator[Mutation]:
    args = n.child_by_field_name("arguments")
    fn = n.child_by_field_name("function")
    if args is None or fn is None:
        return
    name = _t(fn)
    if name.startswith(("__shfl", "__ballot", "__any", "__all", "atomic", "cuda", "printf", "fprintf", "__bfloat16",
                        "__float2", "__half", "__syncthreads")):
        return
    if name in _MATH:
        yield _m("precision", f"`{_short(_t(n))}` rounded to bf16", n, f"__bfloat162float(__float2bfloat16({_t(n)}))",
                 site="precision")
    if len(args.named_children) < 2:
        return
    a, b = args.named_children[0], args.named_children[1]
    yield Mutation("order", f"the arguments `{_short(_t(a))}` and `{_short(_t(b))}` of `{name}` swapped",
                   a.start_point[0] + 1, a.start_byte, b.end_byte, "", _t(b) + ", " + _t(a), "combine",
                   (_span(a), _span(b)))


def _device_functions(root: Any) -> list[Any]:
    """The bodies of ``__global__`` and ``__device__`` functions (templates included): the host launch code
    (grid sizes, workspace sizes) is never mutated."""
    out = []
    stack = [root]
    while stack:
        n = stack.pop()
        if n.type == "function_definition":
            head = _t(n)[: max(0, (n.child_by_field_name("body") or n).start_byte - n.start_byte)]
            body = n.child_by_field_name("body")
            if body is not None and ("__global__" in head or "__device__" in head):
                out.append(body)
            continue
        stack.extend(n.children)
    return out[::-1]


def mutations(source: str) -> list[Mutation]:
    """Every mutation of ``source`` (raw kernel.cu text; offsets refer to :func:`preprocess` of it), in source
    order within each kind: formula, precision, order, indexing, then element reads rounded to bf16. Only
    device code is mutated."""
    text = preprocess(source)
    tree = _parser().parse(text.encode())
    floats = set(re.findall(r"\bfloat\s*\*\s*(?:const\s+)?(?:__restrict__\s+)?(\w+)", text))
    out: list[Mutation] = []
    stack = [n for n in _device_functions(tree.root_node)]
    while stack:
        n = stack.pop()
        stmt = _statement_text(n)
        skip = any(k in stmt for k in _SKIP_STATEMENT)
        header = _in_loop_header(n)
        if n.type == "binary_expression" and not skip and not _thread_index(n) and \
                (not header or _t(n.child_by_field_name("operator")) in COMPARE):
            out.extend(_binary(n))
        elif n.type == "subscript_expression" and not skip and not _in_loop_header(n):
            out.extend(_subscript(n))
            out.extend(_read_precision(n, floats))
        elif n.type == "compound_statement":
            out.extend(_statements(n))
        elif n.type == "declaration" and not skip:
            out.extend(_declaration(n))
        elif n.type == "call_expression" and not skip:
            out.extend(_call(n))
        stack.extend(reversed(n.children))
    seen: set[tuple[int, int, str]] = set()
    uniq = []
    for m in out:
        key = (m.start, m.end, m.new)
        if key not in seen:
            seen.add(key)
            uniq.append(m)
    order = {k: i for i, k in enumerate(KINDS)}
    # (an element read in bf16 last: a port rounds what it computes far more often than what it loads)
    return sorted(uniq, key=lambda m: (m.what.startswith("the element "), order[m.kind], m.start))


def combine(a: Mutation, b: Mutation, text: str) -> Mutation | None:
    """Two precision mutations of ``text`` made at once (bf16 in two places): :func:`combine_all` of the two."""
    return combine_all((a, b), text)


def combine_all(ms: Sequence[Mutation], text: str) -> Mutation | None:
    """Precision mutations of ``text`` (the preprocessed source) made at once (bf16 in several places): one
    edit spanning them all, or None when two round the same expression or one is not a bf16 rounding of its
    own span. Each rounding wraps its span; nested spans (a call rounded inside a rounded quotient) compose,
    the inner rounding inside the outer one's text (spans of one parse are disjoint or nested, never cross)."""
    if len(ms) < 2 or any(m.kind != "precision" or m.new != _WRAP[0] + m.old + _WRAP[1] for m in ms):
        return None
    spans = {(m.start, m.end) for m in ms}
    if len(spans) != len(ms) or any(a0 < b0 < a1 < b1 for (a0, a1), (b0, b1) in permutations(spans, 2)):
        return None
    # (at one position a rounding that ends closes before one that starts opens; of two that open at one
    # position the outer opens first, of two that close at one position the inner closes first)
    marks = sorted([(s, 1, -e, _WRAP[0]) for s, e in spans] + [(e, 0, -s, _WRAP[1]) for s, e in spans])
    raw = text.encode()
    lo, hi = min(s for s, _ in spans), max(e for _, e in spans)
    out, at = b"", lo
    for pos, _o, _k, mark in marks:
        out += raw[at:pos] + mark.encode()
        at = pos
    out += raw[at:hi]
    first = min(ms, key=lambda m: (m.start, -m.end))
    return Mutation("precision", " and ".join(m.what for m in sorted(ms, key=lambda m: (m.start, -m.end))),
                    first.line, lo, hi, raw[lo:hi].decode(), out.decode(), "precision")


_WRAP = ("__bfloat162float(__float2bfloat16(", "))")


@dataclass(frozen=True)
class _Callee:
    """A ``__device__`` function called from several sites: its definition's span (a template's included), its
    name's span in it, and the spans of the names at its call sites (in device code, outside itself)."""

    name: str
    start: int
    end: int
    name_span: tuple[int, int]
    calls: tuple[tuple[int, int, int], ...]  # (start, end, line) of each call's function name


@functools.lru_cache(maxsize=16)
def _callees(text: str) -> tuple[_Callee, ...]:
    """The ``__device__`` functions of the preprocessed ``text`` that device code calls from two sites or more."""
    raw = text.encode()
    root = _parser().parse(raw).root_node
    defs = []
    for body in _device_functions(root):
        fn = body.parent
        head = raw[fn.start_byte:body.start_byte].decode()
        if "__global__" in head:
            continue
        d = fn.child_by_field_name("declarator")
        while d is not None and d.type not in ("identifier", "field_identifier"):
            d = d.child_by_field_name("declarator")
        if d is None:
            continue
        whole = fn.parent if fn.parent is not None and fn.parent.type == "template_declaration" else fn
        defs.append((d.text.decode(), whole, (d.start_byte, d.end_byte)))
    out = []
    for name, whole, span in defs:
        calls = []
        for body in _device_functions(root):
            stack = [body]
            while stack:
                n = stack.pop()
                stack.extend(n.children)
                if n.type != "call_expression" or whole.start_byte <= n.start_byte < whole.end_byte:
                    continue
                f = n.child_by_field_name("function")
                f = f.child_by_field_name("name") if f is not None and f.type == "template_function" else f
                if f is not None and f.type == "identifier" and f.text.decode() == name:
                    calls.append((f.start_byte, f.end_byte, f.start_point[0] + 1))
        if len(calls) > 1:
            out.append(_Callee(name, whole.start_byte, whole.end_byte, span, tuple(sorted(calls))))
    return tuple(out)


def call_site_variants(source: str, m: Mutation) -> list[Mutation]:
    """``m`` made at one call site only, for each call site of the ``__device__`` function it lies in when that
    function is called from several: a copy of the function with ``m`` applied, called at that site, the
    function itself unchanged for its other calls (a port that computes one of two reductions through a helper
    wrongly and the other right). One edit each, spanning the function and the call; no port line is
    established for them (``site`` is empty). Empty when ``m`` is in no such function."""
    text = preprocess(source)
    callee = next((c for c in _callees(text) if c.start <= m.start and m.end <= c.end), None)
    if callee is None:
        return []
    raw = text.encode()
    out = []
    for k, (a, b, line) in enumerate(callee.calls):
        clone_name = f"{callee.name}__call{k + 1}"
        body = raw[callee.start:callee.end]
        # (the copy: the mutation, then the name, from the later offset to the earlier one)
        edits = sorted([(m.start, m.end, m.new.encode()), (*callee.name_span, clone_name.encode())], reverse=True)
        for s, e, new in edits:
            body = body[: s - callee.start] + new + body[e - callee.start:]
        full = raw[:callee.end] + b"\n" + body + raw[callee.end:]
        shift = len(body) + 1 if a >= callee.end else 0
        full = full[: a + shift] + clone_name.encode() + full[b + shift:]
        lo, hi = min(callee.start, a), max(callee.end, b)
        new = full[lo: hi + len(full) - len(raw)].decode()
        others = len(callee.calls) - 1
        out.append(Mutation(m.kind, f"{m.what}, in the call of `{callee.name}` at kernel.cu:{line} only (its other "
                            f"{others} call{'s' if others > 1 else ''} unchanged)", m.line, lo, hi,
                            raw[lo:hi].decode(), new))
    return out
