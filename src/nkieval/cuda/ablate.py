"""What makes a GPU result differ from a Trainium port's: the CUDA kernel re-run with one source of difference
removed at a time (an ablation), and each ablation's share of the difference it removes.

The ablations (each offered only where the source or its build line has what it removes):

* ``fma``: FMA contraction off (``-fmad=false``): every ``a * b + c`` rounds the product before the sum;
* ``fast_math``: the fast-math intrinsics exact (``__expf`` as ``expf``, ``__fdividef`` as an IEEE division, and
  the approximate transcendentals and division ``--use_fast_math`` implies off; flush-to-zero kept);
* ``ftz``: flush-to-zero off (subnormal operands and results kept);
* ``accumulation``: the kernel's accumulators in fp64 (a float variable updated by ``+=``, ``-=``, ``v = v + ...``
  or ``v = fmaf(a, b, v)``, and such a parameter of a device function: a warp's shuffle reduction of it too);
  what lands in ``float`` memory (a shared-memory partial, the output) is still rounded to fp32;
* ``mixed_precision``: the kernel's casts to bf16/fp16 kept in fp32 (``__float2bfloat16(x)`` as ``x``, a scalar
  ``__nv_bfloat16`` or ``__half`` variable as ``float``); arrays keep their types, so the task's inputs and
  outputs round as before.

:func:`shares` compares each ablated run with the port: the share of the squared difference (summed over an
output's elements) that the ablation removes, ``1 - |GPU_a - port|^2 / |GPU - port|^2``. Independent rounding
sources add in squares, so the shares of independent causes add up to at most 1; a negative share means the
ablation moved the GPU away from the port (the port makes that rounding too).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nkieval.cuda.program import BuildOptions, _name_of_declarator, _parser, parameter_names, preprocess

#: fast-math intrinsics and their exact counterparts (the executor runs both)
EXACT_INTRINSICS = {"__expf": "expf", "__exp10f": "exp10f", "__logf": "logf", "__log2f": "log2f",
                    "__log10f": "log10f", "__powf": "powf", "__sinf": "sinf", "__cosf": "cosf", "__tanf": "tanf",
                    "__fdividef": "__fdiv_rn"}
_INTRINSIC = re.compile(r"\b(" + "|".join(map(re.escape, EXACT_INTRINSICS)) + r")\s*\(")
_TO_LOW = re.compile(r"\b(__float2bfloat16_rn|__float2bfloat16|__float2half_rn|__float2half)\s*\(")
_LOW_TYPES = ("__nv_bfloat16", "__half", "half", "__nv_fp8_e4m3", "__nv_fp8_e5m2")

#: an ablation is named as a cause of the difference when it removes at least this share of it: a fifth, above
#: what the ablations not named removed on the built-in experts (at most 0.17, median 0), and below the half that
#: one of two equal, independent sources removes
NAMED_SHARE = 0.2
#: what each ablation removes, as a report names it
WHAT = {"fma": "FMA contraction", "fast_math": "fast-math intrinsics", "ftz": "flush-to-zero",
        "accumulation": "fp32 accumulation (order and rounding)", "mixed_precision": "casts to bf16/fp16"}


@dataclass(frozen=True)
class Ablation:
    """One re-run: ``source`` (kernel.cu text) built with ``options``."""

    name: str  # a key of WHAT
    source: str
    options: BuildOptions

    @property
    def what(self) -> str:
        return WHAT[self.name]


def _device_bodies(root: Any, raw: bytes) -> list[Any]:
    """The ``__global__`` and ``__device__`` function definitions (template ones included)."""
    out, stack = [], [root]
    while stack:
        n = stack.pop()
        if n.type == "function_definition":
            body = n.child_by_field_name("body")
            head = raw[n.start_byte:body.start_byte if body is not None else n.end_byte].decode()
            if body is not None and ("__global__" in head or "__device__" in head):
                out.append(n)
            continue
        stack.extend(n.children)
    return out


def _walk(n: Any) -> list[Any]:
    out, stack = [], [n]
    while stack:
        x = stack.pop()
        out.append(x)
        stack.extend(x.children)
    return out


def _strip(n: Any) -> Any:
    while n is not None and n.type == "parenthesized_expression" and n.named_child_count == 1:
        n = n.named_children[0]
    return n


def _adds_to(expr: Any, target: str) -> bool:
    """Does ``expr`` add to (or subtract from) ``target``: ``target + e``, ``e + target``, ``target - e``,
    ``fmaf(a, b, target)``, in either branch of a conditional?"""
    e = _strip(expr)
    if e is None:
        return False
    if e.type == "conditional_expression":
        return any(_adds_to(e.child_by_field_name(k), target) for k in ("consequence", "alternative"))
    if e.type == "binary_expression" and e.child_by_field_name("operator").text.decode() in ("+", "-"):
        ops = [_strip(e.child_by_field_name("left")), _strip(e.child_by_field_name("right"))]
        return any(o is not None and o.text.decode().strip() == target for o in ops)
    if e.type == "call_expression" and (e.child_by_field_name("function") or e).text.decode() in ("fmaf", "__fmaf_rn"):
        args = e.child_by_field_name("arguments")
        return args is not None and bool(args.named_children) and args.named_children[-1].text.decode().strip() == target
    return False


def _accumulated(fn: Any) -> tuple[set[str], set[str], set[str]]:
    """What ``fn`` accumulates into (``v += e``, ``v -= e``, ``v = v + e``, ``v = fmaf(a, b, v)``...): (scalar
    names, array names (``smem[t] = smem[t] + smem[t + s]``), struct field names (``s.mean += d``))."""
    names: set[str] = set()
    arrays: set[str] = set()
    fields: set[str] = set()
    for n in _walk(fn):
        if n.type != "assignment_expression":
            continue
        left, right, op = n.child_by_field_name("left"), n.child_by_field_name("right"), \
            n.child_by_field_name("operator")
        if left is None or right is None or op is None:
            continue
        if not (op.text.decode() in ("+=", "-=") or (op.text.decode() == "=" and _adds_to(right, left.text.decode()))):
            continue
        if left.type == "identifier":
            names.add(left.text.decode())
        elif left.type == "subscript_expression":
            arr = left.child_by_field_name("argument")
            if arr is not None and arr.type == "identifier":
                arrays.add(arr.text.decode())
        elif left.type == "field_expression":
            f = left.child_by_field_name("field")
            if f is not None:
                fields.add(f.text.decode())
    return names, arrays, fields


def _arrays(fn: Any, names: set[str] | None) -> list[tuple[Any, str]]:
    """(type node, name) of ``fn``'s ``float`` arrays and pointer parameters named in ``names`` (all: None)."""
    out = []
    for n in _walk(fn):
        if n.type not in ("declaration", "parameter_declaration"):
            continue
        ty = n.child_by_field_name("type")
        d = n.child_by_field_name("declarator")
        if ty is None or ty.text.decode() != "float" or d is None or d.type not in ("array_declarator",
                                                                                       "pointer_declarator"):
            continue
        name = _name_of_declarator(d)
        if name and (names is None or name in names):
            out.append((ty, name))
    return out


