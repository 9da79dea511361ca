"""The CUDA source's own recipe in near-exact arithmetic: the pivot of the GPU-vs-Trainium envelope.

Float scalars (declarations, by-value parameters and return values of device code, ``(float)`` casts) become
``double`` and the single-precision math functions their double versions; the kernel's order of operations
and its explicit roundings stay: conversions to bf16/fp16/fp8, stores to ``float`` memory (global and
shared arrays keep their type, so pointers and shared buffers keep their layout). Host code and the
``__global__`` signatures are untouched, so the task's arrays bind as before.

Against this run, the GPU kernel's error is its fp32 rounding in its own order (and fast-math), and the
port's error is its departure from the CUDA recipe. The fp64 reference cannot serve: where the reference's
recipe differs from the kernel's (another accumulation dtype, another rounding point), both GPU and port
sit far from it together while agreeing with each other (attention_head: 6e-4 from the reference each,
1e-6 apart).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from nkieval.cuda.chains import DimensionConstant, DotChain
from nkieval.cuda.program import _parser, preprocess

#: single-precision math functions and the double versions the executor runs
DOUBLE_MATH = {"__expf": "exp", "expf": "exp", "exp2f": "exp2", "__exp10f": "exp10", "__logf": "log", "logf": "log",
               "log2f": "log2", "sqrtf": "sqrt", "rsqrtf": "rsqrt", "tanhf": "tanh", "fmaxf": "fmax",
               "fminf": "fmin", "fmaf": "fma", "powf": "pow", "__powf": "pow", "erff": "erf", "sinf": "sin",
               "cosf": "cos", "__sinf": "sin", "__cosf": "cos", "fabsf": "fabs", "expm1f": "expm1",
               "log1pf": "log1p"}
_MATH = re.compile(r"\b(" + "|".join(map(re.escape, DOUBLE_MATH)) + r")\s*\(")
_SCALAR = re.compile(r"\bfloat\b(?=\s+[A-Za-z_]\w*\s*[=;,()])")
_CAST = re.compile(r"\(\s*float\s*\)")


def _widen(text: str) -> str:
    text = _SCALAR.sub("double", text)
    text = _CAST.sub("(double)", text)
    return _MATH.sub(lambda m: DOUBLE_MATH[m.group(1)] + "(", text)


def _widen_outside(text: str, start: int, keep: list[tuple[int, int]]) -> str:
    """``_widen`` over ``text`` (which starts at byte ``start``) except the byte spans ``keep``."""
    raw, out, at = text.encode(), [], 0
    for a, b in keep:
        a, b = max(a - start, at), min(b - start, len(raw))
        if a >= b:
            continue
        out += [_widen(raw[at:a].decode()), raw[a:b].decode()]
        at = b
    return "".join([*out, _widen(raw[at:].decode())])


def exact_source(source: str, keep: Sequence[DotChain | DimensionConstant] = ()) -> str:
    """``source`` (kernel.cu text) with its device code's float scalars and math in double precision, except the
    dot-product chains and dimension constants ``keep`` (:mod:`nkieval.cuda.chains`), which stay in fp32:
    roundings that the other side of the comparison shares."""
    spans = sorted((c.start, c.end) for c in keep)
    text = preprocess(source)
    raw = text.encode()
    regions = []
    for n in _parser().parse(raw).root_node.children:
        if n.type == "function_definition":
            body = n.child_by_field_name("body")
            if body is None:
                continue
            head = raw[n.start_byte:body.start_byte].decode()
            if "__global__" in head:
                regions.append((body.start_byte, body.end_byte))
            elif "__device__" in head:
                regions.append((n.start_byte, n.end_byte))
        elif n.type == "declaration":  # (file-scope constants: constexpr float kScale = 0.125f)
            regions.append((n.start_byte, n.end_byte))
    for a, b in sorted(regions, reverse=True):
        raw = raw[:a] + _widen_outside(raw[a:b].decode(), a, spans).encode() + raw[b:]
    return raw.decode()
