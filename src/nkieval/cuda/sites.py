"""Where a CUDA source uses a named value: the use sites of a host parameter (followed through kernel launches
and device-function calls to the parameter it becomes there) or of a named float constant (``constexpr float
k = 0.5f;``), in device code.

A port that changes a value at one of its uses only (the scale kept in the exponent but changed in the max
shift) is reproduced by replacing that one use, not the value everywhere: each :class:`Site` is such a
hypothesis (:func:`nkieval.review.stages.differential._attribute`). Offsets refer to the preprocessed source
(:func:`nkieval.cuda.program.preprocess`), lines to kernel.cu.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from nkieval.cuda.program import _name_of_declarator, parameter_names, parse_program

#: statements whose uses are plumbing (a launch, error reporting), not the kernel's math
_PLUMBING = ("<<<", "cudaGetLastError", "fprintf", "printf")


@dataclass(frozen=True)
class Site:
    """One read of a named value: bytes ``start:end`` of the preprocessed source are the name."""

    name: str  # the name there (a device function's parameter may name the host's value otherwise)
    function: str
    line: int  # 1-based, in kernel.cu
    start: int
    end: int

    def replace(self, text: str, value: str) -> str:
        """``text`` with this use of the name replaced by ``value`` (a C expression)."""
        b = text.encode()
        return (b[: self.start] + value.encode() + b[self.end:]).decode()


def _device(fn: Any) -> bool:
    body = fn.child_by_field_name("body")
    head = fn.text[: (body.start_byte - fn.start_byte) if body is not None else 0].decode()
    return "__global__" in head or "__device__" in head


def _reads(body: Any, name: str) -> list[Any]:
    """The identifiers ``name`` read in ``body`` (not written, not declared)."""
    out = []
    stack = [body]
    while stack:
        n = stack.pop()
        if n.type == "identifier" and n.text.decode() == name:
            p = n.parent
            written = p is not None and ((p.type == "assignment_expression" and p.child_by_field_name("left") == n)
                                         or p.type in ("init_declarator", "update_expression", "declaration"))
            if not written:
                out.append(n)
        stack.extend(reversed(n.children))
    return out


def _statement(n: Any) -> str:
    while n is not None and n.type not in ("expression_statement", "declaration", "return_statement",
                                           "for_statement", "if_statement"):
        n = n.parent
    return "" if n is None else n.text.decode()


def _callee(call: Any) -> str | None:
    fn = call.child_by_field_name("function")
    if fn is None:
        return None
    if fn.type == "template_function":
        fn = fn.child_by_field_name("name")
    return fn.text.decode() if fn is not None and fn.type == "identifier" else None


def _flows(functions: dict[str, Any], entry: str, name: str) -> list[tuple[str, str]]:
    """(function, parameter name) pairs the value of ``entry``'s parameter ``name`` reaches: passed whole (the
    bare name as an argument) to a kernel launch or a call of a function of the source."""
    seen = [(entry, name)]
    k = 0
    while k < len(seen):
        fname, pname = seen[k]
        k += 1
        body = functions[fname].child_by_field_name("body") if fname in functions else None
        for ident in _reads(body, pname) if body is not None else []:
            args = ident.parent
            call = args.parent if args is not None and args.type == "argument_list" else None
            callee = _callee(call) if call is not None and call.type == "call_expression" else None
            if callee not in functions or callee == fname:
                continue
            j = [c.id for c in args.named_children].index(ident.id)
            names = parameter_names(functions[callee])
            if j < len(names) and names[j] and (callee, names[j]) not in seen:
                seen.append((callee, names[j]))
    return seen


@functools.lru_cache(maxsize=64)
def parameter_sites(source: str, entry: str, name: str) -> tuple[Site, ...]:
    """The use sites in device code of the host function ``entry``'s parameter ``name`` (raw kernel.cu text),
    in source order; a use that only passes the value on to a device function is a site too (changing it there
    changes that call only). Empty when the source does not parse."""
    try:
        prog = parse_program(source)
    except Exception:  # (a source the executor cannot read has no sites: the hypotheses are skipped)
        return ()
    functions = prog.functions
    if entry not in functions:
        return ()
    out = []
    for fname, pname in _flows(functions, entry, name):
        fn = functions.get(fname)
        if fn is None or not _device(fn):
            continue
        for ident in _reads(fn.child_by_field_name("body"), pname):
            if any(k in _statement(ident) for k in _PLUMBING):
                continue
            out.append(Site(pname, fname, ident.start_point[0] + 1, ident.start_byte, ident.end_byte))
    return tuple(sorted(out, key=lambda s: s.start))


@functools.lru_cache(maxsize=64)
def named_constants(source: str) -> tuple[tuple[str, float, int, tuple[Site, ...]], ...]:
    """The float constants declared with a literal value (``constexpr float k = 0.5f;``, ``const float``,
    file or function scope) and their use sites in device code: (name, value, the literal's offset in the
    preprocessed source, sites)."""
    try:
        prog = parse_program(source)
    except Exception:  # (no sites, as above)
        return ()
    root = prog.root
    values: dict[str, tuple[float, int]] = {}
    stack = [root]
    while stack:
        n = stack.pop()
        if n.type == "declaration" and any(c.type in ("type_qualifier",) and c.text.decode() in ("const", "constexpr")
                                           for c in n.children):
            ty = n.child_by_field_name("type")
            for d in n.named_children:
                v = d.child_by_field_name("value") if d.type == "init_declarator" else None
                if ty is not None and ty.text.decode() in ("float", "double") and v is not None \
                        and v.type == "number_literal":
                    try:
                        values[_name_of_declarator(d.child_by_field_name("declarator")) or ""] = \
                            (float(v.text.decode().lower().rstrip("fl")), v.start_byte)
                    except ValueError:
                        continue
        stack.extend(n.children)
    out = []
    for name, (value, at) in values.items():
        sites = []
        for fname, fn in prog.functions.items():
            if _device(fn):
                sites += [Site(name, fname, i.start_point[0] + 1, i.start_byte, i.end_byte)
                          for i in _reads(fn.child_by_field_name("body"), name)
                          if not any(k in _statement(i) for k in _PLUMBING)]
        if name:
            out.append((name, value, at, tuple(sorted(sites, key=lambda s: s.start))))
    return tuple(out)


def c_float(value: float) -> str:
    """``value`` as a parenthesised fp32 C literal: ``(0.2f)``, ``(-1e+30f)``."""
    text = repr(float(value))
    if "e" not in text and "." not in text:
        text += ".0"
    return f"({text}f)"