def _scalar_declarations(fn: Any, types: Sequence[str]) -> list[tuple[Any, list[str]]]:
    """(type node, declared names) of the declarations and parameters of ``fn`` of one of ``types``, scalars
    only (no pointer, array or ``__shared__``)."""
    out = []
    for n in _walk(fn):
        if n.type not in ("declaration", "parameter_declaration"):
            continue
        ty = n.child_by_field_name("type")
        if ty is None or ty.text.decode() not in types or "__shared__" in n.text.decode().split(ty.text.decode())[0]:
            continue
        decls = [n.child_by_field_name("declarator")] if n.type == "parameter_declaration" else \
            [c for c in n.named_children if c is not ty and c.type in ("init_declarator", "identifier")]
        names = []
        for d in decls:
            inner = d.child_by_field_name("declarator") if d is not None and d.type == "init_declarator" else d
            if inner is None or inner.type != "identifier":
                names = []  # (a pointer or an array among them: the declaration is left alone)
                break
            names.append(_name_of_declarator(inner) or "")
        if names:
            out.append((ty, names))
    return out


def _retype(text: str, spans: Sequence[tuple[int, int]], new: str) -> str:
    raw = text.encode()
    for a, b in sorted(set(spans), reverse=True):
        raw = raw[:a] + new.encode() + raw[b:]
    return raw.decode()


def _accumulation(text: str) -> str | None:
    raw = text.encode()
    root = _parser().parse(raw).root_node
    fns = _device_bodies(root, raw)
    spans: list[tuple[int, int]] = []
    fields: set[str] = set()
    arrays: set[tuple[str, str]] = set()  # ((function, array or pointer parameter) accumulated into)
    for fn in fns:
        names, accumulated, f = _accumulated(fn)
        fields |= f
        spans += [(ty.start_byte, ty.end_byte) for ty, declared in _scalar_declarations(fn, ("float",))
                  if names & set(declared)]
        arrays |= {(_function_name(fn), a) for a in accumulated}
    spans += _widened_arrays(fns, raw, arrays)
    for n in _walk(root):  # (the structs' accumulated float fields)
        if n.type == "field_declaration" and fields:
            ty = n.child_by_field_name("type")
            declared = {c.text.decode() for c in n.named_children if c.type == "field_identifier"}
            if ty is not None and ty.text.decode() == "float" and declared & fields:
                spans.append((ty.start_byte, ty.end_byte))
    return _retype(text, spans, "double") if spans else None


