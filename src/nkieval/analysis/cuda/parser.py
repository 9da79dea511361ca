"""Parse CUDA C++ with tree-sitter-cuda into a :class:`CudaSummary`.

tree-sitter needs no headers and no compiler, tolerates unknown macros, and recovers from syntax
errors (recorded as ``parse_errors`` rather than aborting), which suits kernels written by
candidates and scraped datasets. Nothing is compiled or run.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

from nkieval.analysis.cuda.summary import (
    Accumulator,
    BoundsCheck,
    CallSite,
    CudaSummary,
    KernelInfo,
    LoopInfo,
    Param,
    ParseIssue,
    SharedArray,
)
from nkieval.analysis.cuda.summary import Launch as LaunchInfo


class CudaParseError(ValueError):
    """The input cannot be summarised (not text, empty, no ``__global__`` kernel, or syntax errors
    in strict mode). The message names the rule that was broken and where."""


MATH_FUNCS = {
    "expf", "__expf", "exp", "exp2f", "__exp2f", "exp2", "expm1f", "logf", "__logf", "log", "log2f", "__log2f",
    "log1pf", "sqrtf", "sqrt", "rsqrtf", "rsqrt", "__frsqrt_rn", "__fsqrt_rn", "tanhf", "tanh", "__tanhf", "erff",
    "erf", "erfcf", "sinf", "__sinf", "cosf", "__cosf", "powf", "__powf", "pow", "fmaxf", "fminf", "fmax", "fmin",
    "max", "min", "fabsf", "fabs", "abs", "__fdividef", "fdividef", "__frcp_rn", "__fmaf_rn", "fmaf", "floorf",
    "ceilf", "roundf", "truncf", "hexp", "h2exp", "hlog", "hsqrt", "hrsqrt", "__hmax", "__hmin", "__hadd",
    "__hmul", "__hfma", "__float2half", "__half2float", "__float2bfloat16", "__bfloat162float", "normcdff",
    "sigmoidf",
}
FAST_MATH = {"__expf", "__exp2f", "__logf", "__log2f", "__sinf", "__cosf", "__powf", "__fdividef", "__tanhf"}
WARP_PREFIXES = ("__shfl", "__reduce_", "__ballot", "__any_sync", "__all_sync", "__match_", "__activemask")
SYNC_FUNCS = {"__syncthreads", "__syncthreads_count", "__syncthreads_and", "__syncthreads_or", "__syncwarp"}
TENSOR_CORE_MARKERS = ("wmma", "mma_sync", "load_matrix_sync", "store_matrix_sync", "fill_fragment", "__hmma",
                       "mma.sync", "wgmma", "ldmatrix", "cublas", "cute::gemm")
FLOAT_TYPES = {"float", "double", "half", "__half", "half2", "__half2", "__nv_bfloat16", "nv_bfloat16",
               "__nv_bfloat162", "float2", "float4", "bfloat16", "at::Half", "at::BFloat16", "scalar_t"}
_CMP = {"<", "<=", ">", ">="}
_BUILTIN_INDEX = ("threadIdx", "blockIdx", "blockDim", "gridDim")


@lru_cache(maxsize=1)
def _parser() -> Any:
    try:
        import tree_sitter
        import tree_sitter_cuda
    except ImportError as e:  # pragma: no cover - dependency declared in pyproject
        raise CudaParseError(f"CUDA analysis needs the tree-sitter and tree-sitter-cuda packages: {e}") from e
    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_cuda.language()))


def parse_cuda(source: str | bytes, *, strict: bool = False) -> CudaSummary:
    """Summarise the CUDA kernels, device functions and launches in ``source``.

    Raises :class:`CudaParseError` for non-text input, an empty file, a file with no
    ``__global__`` kernel, or (with ``strict=True``) any syntax error; otherwise syntax errors are
    listed in ``summary.parse_errors`` and the rest of the file is still summarised.
    """
    if isinstance(source, str):
        data = source.encode("utf-8", errors="replace")
    elif isinstance(source, bytes | bytearray):
        data = bytes(source)
    else:
        raise CudaParseError(f"parse_cuda: source must be str or bytes, got {type(source).__name__}")
    nul = data.find(b"\x00")
    if nul >= 0:
        raise CudaParseError(f"parse_cuda: source contains a NUL byte at offset {nul}; expected CUDA C++ text")
    if not data.strip():
        raise CudaParseError("parse_cuda: source is empty")
    tree = _parser().parse(data)
    issues = tuple(_issues(tree.root_node))
    if strict and issues:
        first = issues[0]
        raise CudaParseError(f"parse_cuda (strict): {len(issues)} syntax error(s); first at line {first.line}, "
                             f"col {first.col}: {first.text!r}")
    return _Summariser(tree.root_node).summary(issues)


def extract_cuda_from_python(source: str) -> str:
    """CUDA text embedded in a Python file (``load_inline(cuda_sources=...)`` style, KernelBench/Sakana).

    Returns the concatenation of string constants that contain ``__global__``; raises
    :class:`CudaParseError` when there is none.
    """
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise CudaParseError(f"extract_cuda_from_python: not valid Python (line {e.lineno}: {e.msg})") from e
    parts = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
             and "__global__" in n.value]
    if not parts:
        raise CudaParseError("extract_cuda_from_python: no string literal containing a __global__ kernel")
    return "\n".join(parts)


# --------------------------------------------------------------------------------------------


def _arith(expr: str, env: dict[str, int]) -> int | None:
    """Integer value of ``+ - * / %`` arithmetic over literals and known names (C semantics for /)."""
    import ast

    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError:
        return None

    def ev(n: ast.AST) -> int | None:
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant) and isinstance(n.value, int):
            return n.value
        if isinstance(n, ast.Name):
            return env.get(n.id)
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            v = ev(n.operand)
            return -v if v is not None else None
        if isinstance(n, ast.BinOp):
            a, b = ev(n.left), ev(n.right)
            if a is None or b is None:
                return None
            if isinstance(n.op, ast.Add):
                return a + b
            if isinstance(n.op, ast.Sub):
                return a - b
            if isinstance(n.op, ast.Mult):
                return a * b
            if isinstance(n.op, ast.Div | ast.FloorDiv | ast.Mod) and b != 0:
                q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)  # C truncation
                return q if not isinstance(n.op, ast.Mod) else a - q * b
        return None

    return ev(tree)


def _text(n: Any) -> str:
    return n.text.decode("utf-8", errors="replace") if n is not None else ""


def _line(n: Any) -> int:
    return int(n.start_point[0]) + 1


def _walk(n: Any) -> Iterator[Any]:
    stack = [n]
    while stack:
        cur = stack.pop()
        yield cur
        stack.extend(reversed(cur.children))


def _issues(root: Any) -> Iterator[ParseIssue]:
    if not root.has_error:
        return
    for n in _walk(root):
        if n.type == "ERROR" or n.is_missing:
            snippet = _text(n)[:60] if n.type == "ERROR" else f"missing {n.type}"
            yield ParseIssue(_line(n), int(n.start_point[1]) + 1, snippet)


def _in_for_header(n: Any) -> bool:
    """Whether ``n`` sits in a for statement's initializer or update clause (a loop counter)."""
    while n.parent is not None and n.parent.type != "compound_statement":
        parent = n.parent
        if parent.type == "for_statement":
            return n in (parent.child_by_field_name("update"), parent.child_by_field_name("initializer"))
        n = parent
    return False


