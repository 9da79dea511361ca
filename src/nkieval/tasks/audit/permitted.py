"""Mutants the task's precision recipe permits: a ``dtype_downgrade`` of an operand's tile to the recipe's
compute dtype, whose error the numerics standard's bound for that recipe admits on every case.

A recipe with ``compute = "bf16"`` declares that the engines may consume the op's operands in bf16 (the
numerics standard adds one bf16 rounding per operand to its bound, :class:`nkieval.numerics.recipe.
PrecisionRecipe`). A mutant that only keeps one operand's tile, loaded from the kernel's input as it is, in
that dtype is then a kernel the task's own precision contract accepts: no shape, family or tolerance *should*
kill it, and one that did would reject correct kernels (the Tolerances criterion's "too tight"). Such a
survivor is listed on its own, "permitted by the recipe", never dropped, and never counted as killed.

Anything else stays a survivor: a downgrade of a value computed on chip (a normaliser, a running maximum),
of an accumulator (a PSUM tile: the recipe's ``accumulate``), of an output (an HBM tensor: ``output``), a
downgrade under a recipe that declares no coarser compute dtype, one of an operand already stored in that
dtype, and any mutant on some case of which the numerics standard did not judge or judged the error above
its bound.
"""

from __future__ import annotations

import ast
from typing import Any

from nkieval.numerics.formats import get_format
from nkieval.tasks.schema import Task

#: the dtype the ``dtype_downgrade`` operator writes (:mod:`nkieval.tasks.audit.mutate`)
DOWNGRADE_DTYPE = "bfloat16"
_ALLOCATORS = {"ndarray", "zeros", "empty", "full"}
_LOADS = {"dma_copy"}  # the instructions that copy an HBM input into a tile unchanged
_STORE_KEYWORDS = ("dst", "out")


def _root(e: ast.expr) -> str | None:
    """The variable an expression views: ``gamma[k0:k0 + kw].reshape((kw, 1))`` -> ``gamma``."""
    while True:
        if isinstance(e, ast.Subscript | ast.Attribute):
            e = e.value
        elif isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute):
            e = e.func.value
        elif isinstance(e, ast.Name):
            return e.id
        else:
            return None


def _name(f: ast.expr) -> str:
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _kw(call: ast.Call, key: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == key), None)


def _parents(tree: ast.AST) -> dict[int, ast.AST]:
    return {id(c): p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}


def loaded_operand(tree: ast.AST, node: ast.AST) -> str | None:
    """The kernel input whose tile the dtype ``node`` declares, when that tile only ever holds the input as
    loaded: ``t = nl.ndarray(..., dtype=<node>, buffer=nl.sbuf)`` written by ``dma_copy`` from a parameter of
    the enclosing kernel and by nothing else, or ``t = nl.load(param[...], dtype=<node>)``. None for every other
    value (an accumulator, an output, a tile computed on chip, a dtype passed to an instruction)."""
    up = _parents(tree)
    kw, call, assign = up.get(id(node)), None, None
    if isinstance(kw, ast.keyword) and kw.arg == "dtype":
        call = up.get(id(kw))
        assign = up.get(id(call))
    if not (isinstance(call, ast.Call) and isinstance(assign, ast.Assign) and len(assign.targets) == 1
            and isinstance(assign.targets[0], ast.Name)):
        return None
    tile = assign.targets[0].id
    fn = assign
    while fn is not None and not isinstance(fn, ast.FunctionDef):
        fn = up.get(id(fn))
    if fn is None:
        return None
    params = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}
    sources: set[str | None] = set()
    if _name(call.func) == "load" and call.args:
        sources.add(_root(call.args[0]))
    elif _name(call.func) in _ALLOCATORS:
        buffer = _kw(call, "buffer")
        if buffer is None or _name(buffer) != "sbuf":
            return None  # PSUM (an accumulator), HBM (an output) or no buffer named: not an operand's tile
    else:
        return None
    for n in ast.walk(fn):
        if isinstance(n, ast.Call):
            dst = next((_kw(n, k) for k in _STORE_KEYWORDS if _kw(n, k) is not None), None)
            if dst is not None and _root(dst) == tile:
                src = _kw(n, "src")
                sources.add(_root(src) if _name(n.func) in _LOADS and src is not None else None)
        elif isinstance(n, ast.Assign | ast.AugAssign) and n is not assign:
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            if any(_root(t) == tile for t in targets):
                sources.add(None)  # rebound or written in place: no longer the input as loaded
    if len(sources) != 1:
        return None
    (src,) = sources
    return src if src in params else None


def _fmt(dtype: str | None) -> str | None:
    try:
        return get_format(dtype).name if dtype else None
    except ValueError:
        return None


def permitted_by_recipe(task: Task, operand: str | None, kind: str, margins: dict[str, Any]) -> str | None:
    """Why the recipe permits a surviving mutant (a sentence), or None when it does not.

    ``operand``: the kernel input whose loaded tile the mutant downgrades (:func:`loaded_operand`);
    ``margins``: per case, the numerics standard's largest error/bound of the mutant's first output (None
    where it did not judge the case)."""
    if kind != "dtype_downgrade" or operand is None:
        return None
    compute = _fmt(task.numerics.recipe.get("compute"))
    if compute is None or compute != _fmt(DOWNGRADE_DTYPE):
        return None  # the recipe declares no coarser compute dtype: the downgrade is a precision loss
    stored = next((s.dtype for s in task.inputs if s.name == operand), None)
    if stored is None or _fmt(stored) == compute or get_format(stored).p <= get_format(compute).p:
        return None  # not an input of the signature, or already stored in (or below) the compute dtype
    judged = [m for m in margins.values() if isinstance(m, int | float)]
    if not margins or len(judged) != len(margins) or max(judged) > 1.0:
        return None  # the numerics standard did not judge every case, or judged an error above its bound
    return (f"it consumes the input `{operand}` ({stored}) in {compute}, the recipe's compute dtype, and on every "
            f"case its error is within the numerics standard's bound for that recipe (largest error/bound "
            f"{max(judged):.2f})")
