"""NKI042 host-array-compute: the kernel (or code around it) computes with NumPy/PyTorch/JAX instead of NKI instructions.

## What it does
Inside kernels and their helpers, flags NumPy, PyTorch, JAX, CuPy or SciPy calls whose arguments
involve a tensor or tile (reading `.shape`/`.dtype` is fine). Elsewhere in the file (outside an
`if __name__ == "__main__":` block) flags array computations, which is host-side work next to the
kernel.

## Why is this bad
Such a "kernel" computes on the host CPU and returns the right numbers without running anything on
the NeuronCore: the best-known reward hack (a silent fallback to a library op). Even when done for
a small part of the work, it breaks the kernel on hardware, where tensors are not NumPy arrays.

## Example
```python
@nki.jit
def softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    ...
```

## Use instead
```python
@nki.jit
def softmax(x):
    ...  # nisa.tensor_reduce(op=nl.maximum), nisa.activation(op=nl.exp, bias=...), ...
```

## References
- anchors-eval.md §3 A.5, A.6, E.31 (fallback to host or framework ops).
- KernelBench static checker (torch compute ops in the kernel), as summarised in migration.md §2.4.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from nkieval.analysis.finding import Finding
from nkieval.analysis.nki.helpers import tensor_params
from nkieval.analysis.nki.model import META_ATTRS, SourceModel, walk
from nkieval.analysis.rule import make_rule

_HOST = {"np", "torch", "jax", "jnp", "cupy", "scipy"}
_HARMLESS = {"dtype", "finfo", "iinfo", "float32", "float16", "bfloat16", "int32", "int8", "uint8", "int16",
             "uint16", "uint32", "bool_", "result_type", "promote_types", "can_cast", "issubdtype", "prod",
             "random.default_rng", "random.seed", "errstate", "set_printoptions", "device", "no_grad", "ceil",
             "floor"}


def _data_refs(e: ast.AST, tensors: set[str]) -> str | None:
    if isinstance(e, ast.Attribute) and e.attr in META_ATTRS:
        return None
    if isinstance(e, ast.Name) and e.id in tensors:
        return e.id
    for ch in ast.iter_child_nodes(e):
        hit = _data_refs(ch, tensors)
        if hit:
            return hit
    return None


def _main_guard_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.If) and "__main__" in ast.unparse(stmt.test):
            for n in walk(stmt):
                if hasattr(n, "lineno"):
                    lines.add(n.lineno)
    return lines


def check(model: SourceModel) -> Iterator[Finding]:
    nki_nodes: set[int] = set()
    for f in model.nki_functions:
        tensors = tensor_params(f) | {a.name for a in f.allocs} | f.value_tensors
        for c in f.calls:
            nki_nodes.add(id(c.node))
            root = (c.qn or "").split(".")[0]
            if root not in _HOST:
                continue
            args = [*c.node.args, *(k.value for k in c.node.keywords)]
            if isinstance(c.node.func, ast.Attribute):
                args.append(c.node.func.value)
            hit = next((h for a in args if (h := _data_refs(a, tensors))), None)
            if hit:
                yield RULE.finding(f"`{c.qn}` computes on `{hit}` with {root} inside the kernel: host-side "
                                   f"work, not NeuronCore instructions", c.line, c.col,
                                   "express the computation with nisa/nl instructions on SBUF tiles")
    guarded = _main_guard_lines(model.tree)
    for node in walk(model.tree):
        if not isinstance(node, ast.Call) or id(node) in nki_nodes or node.lineno in guarded:
            continue
        qn = model.qualname(node.func) or ""
        root, _, rest = qn.partition(".")
        if root in _HOST and rest and rest not in _HARMLESS and not rest.startswith(("random.", "testing.")):
            if any(id(node) == id(c.node) for f in model.functions if f.is_kernel for c in f.calls):
                continue
            yield RULE.finding(f"`{qn}` runs on the host next to the kernel; the evaluated work must happen "
                               f"in the NKI kernel", node.lineno, node.col_offset + 1,
                               "move the computation into the kernel, or delete the host-side code",
                               severity="warning")


RULE = make_rule(__doc__, id="NKI042", name="host-array-compute", severity="error", category="integrity",
                 check=check)
