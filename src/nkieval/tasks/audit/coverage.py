"""Criterion "Coverage": hidden shapes with ragged, multi-tile and degenerate sizes; input families that
reach the op's hazards."""

from __future__ import annotations

from nkieval.hardware import all_targets
from nkieval.tasks.audit.context import AuditContext
from nkieval.tasks.audit.model import CriterionAudit, Finding, level_of
from nkieval.tasks.schema import Task

#: the partition count (one tile's rows) on every generation a task may declare
P = min(t.partitions for t in all_targets().values())

#: numerics op (or tag) -> (family, hazard) the task should include. Any listed family reaches the hazard: for a
#: softmax, "large" (N(0, 1) x 40) and "offset" (100 + N(0, 1)) both put logits past exp's fp32 range (~88.7), so
#: a kernel without max-subtraction overflows; "offset" does it while the logits' differences stay O(1), which
#: suits ops whose result is sensitive to the spread between logits (top-k selection, renormalised weights).
_SOFTMAX_HAZARD = (("large", "offset", "far_offset"), "logits beyond exp's fp32 range (overflow without max-subtraction)")
HAZARDS: dict[str, tuple[tuple[str, ...], str]] = {
    "softmax": _SOFTMAX_HAZARD,
    "log_softmax": _SOFTMAX_HAZARD,
    "layernorm": (("offset",), "a large mean (cancellation in one-pass variance)"),
    "rmsnorm": (("offset", "large", "heavy_tailed"), "large magnitudes in the sum of squares"),
    "sum": (("offset", "uniform", "heavy_tailed"), "one-signed or heavy-tailed terms in a long reduction"),
    "cumsum": (("offset", "uniform", "heavy_tailed"), "one-signed or heavy-tailed terms in a long scan"),
    "matmul": (("uniform", "heavy_tailed", "offset", "large"), "one-signed or heavy-tailed terms in a long "
               "contraction"),
}
#: hazard -> the id of the known wrong formula (reference.py VARIANTS) that the hazard breaks. When the task
#: declares it and it overflows on some case of the task's own families, those families already reach the hazard
#: (an attention softmax over scores q . k of projected activations: its logits run to hundreds on N(0, 1) data,
#: while a "large" family scales them by 40^4 and leaves the fp32 result ill-conditioned).
HAZARD_VARIANTS = {"softmax": "no_max_subtraction", "log_softmax": "no_max_subtraction"}
_TAG_HAZARDS = {"softmax": "softmax", "norm": "layernorm", "layernorm": "layernorm",
                "reduction": "sum", "gemm": "matmul", "matmul": "matmul", "scan": "cumsum"}


def hazard_of(task: Task) -> str | None:
    """The op's hazard class: the numerics op, else a tag, else a softmax the statement asks for."""
    import re

    if task.numerics.op in HAZARDS:
        return task.numerics.op
    for t in task.tags:
        if t in _TAG_HAZARDS:
            return _TAG_HAZARDS[t]
    low = task.statement.lower()
    if any(not re.search(r"\b(no|not|without)\b[^.;]{0,20}$", low[max(0, m.start() - 30):m.start()])
           for m in re.finditer(r"\bsoftmax\b", low)):
        return "softmax"
    return None


def _multi_tile(task: Task, dims: dict[str, int]) -> bool:
    """Some dimension exceeds a tile, or some tensor has more than 128 rows viewed as [rows, last dim]."""
    import math

    if max(dims.values()) > P:
        return True
    return any(math.prod(t.concrete(dims)[:-1]) > P for t in (*task.inputs, *task.outputs))


def _variant_reaches(ctx: AuditContext, hazard: str) -> str | None:
    """The label of a case of the task's own families on which the hazard's known wrong formula is non-finite."""
    import numpy as np

    from nkieval.tasks.loader import load_reference_variants

    vid = HAZARD_VARIANTS.get(hazard)
    try:
        fn = next((v.fn for v in load_reference_variants(ctx.task) if v.id == vid), None) if vid else None
        if fn is None:
            return None
        for c in ctx.all_cases():
            with np.errstate(all="ignore"):
                out = np.asarray(fn(*[c.inputs[t.name] for t in ctx.task.inputs], **ctx.task.params), np.float64)
            if not np.isfinite(out).all():
                return c.label
    except Exception:  # the task author's code: Well-formed and Reference name its errors
        return None
    return None


