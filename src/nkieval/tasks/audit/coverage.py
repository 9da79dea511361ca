"""Criterion "Coverage": hidden shapes with ragged, multi-tile and degenerate sizes; input families that
reach the op's hazards."""

from __future__ import annotations

from nkieval.hardware import all_targets
from nkieval.tasks.audit.model import CriterionAudit, Finding, level_of
from nkieval.tasks.schema import Task

#: the partition count (one tile's rows) on every generation a task may declare
P = min(t.partitions for t in all_targets().values())

#: numerics op (or tag) -> (family, hazard) the task should include.
HAZARDS: dict[str, tuple[tuple[str, ...], str]] = {
    "softmax": (("large",), "large logits (overflow without max-subtraction)"),
    "log_softmax": (("large",), "large logits (overflow without max-subtraction)"),
    "layernorm": (("offset",), "a large mean (cancellation in one-pass variance)"),
    "rmsnorm": (("offset", "large", "heavy_tailed"), "large magnitudes in the sum of squares"),
    "sum": (("offset", "uniform", "heavy_tailed"), "one-signed or heavy-tailed terms in a long reduction"),
    "cumsum": (("offset", "uniform", "heavy_tailed"), "one-signed or heavy-tailed terms in a long scan"),
    "matmul": (("uniform", "heavy_tailed", "offset", "large"), "one-signed or heavy-tailed terms in a long "
               "contraction"),
}
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


def audit(task: Task) -> CriterionAudit:
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
        if not have & set(fams):
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
