"""Parse a CUDA source into a :class:`Program`: preprocessing (object-like ``#define``), the tree-sitter
parse, top-level declarations (functions, templates, structs, ``constexpr`` constants) and the build
options stated in the source (an ``nvcc`` line in a comment)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from nkieval.cuda.values import CudaError, Unsupported

_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)(\([^)]*\))?[ \t]*(.*?)[ \t]*$")
_DIRECTIVE = re.compile(r"^[ \t]*#")


@dataclass(frozen=True)
class BuildOptions:
    """What the build line says: ``--use_fast_math`` implies approximate division, square root and
    transcendentals (``__expf``...) and flush-to-zero; ``-fmad=false`` turns off FMA contraction."""

    fast_math: bool = False
    ftz: bool = False
    fmad: bool = True
    prec_div: bool = True

    @classmethod
    def from_text(cls, text: str) -> BuildOptions:
        lines = [ln for ln in text.splitlines() if "nvcc" in ln or "NVCCFLAGS" in ln or "build:" in ln.lower()]
        flags = " ".join(lines)
        fast = bool(re.search(r"-?-use_fast_math", flags))
        ftz = fast or bool(re.search(r"-?-ftz[= ]true", flags))
        fmad = not re.search(r"-?-fmad[= ]false", flags)
        prec_div = not (fast or re.search(r"-?-prec-div[= ]false", flags))
        return cls(fast, ftz, fmad, prec_div)


@dataclass
class Program:
    source: str
    root: Any
    functions: dict[str, Any] = field(default_factory=dict)  # name -> function_definition node
    templates: dict[str, tuple[str, ...]] = field(default_factory=dict)  # name -> template parameter names
    structs: dict[str, Any] = field(default_factory=dict)  # name -> field_declaration_list node
    constants: list[Any] = field(default_factory=list)  # top-level declarations (constexpr, __constant__)
    options: BuildOptions = BuildOptions()


def preprocess(text: str) -> str:
    """Blank out directives (keeping line numbers) and substitute object-like macros."""
    macros: dict[str, str] = {}
    out: list[str] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        ln = lines[i]
        m = _DEFINE.match(ln)
        if m:
            body = m.group(3)
            n_extra = 0
            while body.endswith("\\") and i + 1 + n_extra < len(lines):
                n_extra += 1
                body = body[:-1] + " " + lines[i + n_extra].strip()
            if m.group(2) is None:
                macros[m.group(1)] = re.sub(r"//.*$", "", body).strip()
            else:
                raise Unsupported(f"function-like macro {m.group(1)}", i + 1)
            out.extend([""] * (1 + n_extra))
            i += 1 + n_extra
            continue
        out.append("" if _DIRECTIVE.match(ln) else ln)
        i += 1
    text = "\n".join(out)
    if macros:
        pat = re.compile(r"\b(" + "|".join(re.escape(k) for k in sorted(macros, key=len, reverse=True)) + r")\b")

        def expand(mm: re.Match[str]) -> str:
            body = macros[mm.group(1)]
            return body if _SIMPLE.match(body) else "(" + body + ")"
        for _ in range(4):  # macros naming macros
            new = pat.sub(expand, text)
            if new == text:
                break
            text = new
    return _disambiguate_less(text)


_SIMPLE = re.compile(r"^-?[\w.]*$")
_TEMPLATE_FN = re.compile(r"template\s*<[^>]*>\s*(?:(?:__\w+__|static|inline|const|unsigned|struct)\s+)*"
                          r"[\w:]+[\s*&]+(\w+)\s*\(")
_LESS = re.compile(r"(?<![\w.>:])([A-Za-z_]\w*)(\s*)<(?![<=])")
_KEEP = {"template", "static_cast", "reinterpret_cast", "const_cast", "dynamic_cast", "numeric_limits",
         "fragment", "vector", "array"}


def _disambiguate_less(text: str) -> str:
    """``a < b && c > d`` parses as a template argument list in C++'s grammar unless ``a`` is known not to
    be a template: names that are not function templates get parentheses, ``(a) < b``."""
    templates = set(_TEMPLATE_FN.findall(text)) | _KEEP

    def fix(mm: re.Match[str]) -> str:
        name = mm.group(1)
        if name in templates:
            return mm.group(0)
        return f"({name}){mm.group(2)}<"
    return _LESS.sub(fix, text)


@lru_cache(maxsize=1)
def _parser() -> Any:
    import tree_sitter
    import tree_sitter_cuda

    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_cuda.language()))


def _name_of_declarator(d: Any) -> str | None:
    while d is not None and d.type not in ("identifier", "field_identifier", "qualified_identifier"):
        d = d.child_by_field_name("declarator")
    return None if d is None else d.text.decode()


def parameter_names(fn: Any) -> list[str]:
    """The parameter names of a ``function_definition`` node, in order (``""`` for an unnamed one)."""
    d = fn.child_by_field_name("declarator")
    while d is not None and d.type != "function_declarator":
        d = d.child_by_field_name("declarator")
    params = d.child_by_field_name("parameters") if d is not None else None
    return [_name_of_declarator(p.child_by_field_name("declarator")) or "" for p in params.named_children
            if p.type == "parameter_declaration"] if params is not None else []


def parse_program(text: str) -> Program:
    options = BuildOptions.from_text(text)
    src = preprocess(text)
    tree = _parser().parse(src.encode())
    prog = Program(src, tree.root_node, options=options)
    for node in _top_level(tree.root_node):
        _collect(prog, node)
    if not prog.functions:
        raise CudaError("no function definitions in the CUDA source")
    return prog


def _top_level(root: Any) -> list[Any]:
    out = []
    for c in root.children:
        if c.type in ("linkage_specification", "namespace_definition"):
            body = c.child_by_field_name("body") or c.child_by_field_name("value")
            if body is not None:
                out.extend(_top_level(body) if body.type == "declaration_list" else [body])
        else:
            out.append(c)
    return out


def _collect(prog: Program, node: Any) -> None:
    t = node.type
    if t == "ERROR":
        raise Unsupported(f"unparsable code {node.text.decode()[:40]!r}", node.start_point[0] + 1)
    if t == "function_definition":
        name = _name_of_declarator(node.child_by_field_name("declarator"))
        if name:
            prog.functions[name] = node
    elif t == "template_declaration":
        params = node.child_by_field_name("parameters")
        names = tuple(_name_of_declarator(p.child_by_field_name("declarator")) or p.text.decode().split()[-1]
                      for p in params.named_children) if params is not None else ()
        for c in node.named_children:
            if c.type == "function_definition":
                name = _name_of_declarator(c.child_by_field_name("declarator"))
                if name:
                    prog.functions[name] = c
                    prog.templates[name] = names
            elif c.type in ("struct_specifier", "declaration") and c is not params:
                raise Unsupported("a template other than a function template", c.start_point[0] + 1)
    elif t in ("struct_specifier", "type_definition", "declaration") or t == "expression_statement":
        spec = node if t == "struct_specifier" else node.child_by_field_name("type")
        if spec is not None and spec.type == "struct_specifier":
            name = spec.child_by_field_name("name")
            body = spec.child_by_field_name("body")
            if body is not None:
                sname = name.text.decode() if name is not None else _name_of_declarator(
                    node.child_by_field_name("declarator"))
                if sname:
                    prog.structs[sname] = body
            if t == "struct_specifier" or node.child_by_field_name("declarator") is None:
                return
        if t == "declaration":
            if any(c.type == "function_declarator" for c in node.named_children):
                return  # a prototype
            prog.constants.append(node)
