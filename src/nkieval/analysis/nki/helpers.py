"""Small predicates over the source model shared by several NKI rules (DMA, matmul, HBM tensors)."""

from __future__ import annotations

import ast

from nkieval.analysis.nki.model import CallSite, FunctionModel, base_name, walk

DMA_LOADS = {"nisa.dma_copy", "nl.load", "nl.load_transpose2d", "nisa.dma_transpose"}
DMA_ALL = DMA_LOADS | {"nl.store", "nisa.dma_compute"}
MATMULS = {"nisa.nc_matmul", "nl.matmul"}
HBM_BUFFERS = {"hbm", "shared_hbm", "private_hbm"}


def hbm_names(f: FunctionModel) -> set[str]:
    """Kernel parameters (inputs live in HBM) and tensors allocated in an HBM buffer."""
    return set(f.params) | {a.name for a in f.allocs if a.buffer in HBM_BUFFERS}


def dma_src(c: CallSite) -> ast.expr | None:
    """Source operand of a DMA call (None for stores' value or unknown calls)."""
    if c.qn in ("nisa.dma_copy", "nisa.dma_transpose"):
        return c.arg("src", 1)
    if c.qn in ("nl.load", "nl.load_transpose2d"):
        return c.arg("src", 0)
    if c.qn == "nl.store":
        return c.arg("value", 1)
    return None


def dma_dst(c: CallSite) -> ast.expr | None:
    if c.qn in ("nisa.dma_copy", "nisa.dma_transpose", "nisa.dma_compute"):
        return c.arg("dst", 0)
    if c.qn == "nl.store":
        return c.arg("dst", 0)
    return None


def is_hbm_load(f: FunctionModel, c: CallSite) -> bool:
    """A DMA that reads from an HBM tensor."""
    if c.qn not in DMA_LOADS:
        return False
    return base_name(dma_src(c)) in hbm_names(f)


def matmul_operands(c: CallSite) -> list[ast.expr]:
    if c.qn == "nisa.nc_matmul":
        return [a for a in (c.arg("stationary", 1), c.arg("moving", 2)) if a is not None]
    if c.qn == "nl.matmul":
        return [a for a in (c.arg("x", 0), c.arg("y", 1)) if a is not None]
    return []


def matmul_results(c: CallSite) -> set[str]:
    """Names holding the matmul's result (its dst, or what the value form is assigned to)."""
    out = set(c.assigned_to)
    if c.qn == "nisa.nc_matmul":
        b = base_name(c.arg("dst", 0))
        if b:
            out.add(b)
    return out


def op_name(f_model_qualname: str | None) -> str | None:
    """``nl.add`` → ``add`` (the ALU/activation operator of an ``op=`` argument)."""
    if f_model_qualname and f_model_qualname.startswith(("nl.", "np.")):
        return f_model_qualname.split(".", 1)[1]
    return None


def is_unit_slice(node: ast.AST) -> bool:
    """``i:i+1`` (a slice one element wide) or a plain index expression that is not a slice."""
    if isinstance(node, ast.Slice):
        if node.lower is None or node.upper is None:
            return False
        up = node.upper
        return (isinstance(up, ast.BinOp) and isinstance(up.op, ast.Add) and isinstance(up.right, ast.Constant)
                and up.right.value == 1 and ast.dump(up.left) == ast.dump(node.lower))
    return not isinstance(node, ast.Slice)


def subscript_indices(node: ast.AST | None) -> list[ast.AST]:
    """The per-dimension index expressions of ``t[a, b:c]`` (empty when not subscripted)."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        node = node.func.value
    if not isinstance(node, ast.Subscript):
        return []
    sl = node.slice
    return list(sl.elts) if isinstance(sl, ast.Tuple) else [sl]


def tensor_params(f: FunctionModel) -> set[str]:
    """Parameters used as tensors: subscripted, asked for ``.shape``/``.dtype``, or passed to nl/nisa."""
    out: set[str] = set()
    params = set(f.params)
    for acc in f.accesses:
        if acc.name in params and acc.kind == "meta":
            out.add(acc.name)
    for node in walk(f.node):
        if isinstance(node, ast.Subscript):
            b = base_name(node)
            if b in params:
                out.add(b)
    for c in f.calls:
        if c.qn and c.qn.split(".")[0] in ("nl", "nisa"):
            for a in [*c.node.args, *(k.value for k in c.node.keywords)]:
                b = base_name(a)
                if b in params:
                    out.add(b)
    return out


def fact_value(target: object, name: str) -> object | None:
    """A hardware fact's value, or None when the target file does not define it."""
    try:
        return target.fact(name).value  # type: ignore[attr-defined]
    except (KeyError, AttributeError, ValueError):
        return None


def loop_label(loop: object) -> str:
    """``nl.affine_range loop at line 12`` — how findings name a loop."""
    kind = getattr(loop, "kind", "other")
    prefix = "range" if kind == "range" else f"nl.{kind}" if kind != "other" else "for"
    return f"{prefix} loop at line {getattr(loop, 'line', 0)}"