def _widened_arrays(fns: list[Any], raw: bytes, wide: set[tuple[str, str]]) -> list[tuple[int, int]]:
    """The type spans of the ``float`` arrays and pointer parameters to widen with the accumulated ones ``wide``
    ((function, name) pairs): every array passed to a widened pointer parameter and every pointer parameter
    that receives a widened array, to a fixpoint (a shared buffer that one helper sums into and another takes
    the max in is widened for both). None when that reaches a ``__global__`` kernel's parameter (the task's
    arrays keep their types): the accumulators in registers are widened alone then."""
    by_name = {_function_name(fn): fn for fn in fns}
    kernels = {name for name, fn in by_name.items() if "__global__" in raw[fn.start_byte:fn.end_byte].decode()
               .split("(")[0]}
    typed = {name: {n: ty for ty, n in _arrays(fn, None)} for name, fn in by_name.items()}
    wide = {(f, a) for f, a in wide if a in typed.get(f, {})}
    changed = True
    while changed:
        changed = False
        for fname, fn in by_name.items():
            for call in (n for n in _walk(fn) if n.type == "call_expression"):
                callee, args = call.child_by_field_name("function"), call.child_by_field_name("arguments")
                g = callee.text.decode() if callee is not None else ""
                if g not in by_name or args is None:
                    continue
                params = parameter_names(by_name[g])
                for k, arg in enumerate(args.named_children[: len(params)]):
                    a, pk = arg.text.decode().strip(), params[k]
                    if a not in typed[fname] or pk not in typed[g]:
                        continue
                    for pair in ((g, pk), (fname, a)):
                        if ((fname, a) in wide or (g, pk) in wide) and pair not in wide:
                            wide.add(pair)
                            changed = True
    params = {(f, p) for f in kernels for p in parameter_names(by_name[f])}
    if wide & params:
        return []
    return [(typed[f][a].start_byte, typed[f][a].end_byte) for f, a in wide]


def _function_name(fn: Any) -> str:
    return _name_of_declarator(fn.child_by_field_name("declarator")) or ""


def _mixed_precision(text: str) -> str | None:
    raw = text.encode()
    root = _parser().parse(raw).root_node
    spans = [(ty.start_byte, ty.end_byte) for fn in _device_bodies(root, raw)
             for ty, _names in _scalar_declarations(fn, _LOW_TYPES)]
    casts = bool(_TO_LOW.search(text))
    if not spans and not casts:
        return None
    return _TO_LOW.sub("(", _retype(text, spans, "float"))


def ablations(source: str) -> list[Ablation]:
    """The ablations of ``source`` (kernel.cu text) that remove something it has, in the order of :data:`WHAT`.
    The sources are preprocessed (their build line read first: the options carry it)."""
    opts = BuildOptions.from_text(source)
    text = preprocess(source)
    out = []
    if opts.fmad:
        out.append(Ablation("fma", text, dataclasses.replace(opts, fmad=False)))
    if opts.fast_math or not opts.prec_div or _INTRINSIC.search(text):
        exact = _INTRINSIC.sub(lambda m: EXACT_INTRINSICS[m.group(1)] + "(", text)
        out.append(Ablation("fast_math", exact, dataclasses.replace(opts, fast_math=False, prec_div=True)))
    if opts.ftz:
        out.append(Ablation("ftz", text, dataclasses.replace(opts, ftz=False)))
    try:
        acc, low = _accumulation(text), _mixed_precision(text)
    except Exception:  # (a source the rewrite cannot read: the other ablations stand)
        acc = low = None
    if acc is not None:
        out.append(Ablation("accumulation", acc, opts))
    if low is not None:
        out.append(Ablation("mixed_precision", low, opts))
    return out


def shares(gpu: np.ndarray, port: np.ndarray, ablated: Mapping[str, np.ndarray]) -> dict[str, float] | None:
    """Per ablation, the share of the squared GPU-vs-port difference that it removes (``1 - S_a / S``, S the
    sum over the elements where every run is finite); None when GPU and port do not differ there."""
    g = np.asarray(gpu, np.float64).reshape(-1)
    p = np.asarray(port, np.float64).reshape(-1)
    if p.size != g.size:
        return None
    runs = {k: np.asarray(v, np.float64).reshape(-1) for k, v in ablated.items() if np.size(v) == g.size}
    fin = np.isfinite(g) & np.isfinite(p)
    for v in runs.values():
        fin &= np.isfinite(v)
    with np.errstate(all="ignore"):
        base = float(np.sum((g[fin] - p[fin]) ** 2))
        if not base > 0 or not np.isfinite(base):
            return None
        return {k: 1.0 - float(np.sum((v[fin] - p[fin]) ** 2)) / base for k, v in runs.items()}


def named(got: Mapping[str, float]) -> list[tuple[str, float]]:
    """The ablations of :func:`shares` that remove at least :data:`NAMED_SHARE` of the difference, the largest
    share first: what the difference comes from."""
    return sorted(((k, v) for k, v in got.items() if v >= NAMED_SHARE), key=lambda x: -x[1])
