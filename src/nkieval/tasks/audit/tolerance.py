"""Criterion "Tolerances fit the op": the correctness tolerance (rtol, atol) against the numerics
standard's bound for the op, K and dtype, and against known wrong results.

* too loose: it admits a known wrong formula of reference.py's ``VARIANTS``, or (fp32 output) the
  reference rounded to bf16, or it is absurd (rtol >= 0.5);
* too tight: it rejects a result one unit in the last place of the output dtype from the reference
  where the numerics standard allows more than that (a correct kernel that rounds differently fails).

The numbers compared are the reference's outputs on the review's own cases and the standard's
largest allowed absolute error on each case (measured by the "reference" criterion).
"""

from __future__ import annotations

import numpy as np

from nkieval.tasks.audit.context import AuditContext
from nkieval.tasks.audit.model import CriterionAudit, Finding, level_of

#: rtol at or above this is no correctness check at all.
ABSURD_RTOL = 0.5


def _within(got: np.ndarray, ref: np.ndarray, rtol: float, atol: float) -> bool:
    g = np.asarray(got, np.float64)
    r = np.asarray(ref, np.float64)
    fin = np.isfinite(r)
    if not np.array_equal(np.isnan(g), np.isnan(r)):
        return False
    with np.errstate(invalid="ignore", over="ignore"):
        return bool(np.all(np.abs(g[fin] - r[fin]) <= atol + rtol * np.abs(r[fin])))


def _standard_admits(ctx: AuditContext, case: object, output: np.ndarray) -> bool | None:
    """Whether the numerics standard passes ``output`` as the first output on ``case`` (None: cannot judge)."""
    from nkieval.review.adapters import numerics_judge, numerics_prepare
    from nkieval.review.stages.judge import oracle_of
    from nkieval.tasks.inputs import is_random

    task = ctx.task
    oracle = oracle_of(task) if task.numerics.op == "reference" else None
    c = case
    try:
        pc, _ = numerics_prepare(task, c.inputs, c.family, is_random(c.family), oracle, c.dims)  # type: ignore[attr-defined]
        if pc is None:
            return None
        v, _ = numerics_judge(pc, output, diagnose=False)
    except Exception:  # reported by the reference criterion
        return None
    return None if v is None else v.get("status") != "fail"