def _centred_square(text: str) -> bool:
    """``(x - mean) * (x - mean)`` or ``d = x - mean; ... d * d``: variance about the mean (two-pass)."""
    if re.search(r"\(([^()]*-\s*[\w.]*\b(mean|mu|avg)\w*)\)\s*\*\s*\(\1\)", text, re.I):
        return True
    for m in re.finditer(r"\b(\w+)\s*=\s*[^;=]*-\s*[\w.]*\b(mean|mu|avg)\w*\s*;", text, re.I):
        d = re.escape(m.group(1))
        if re.search(rf"\b{d}\s*\*\s*{d}\b", text):
            return True
    return False


def _call_name(call: Any) -> str:
    fn = call.child_by_field_name("function")
    if fn is None:
        return ""
    if fn.type == "template_function":
        fn = fn.child_by_field_name("name") or fn
    return _text(fn)


class _Summariser:
    def __init__(self, root: Any) -> None:
        self.root = root
        self.defines: dict[str, str] = {}
        self.consts: dict[str, int] = {}
        self.dim3: dict[str, list[str]] = {}
        for n in _walk(root):
            if n.type == "preproc_def":
                name, value = n.child_by_field_name("name"), n.child_by_field_name("value")
                if name is not None:
                    self.defines[_text(name)] = _text(value).strip()
            elif n.type == "declaration":
                self._const_decl(n)

    def _const_decl(self, n: Any) -> None:
        typ = _text(n.child_by_field_name("type"))
        for d in n.children_by_field_name("declarator"):
            if typ == "dim3" and d.type == "function_declarator":
                # `dim3 block(TILE, TILE);` parses as a function declaration (C++'s most vexing parse)
                params = d.child_by_field_name("parameters")
                self.dim3[_text(d.child_by_field_name("declarator"))] = [
                    _text(c) for c in (params.named_children if params is not None else [])]
                continue
            if d.type != "init_declarator":
                continue
            name = _text(d.child_by_field_name("declarator"))
            value = d.child_by_field_name("value") or next(
                (c for c in d.named_children if c.type in ("argument_list", "initializer_list")), None)
            if typ == "dim3" and value is not None:
                args = [_text(c) for c in value.named_children] if value.type in ("argument_list", "initializer_list") \
                    else [_text(value)]
                self.dim3[name] = args
            elif value is not None and typ in ("int", "unsigned", "size_t", "int64_t", "unsigned int", "long"):
                v = self.int_value(_text(value))
                if v is not None:
                    self.consts[name] = v

    def int_value(self, expr: str, depth: int = 0) -> int | None:
        """Evaluate a small integer expression (literals, #defines, const ints, + - * /)."""
        expr = expr.strip()
        if depth > 8 or not expr:
            return None
        if expr in self.defines:
            return self.int_value(self.defines[expr], depth + 1)
        if expr in self.consts:
            return self.consts[expr]
        if not re.fullmatch(r"[\w\s+\-*/()]+", expr):
            return None
        names = set(re.findall(r"[A-Za-z_]\w*", expr))
        env: dict[str, int] = {}
        for nm in names:
            v = self.int_value(nm, depth + 1) if nm not in ("u", "U") else None
            if v is None:
                return None
            env[nm] = v
        cleaned = re.sub(r"(\d+)[uUlL]+\b", r"\1", expr)
        return _arith(cleaned, env)

    # ------------------------------------------------------------------------------------
    def summary(self, issues: tuple[ParseIssue, ...]) -> CudaSummary:
        funcs: dict[str, tuple[Any, str, tuple[str, ...]]] = {}
        for n in _walk(self.root):
            if n.type != "function_definition":
                continue
            quals = {c.type for c in n.children}
            kind = "global" if "__global__" in quals else "device" if "__device__" in quals else "host"
            decl = n.child_by_field_name("declarator")
            while decl is not None and decl.type not in ("function_declarator",):
                decl = decl.child_by_field_name("declarator")
            if decl is None:
                continue
            name = _text(decl.child_by_field_name("declarator")).split("::")[-1]
            tparams: tuple[str, ...] = ()
            if n.parent is not None and n.parent.type == "template_declaration":
                plist = n.parent.child_by_field_name("parameters")
                tparams = tuple(_text(c) for c in plist.named_children) if plist is not None else ()
            funcs.setdefault(name, (n, kind, tparams))
        device_facts = {name: self._facts(node, name) for name, (node, kind, _) in funcs.items() if kind == "device"}
        kernels = []
        for name, (node, kind, tparams) in funcs.items():
            if kind != "global":
                continue
            facts = self._facts(node, name)
            seen: set[str] = set()
            todo = list(facts["device_calls"])
            while todo:
                callee = todo.pop()
                if callee in seen or callee not in device_facts:
                    continue
                seen.add(callee)
                sub = device_facts[callee]
                for key in ("atomics", "warp_ops", "loops", "math_calls", "accumulators", "tensor_core", "shared",
                            "bounds_checks"):
                    facts[key] = facts[key] + sub[key]
                facts["syncthreads"] += sub["syncthreads"]
                facts["thread_indexing"] |= sub["thread_indexing"]
                facts["float_types"] |= sub["float_types"]
                facts["patterns"] |= sub["patterns"]
                todo.extend(sub["device_calls"])
            kernels.append(KernelInfo(
                name=name, line=_line(node), end_line=int(node.end_point[0]) + 1, templated=bool(tparams),
                template_params=tparams, params=facts["params"], shared=tuple(facts["shared"]),
                syncthreads=facts["syncthreads"], atomics=tuple(facts["atomics"]), warp_ops=tuple(facts["warp_ops"]),
                loops=tuple(facts["loops"]), bounds_checks=tuple(facts["bounds_checks"]),
                math_calls=tuple(facts["math_calls"]), accumulators=tuple(facts["accumulators"]),
                tensor_core=tuple(facts["tensor_core"]), thread_indexing=tuple(sorted(facts["thread_indexing"])),
                float_types=tuple(sorted(facts["float_types"])), device_calls=tuple(sorted(facts["device_calls"])),
                patterns=tuple(sorted(facts["patterns"]))))
        if not kernels:
            found = ", ".join(sorted(funcs)) or "none"
            raise CudaParseError(f"parse_cuda: no __global__ kernel found (functions defined: {found})"
                                 + (f"; {len(issues)} syntax error(s), first at line {issues[0].line}" if issues else ""))
        launches = tuple(self._launches())
        return CudaSummary(kernels=tuple(kernels),
                           device_functions=tuple(sorted(n for n, (_, k, _) in funcs.items() if k == "device")),
                           launches=launches, defines=dict(self.defines), parse_errors=issues)

    # ------------------------------------------------------------------------------------
    def _params(self, fn: Any) -> tuple[Param, ...]:
        decl = fn.child_by_field_name("declarator")
        while decl is not None and decl.type != "function_declarator":
            decl = decl.child_by_field_name("declarator")
        plist = decl.child_by_field_name("parameters") if decl is not None else None
        out = []
        for p in plist.named_children if plist is not None else []:
            if p.type != "parameter_declaration":
                continue
            d = p.child_by_field_name("declarator")
            ident = None
            for m in _walk(d) if d is not None else []:
                if m.type == "identifier":
                    ident = m
            full = _text(p)
            name = _text(ident) if ident is not None else ""
            typ = full[: full.rfind(name)].strip() if name else full
            pointer = d is not None and any(m.type in ("pointer_declarator", "array_declarator") for m in _walk(d))
            out.append(Param(name=name, type=(typ + (" *" if pointer and "*" not in typ else "")).strip(),
                             pointer=pointer, const="const" in typ.split()))
        return tuple(out)

    def _facts(self, fn: Any, name: str) -> dict[str, Any]:
        params = self._params(fn)
        int_params = {p.name for p in params if not p.pointer}
        body = fn.child_by_field_name("body")
        f: dict[str, Any] = {"params": params, "shared": [], "syncthreads": 0, "atomics": [], "warp_ops": [],
                             "loops": [], "bounds_checks": [], "math_calls": [], "accumulators": [],
                             "tensor_core": [], "thread_indexing": set(), "float_types": set(),
                             "device_calls": set(), "patterns": set()}
        var_types: dict[str, str] = {p.name: p.type for p in params}
        index_vars: set[str] = set()
        nodes = list(_walk(body)) if body is not None else []
        for n in nodes:
            t = n.type
            if t == "declaration":
                self._declaration(n, f, var_types, index_vars)
            elif t == "call_expression":
                self._call(n, f)
            elif t == "field_expression":
                arg = _text(n.child_by_field_name("argument"))
                if arg in _BUILTIN_INDEX:
                    f["thread_indexing"].add(f"{arg}.{_text(n.child_by_field_name('field'))}")
            elif t in ("primitive_type", "type_identifier", "qualified_identifier") and _text(n) in FLOAT_TYPES:
                f["float_types"].add(_text(n))
            elif t in ("for_statement", "while_statement", "do_statement"):
                f["loops"].append(self._loop(n))
            elif t == "string_literal" and any(m in _text(n) for m in ("mma.sync", "wgmma")):
                f["tensor_core"].append(CallSite("asm mma", _line(n), _text(n)[:60]))
        for p in params:
            for tok in re.findall(r"[A-Za-z_][\w:]*", p.type):
                if tok in FLOAT_TYPES:
                    f["float_types"].add(tok)
        # bounds checks: comparisons in conditions that involve an index and/or a size parameter
        for n in nodes:
            ctx = {"if_statement": "if", "while_statement": "while", "for_statement": "for",
                   "conditional_expression": "ternary"}.get(n.type)
            if ctx is None:
                continue
            cond = n.child_by_field_name("condition")
            for cmp in _walk(cond) if cond is not None else []:
                if cmp.type == "binary_expression" and _text(cmp.child_by_field_name("operator")) in _CMP:
                    lhs, rhs = cmp.child_by_field_name("left"), cmp.child_by_field_name("right")
                    op = _text(cmp.child_by_field_name("operator"))
                    lt, rt = _text(lhs), _text(rhs)
                    ids = set(re.findall(r"[A-Za-z_]\w*", lt + " " + rt))
                    has_index = bool(ids & index_vars) or any(b in lt + rt for b in _BUILTIN_INDEX)
                    bparams = tuple(sorted(ids & int_params))
                    if has_index or bparams:
                        f["bounds_checks"].append(BoundsCheck(lt, op, rt, _line(cmp), ctx, bparams))
        self._accumulators(nodes, f, var_types)
        self._patterns(nodes, f)
        return f

    def _declaration(self, n: Any, f: dict[str, Any], var_types: dict[str, str], index_vars: set[str]) -> None:
        typ = _text(n.child_by_field_name("type"))
        quals = [_text(c) for c in n.children if c.type in ("type_qualifier", "storage_class_specifier")]
        for d in n.children_by_field_name("declarator"):
            inner = d.child_by_field_name("declarator") if d.type == "init_declarator" else d
            ident = inner
            dims: list[str] = []
            while ident is not None and ident.type == "array_declarator":
                size = ident.child_by_field_name("size")
                dims.insert(0, _text(size) if size is not None else "")
                ident = ident.child_by_field_name("declarator")
            while ident is not None and ident.type in ("pointer_declarator", "reference_declarator"):
                ident = ident.child_by_field_name("declarator") or (ident.named_children[-1] if ident.named_children else None)
            name = _text(ident)
            var_types[name] = typ
            if "__shared__" in quals:
                f["shared"].append(SharedArray(name=name, dtype=typ, dims=tuple(dims), dynamic="extern" in quals,
                                               line=_line(n)))
            value = d.child_by_field_name("value") if d.type == "init_declarator" else None
            if value is not None and any(b in _text(value) for b in _BUILTIN_INDEX):
                index_vars.add(name)

    def _call(self, n: Any, f: dict[str, Any]) -> None:
        name = _call_name(n)
        short = name.split("::")[-1].split(".")[-1]
        line = _line(n)
        if short in SYNC_FUNCS or name.endswith(".sync") or name in ("cg::sync", "block.sync"):
            f["syncthreads"] += 1
        elif short.startswith("atomic"):
            f["atomics"].append(CallSite(short, line, _text(n)[:80]))
        elif short.startswith(WARP_PREFIXES) or (short in ("shfl_down", "shfl_xor", "shfl_up", "reduce") and "cg" in name):
            f["warp_ops"].append(CallSite(short, line, _text(n)[:80]))
        elif any(m in name for m in TENSOR_CORE_MARKERS):
            f["tensor_core"].append(CallSite(name, line, _text(n)[:80]))
        elif short in MATH_FUNCS:
            f["math_calls"].append(CallSite(short, line, _text(n)[:80]))
        elif name and not name.startswith(("__", "static_cast", "reinterpret_cast")):
            f["device_calls"].add(short)

    def _loop(self, n: Any) -> LoopInfo:
        kind = {"for_statement": "for", "while_statement": "while", "do_statement": "do"}[n.type]
        init = n.child_by_field_name("initializer")
        cond = n.child_by_field_name("condition")
        step = n.child_by_field_name("update")
        var = ""
        if init is not None:
            ids = [m for m in _walk(init) if m.type == "identifier"]
            var = _text(ids[0]) if ids else ""
        st = _text(step)
        grid_stride = ("gridDim" in st and "blockDim" in st) or bool(
            re.search(r"\+=\s*(stride|grid_stride|step)\b", st))
        ct = _text(cond).strip()
        if n.type != "for_statement" and ct.startswith("(") and ct.endswith(")"):
            ct = ct[1:-1].strip()
        return LoopInfo(kind=kind, var=var, init=_text(init), cond=ct, step=st, line=_line(n),
                        grid_stride=grid_stride)

    def _accumulators(self, nodes: list[Any], f: dict[str, Any], var_types: dict[str, str]) -> None:
        seen: set[str] = set()
        for n in nodes:
            if n.type != "assignment_expression":
                continue
            op = _text(n.child_by_field_name("operator"))
            left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
            name = _text(left)
            if left is None or left.type != "identifier" or name in seen:
                continue
            rt = _text(right)
            in_loop = False
            p = n.parent
            while p is not None and p.type != "function_definition":
                if p.type in ("for_statement", "while_statement", "do_statement"):
                    in_loop = True
                    break
                p = p.parent
            if _in_for_header(n):
                continue
            self_update = op in ("+=", "-=", "*=") or (op == "=" and re.search(rf"\b{re.escape(name)}\b", rt))
            reduce_call = op == "=" and re.match(r"(fmaxf|fminf|max|min|fmax|fmin)\s*\(", rt) is not None
            if in_loop and (self_update or reduce_call) and name in var_types:
                seen.add(name)
                f["accumulators"].append(Accumulator(name, var_types[name], op, _line(n)))

    def _patterns(self, nodes: list[Any], f: dict[str, Any]) -> None:
        pats: set[str] = f["patterns"]
        text = "\n".join(_text(n) for n in nodes[:1])
        math = {c.name for c in f["math_calls"]}
        exp_calls = [c for c in f["math_calls"] if c.name in ("expf", "__expf", "exp", "exp2f", "__exp2f", "hexp")]
        has_max = bool(math & {"fmaxf", "fmax", "max", "__hmax"}) or re.search(r"\bmax\w*\b", text, re.I) is not None
        if has_max and any("-" in c.text for c in exp_calls):
            pats.add("max_subtraction")
        if re.search(r"\b(m_?(old|prev|new)|(old|prev|new|running)_?max|max_?(old|prev|new))\b", text, re.I) \
                and len(exp_calls) >= 2:
            pats.add("online_softmax")
        if _centred_square(text):
            pats.add("two_pass_variance")
        if re.search(r"\bwelford\w*|\bm2\b|\bM2\b", text):
            pats.add("welford")
        if re.search(r"mean\w*\s*\*\s*mean\w*", text, re.I) and re.search(r"sq|square", text, re.I):
            pats.add("one_pass_variance")
        if math & {"erff", "erf", "normcdff"}:
            pats.add("erf_gelu" if "0.5" in text or "M_SQRT1_2" in text or "0.70710" in text else "erf")
        if math & {"tanhf", "tanh", "__tanhf"} and ("0.044715" in text or "0.79788" in text):
            pats.add("tanh_gelu")
        if math & FAST_MATH:
            pats.add("fast_math")
        if any(lp.grid_stride for lp in f["loops"]):
            pats.add("grid_stride_loop")
        for n in nodes:
            if n.type == "assignment_expression" and _text(n.child_by_field_name("operator")) == "+=":
                r = n.child_by_field_name("right")
                if r is not None and r.type == "binary_expression" and _text(r.child_by_field_name("operator")) == "*":
                    subs = [m for m in _walk(r) if m.type == "subscript_expression"]
                    in_loop = False
                    p = n.parent
                    while p is not None and p.type != "function_definition":
                        if p.type == "for_statement":
                            in_loop = True
                            break
                        p = p.parent
                    if len(subs) >= 2 and in_loop:
                        pats.add("inner_product_loop")
                        break

    # ------------------------------------------------------------------------------------
    def _launches(self) -> Iterator[LaunchInfo]:
        for n in _walk(self.root):
            if n.type != "call_expression":
                continue
            cfg = next((c for c in n.children if c.type == "kernel_call_syntax"), None)
            if cfg is None:
                continue
            fn = n.child_by_field_name("function")
            targs: tuple[str, ...] = ()
            if fn is not None and fn.type == "template_function":
                al = fn.child_by_field_name("arguments")
                targs = tuple(_text(c) for c in al.named_children) if al is not None else ()
                fn = fn.child_by_field_name("name")
            args = [c for c in cfg.named_children]
            texts = [_text(a) for a in args] + ["", "", "", ""]
            yield LaunchInfo(kernel=_text(fn), grid=texts[0], block=texts[1], smem=texts[2], stream=texts[3],
                             line=_line(n), template_args=targs, block_values=self._dims(texts[1]))

    def _dims(self, expr: str) -> tuple[int, ...]:
        expr = expr.strip()
        if not expr:
            return ()
        m = re.fullmatch(r"dim3\s*\((.*)\)", expr, re.S)
        parts = [p for p in re.split(r",", m.group(1))] if m else self.dim3.get(expr, [expr])
        vals = [self.int_value(p) for p in parts]
        return tuple(v for v in vals if v is not None) if all(v is not None for v in vals) else ()