def audit(task: Task, ctx: AuditContext | None = None) -> CriterionAudit:
    fs: list[Finding] = []
    hidden = task.hidden_shapes
    dims = sorted({d for s in task.shapes for d in s.dims})
    varying = [d for d in dims if len({s.dims[d] for s in task.shapes}) > 1]
    ragged = [d for d in varying if any(s.dims[d] % P for s in hidden)]
    if varying and not ragged:
        fs.append(Finding("coverage", "error", "no-ragged-shape",
                          f"every hidden value of {', '.join(varying)} is a multiple of {P}",
                          "a hidden size that is not a multiple of 128 (the tail every kernel must handle)",
                          f"add a hidden shape with a ragged {varying[0]} (e.g. {varying[0]} = 300)"))
    if not any(_multi_tile(task, dict(s.dims)) for s in hidden):
        fs.append(Finding("coverage", "error", "no-multi-tile-shape",
                          f"no hidden shape has a dimension above {P} or a tensor of more than {P} rows (every hidden "
                          "case fits one tile)",
                          "a hidden shape that needs more than one tile", "add a hidden shape with a dimension > 128"))
    small = [s for s in hidden if min(s.dims.values()) <= 8]
    if varying and not small:
        fs.append(Finding("coverage", "warning", "no-degenerate-shape",
                          f"no hidden shape has a dimension of 8 or less (smallest hidden dimension "
                          f"{min(min(s.dims.values()) for s in hidden)})",
                          "a degenerate size where the op allows one (1 row, a few columns)",
                          "add a hidden shape with a dimension of 1 (or the op's minimum) if the statement allows it"))
    pub = {tuple(sorted(s.dims.items())) for s in task.public_shapes}
    if all(tuple(sorted(s.dims.items())) in pub for s in hidden):
        fs.append(Finding("coverage", "error", "hidden-equals-public",
                          "every hidden shape is also a public shape", "hidden shapes the author has not seen",
                          "add hidden shapes that differ from the public ones"))
    hz = hazard_of(task)
    if hz is not None:
        fams, what = HAZARDS[hz]
        have = set(task.families) | {t.family for t in task.inputs if t.family}
        reached = _variant_reaches(ctx, hz) if ctx is not None and not have & set(fams) else None
        if reached:
            fs.append(Finding("coverage", "info", "hazard-reached-by-variant",
                              f"no {', '.join(fams)} family, but the known wrong formula "
                              f"VARIANTS[{HAZARD_VARIANTS[hz]!r}] is non-finite on {reached}: the task's own families "
                              f"reach {what}", f"one of the families {', '.join(fams)}, or a case that reaches the hazard",
                              "none", {"hazard": hz, "case": reached}))
        elif not have & set(fams):
            fs.append(Finding("coverage", "warning", "hazard-family-missing",
                              f"a {hz} task, but no input family reaches {what} (families: "
                              f"{', '.join(task.families)})", f"one of the families {', '.join(fams)}",
                              f"add \"{fams[0]}\" to [inputs] families", {"hazard": hz}))
    if len(task.families) == 1 and task.families[0] != "integers":
        fs.append(Finding("coverage", "info", "single-family",
                          f"one input family ({task.families[0]})", "families for typical and hazardous inputs",
                          "consider adding \"integers\" (bitwise comparisons) or a hazard family"))
    n = sum(f.severity != "info" for f in fs)
    summary = (f"{len(hidden)} hidden shapes (ragged in {', '.join(ragged) or '-'}), "
               f"{len(task.families)} families" + (f"; {n} finding(s)" if n else ""))
    return CriterionAudit("coverage", "Coverage", 1.0, level_of(fs), summary, fs,
                          {"ragged_dims": ragged, "hazard": hz})