def audit(ctx: AuditContext) -> CriterionAudit:
    import ml_dtypes

    from nkieval.sim.dtypes import to_dtype
    from nkieval.tasks.loader import load_reference_variants

    task = ctx.task
    fs: list[Finding] = []
    rtol, atol = task.rtol, task.atol
    if rtol >= ABSURD_RTOL:
        fs.append(Finding("tolerance", "error", "tolerance-absurd",
                          f"[correctness] rtol = {rtol:g}: any output within {100 * rtol:.0f}% of the reference is "
                          "correct", "a tolerance at the op's rounding error (the numerics standard's bound)",
                          "use rtol near the output dtype's epsilon times the error growth (docs/numerics.md)",
                          {"rtol": rtol}))
    cases = [c for c in ctx.all_cases() if c.outputs is not None]
    first = {c.label.split("/")[0]: c for c in cases}  # one family per shape keeps this cheap
    try:
        variants = load_reference_variants(task)
    except Exception:
        variants = []
    for v in variants:
        admitted, outs = [], {}
        for c in first.values():
            try:
                vo = np.asarray(v.fn(*[c.inputs[t.name] for t in task.inputs], **task.params))
            except Exception:
                continue
            ref = c.outputs[0]  # type: ignore[index]
            vo = vo.astype(to_dtype(task.outputs[0].dtype).storage) if vo.shape == ref.shape else vo
            if vo.shape == ref.shape and not np.array_equal(np.asarray(vo, np.float64), np.asarray(ref, np.float64)) \
                    and _within(vo, ref, rtol, atol):
                admitted.append(c.label)
                outs[c.label] = (c, vo)
        if admitted and len(admitted) == len(first):
            std = any(_standard_admits(ctx, c, vo) is False for c, vo in outs.values())
            fs.append(Finding("tolerance", "warning" if std else "error", "tolerance-admits-variant",
                              f"rtol={rtol:g}, atol={atol:g} accepts the known wrong formula VARIANTS[{v.id!r}] "
                              f"({v.cause}) on every shape"
                              + ("; the numerics standard rejects it" if std else ", and so does the numerics standard"),
                              "the tolerance rejects every known wrong formula",
                              "tighten [correctness] to the numerics standard's bound", {"variant": v.id}))
    out0 = task.outputs[0]
    bounds: dict[str, float] = ctx.notes.get("numeric_bounds", {})
    if out0.dtype == "float32" and str(task.numerics.recipe.get("output", "fp32")) in ("fp32", "float32"):
        adm = [c for c in first.values()
               if not _exact_bf16(c.outputs[0]) and  # type: ignore[index]
               _within(np.asarray(c.outputs[0]).astype(ml_dtypes.bfloat16), c.outputs[0], rtol, atol)]  # type: ignore[index]
        if adm and len(adm) == len(first):
            std = [_standard_admits(ctx, c, np.asarray(c.outputs[0]).astype(ml_dtypes.bfloat16)  # type: ignore[index]
                                    .astype(np.float32)) for c in adm]
            caught = any(x is False for x in std)
            fs.append(Finding("tolerance", "info" if caught else "warning", "tolerance-admits-bf16",
                              f"rtol={rtol:g}, atol={atol:g} accepts the reference rounded to bf16 on every shape, "
                              "though the recipe's output is fp32"
                              + ("; the numerics standard rejects it (the verdict needs both)" if caught else
                                 ", and the numerics standard does not reject it either"),
                              "an fp32-output task rejects a bf16 result (rtol below ~4e-3, or the standard does)",
                              "tighten rtol/atol to the fp32 recipe's bound", {"cases": [c.label for c in adm]}))
    # too tight: a result one ulp away, where the standard allows more than one ulp
    tight = []
    for c in first.values():
        ref = np.asarray(c.outputs[0])  # type: ignore[index]
        if ref.dtype.kind not in "f" and "float" not in str(ref.dtype) and "bfloat" not in str(ref.dtype):
            continue
        allowed = max((bounds.get(k, 0.0) for k in bounds if k.startswith(c.label.split("/")[0])), default=0.0)
        r64 = np.asarray(ref, np.float64)
        if _selects_inputs(r64, c.inputs):
            continue  # every output value is an input value (max, top-k, gather): exact is the right tolerance
        fin = np.isfinite(r64) & (r64 != 0)  # an exact zero stays zero (x - x); one ulp of it is a subnormal
        if not fin.any():
            continue
        bumped = np.nextafter(ref.astype(np.float32), np.float32(np.inf)) if ref.dtype == np.float32 else \
            (r64 * (1 + 2.0 ** -7)).astype(ref.dtype)
        bumped = np.where(fin, bumped, ref)
        step = np.abs(np.asarray(bumped, np.float64) - r64)
        if allowed > float(np.max(step[fin])) and not _within(bumped, ref, rtol, atol):
            tight.append((c.label, float(np.max(step[fin])), allowed))
    if tight:
        lab, step, allowed = tight[0]
        fs.append(Finding("tolerance", "warning", "tolerance-too-tight",
                          f"rtol={rtol:g}, atol={atol:g} rejects a result one ulp ({step:.3g}) from the reference on "
                          f"{lab}, where the numerics standard allows errors up to {allowed:.3g}",
                          "a correct kernel that rounds differently passes", "loosen [correctness] to the standard's "
                          "bound (or set it to 0 only for exact ops)", {"cases": [t[0] for t in tight]}))
    meas = {"rtol": rtol, "atol": atol, "standard_max_abs_err_allowed": bounds}
    n = sum(f.severity != "info" for f in fs)
    summary = "tolerance fits the standard's bound" if not n else "; ".join(sorted({f.rule for f in fs}))
    return CriterionAudit("tolerance", "Tolerances fit the op", 1.0, level_of(fs), summary, fs, meas)


def _selects_inputs(ref: np.ndarray, inputs: dict[str, np.ndarray]) -> bool:
    """Whether every output value occurs in some input (a selection: max, top-k, gather, copy)."""
    vals = np.concatenate([np.asarray(v, np.float64).ravel() for v in inputs.values()]) if inputs else np.zeros(0)
    r = ref[np.isfinite(ref)]
    return bool(r.size) and bool(np.isin(r, vals).all())


def _exact_bf16(x: np.ndarray) -> bool:
    import ml_dtypes

    a = np.asarray(x, np.float32)
    return bool(np.array_equal(a.astype(ml_dtypes.bfloat16).astype(np.float32), a, equal_nan=True))
