"""Diagnosis: name the likely cause of a failed check, with the numbers that support it.

Why executable signatures: a reviewer needs "bf16 accumulation instead of fp32", not "error
0.48 > 0.35". Three mechanisms, each cheap and run only on failure, on a slice of at most
2^14 output elements around the worst one:

1. **Defect models** (:data:`CANDIDATES`): re-run the op the way a known defect would (drop
   the last K tile, skip max-subtraction, one-pass variance, shift the mask by one, gelu for
   gelu_tanh, divide instead of multiply by the scale, ...). A model *matches* when it
   reproduces the kernel's output within the bound (or explains ≥ 75 % of the RMS error)
   while differing from the oracle, or reproduces its NaN/Inf positions.
2. **Precision fingerprint**: the z-score model evaluated under alternative recipes (TF32
   operands, bf16 accumulation, bf16 PSUM, FP8 fast accumulation, bf16 output, fast-math).
   The declared recipe makes the errors improbable (z ≫ 1); the alternative under which they
   look like a correct kernel's (z ≈ 1, inside its hard bound) names the precision used.
3. **Shape of the error**: a constant factor (wrong scale), all zeros, NaN produced or
   swallowed, the output lying on a coarser grid, and the location pattern (one column, the
   diagonal, period 128 = tile edge).

Mechanism 1 is :mod:`.diagnose_models`, mechanism 2 :mod:`.diagnose_fingerprint`, the slice they share
:mod:`.diagnose_sample`; mechanism 3 and the entry point are here.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from .bounds import RULES, RuleContext
from .diagnose_fingerprint import HYPOTHESES, _ctx_for, _fingerprint
from .diagnose_models import CANDIDATES, Candidate, _activation_candidates, _fl, _match
from .diagnose_sample import _SAMPLE, _WORK, _Sample
from .inputs import is_random_family
from .oracle import OpSpec, Prepared
from .recipe import PrecisionRecipe
from .verdict import Finding, Verdict

__all__ = ["CANDIDATES", "HYPOTHESES", "diagnose"]

_UNSET: Any = object()

#: Exceptions that make a variant (a reference.py formula) count as having no output.
_RAISED = (ValueError, TypeError, FloatingPointError, IndexError, ArithmeticError)

#: A score below this (the output grid explaining the whole error, or a model reproducing the
#: output with a residual under a tenth of the error) decides the diagnosis: the precision
#: fingerprint and the costly emulations are not run, and a hint counts as confirmed.
_DECISIVE = 0.11

#: Defect models that emulate an accumulation order step by step (the costly ones).
_COSTLY = frozenset({"bf16_accumulation", "bf16_psum"})


# --------------------------------------------------------------------------- entry point


def _slice(spec: OpSpec, prep: Prepared, arrays: list[np.ndarray], r0: int, r1: int) -> list[np.ndarray] | None:
    kind = spec.kind
    if spec.name == "matmul":
        a, b = arrays[0], arrays[1]
        if a.ndim == 2 and b.ndim == 2:
            return [a[r0:r1], b]
        return None
    if kind in ("unary", "quantize", "dequantize"):
        x = arrays[0].reshape(-1)[r0:r1]
        rest = []
        if len(arrays) > 1 and arrays[1] is not None and np.ndim(arrays[1]):
            rest = [np.broadcast_to(arrays[1], arrays[0].shape).reshape(-1)[r0:r1]]
        elif len(arrays) > 1 and arrays[1] is not None:
            rest = [arrays[1]]
        return [x, *rest]
    if kind in ("contraction", "scan", "softmax", "log_softmax", "layernorm", "rmsnorm"):
        x = np.asarray(arrays[0])
        axis = prep.params.get("axis", -1)
        if axis is None:
            rows = x.reshape(1, -1)
        else:
            rows = np.moveaxis(x, axis % max(x.ndim, 1), -1).reshape(-1, x.shape[axis] if x.ndim else 1)
        return [rows[r0:r1], *arrays[1:]]
    return None


def diagnose(**kw: Any) -> list[Finding]:
    """Likely causes of a failed verdict, best first (see the module docstring)."""
    with np.errstate(all="ignore"):
        return _diagnose(**kw)


def _diagnose(*, verdict: Verdict, spec: OpSpec, arrays: list[np.ndarray], params: dict[str, Any],
             recipe: PrecisionRecipe, prep: Prepared, actual: np.ndarray, ctx: RuleContext,
             stream_where: str = "", hint: str | None = None,
             variant_outputs: dict[str, np.ndarray | None] | None = None) -> list[Finding]:
    findings: list[tuple[float, Finding]] = []
    m = verdict.metrics
    r0, r1 = _sample_rows(verdict, spec, prep)
    row_len = max(prep.row_len, 1)
    ob = prep.evaluate(r0, r1)
    rule = RULES[spec.kind]
    bb = rule(ob, ctx)
    e0 = r0 * row_len
    got = actual.reshape(-1)[e0:e0 + ob.y.size].astype(np.float64)
    statistical = is_random_family(verdict.input_family)

    def tau_of(bnd: Any) -> np.ndarray:
        return bnd.tau_prb if statistical else bnd.tau_det

    s = _Sample(spec, arrays, _slice(spec, prep, arrays, r0, r1), params, recipe, ob.y, got, tau_of(bb),
                (r0, r1), prep)
    ctx_memo: dict[Any, tuple[float, bool]] = {}

    # model and variant findings by id: a hint that is not confirmed is tried again by the full search
    tried: dict[tuple[str, str], tuple[float, Finding] | None] = {}

    def model_finding(c: Candidate) -> tuple[float, Finding] | None:
        """2. a defect model"""
        key = ("model", c.id)
        if key in tried:
            return tried[key]
        try:
            v = c.run(s)
        except (ValueError, FloatingPointError, IndexError):
            v = None
        f = None if v is None else reproduces(v, c.id, c.cause, c.action, "re-running the op that way")
        tried[key] = f
        return f

    def reproduces(v: np.ndarray, fid: str, cause: str, action: str, how: str) -> tuple[float, Finding] | None:
        sc = _match(s, np.asarray(v, dtype=np.float64).ravel())
        if sc is None:
            return None
        return (0.01 + sc, Finding(fid, cause, f"{how} reproduces the kernel's output (residual {sc:.2g} of the "
                                   "error)", action))

    # The variants' float64 inputs, converted once for all of them (each conversion of the whole
    # inputs costs about as much as a cheap variant) and passed read-only; ``None``: the conversion
    # raised (every variant then has no output, as when each converted its own).
    shared: Any = _UNSET  # list of arrays, None, or not converted yet
    outputs = variant_outputs if variant_outputs is not None else {}

    def variant_output(var: Any) -> np.ndarray | None:
        nonlocal shared
        kw = {k: v for k, v in params.items() if k not in ("k", "multilinear")}
        if shared is _UNSET:
            try:
                conv = [np.asarray(a, dtype=np.float64) for a in arrays]
            except _RAISED:
                shared = None
            else:
                for a, c in zip(arrays, conv):
                    if c is not a:  # a conversion of ours (an input already float64 is passed as it is)
                        c.flags.writeable = False
                shared = conv
        if shared is None:
            return None
        try:
            return np.asarray(var.fn(*shared, **kw), dtype=np.float64)
        except ValueError:
            pass  # perhaps a write into a shared input: the formula gets inputs of its own, as it always did
        except _RAISED:
            return None
        try:
            return np.asarray(var.fn(*[np.asarray(a, dtype=np.float64) for a in arrays], **kw), dtype=np.float64)
        except _RAISED:
            return None

    def variant_finding(var: Any) -> tuple[float, Finding] | None:
        """2b. one of the op's own known wrong formulas (declared with the reference function)"""
        key = ("variant", var.id)
        if key in tried:
            return tried[key]
        # the formula on the whole inputs depends on nothing else: kept in ``variant_outputs`` when given
        full = outputs.get(var.id, _UNSET)
        if full is _UNSET:
            full = outputs[var.id] = variant_output(var)
        f = None
        if full is not None:
            try:
                v = _fl(full.reshape(-1)[e0:e0 + ob.y.size], s)
            except _RAISED:
                v = None
            if v is not None:
                f = reproduces(v, var.id, var.cause, var.action, "evaluating that formula")
        tried[key] = f
        return f

    models = (*CANDIDATES, *_activation_candidates(spec)) if s.sliced is not None else ()
    def tau_with(other: PrecisionRecipe) -> np.ndarray:
        return tau_of(rule(ob, _ctx_for(other, ctx, spec, arrays, ctx_memo)))

    grid = _grid_finding(m.output_grid, got, ob, recipe, tau_with)
    confirmed = None
    if hint is not None:
        # The cause named for an earlier failing case of the same output, tried first (lazily, in
        # the order of the full search): if it reproduces this output decisively, the search stops.
        tries = itertools.chain((grid,), (model_finding(c) for c in models if c.id == hint),
                                (variant_finding(v) for v in spec.variants if v.id == hint))
        confirmed = next((f for f in tries if f is not None and f[1].id == hint and f[0] < _DECISIVE), None)
    if confirmed is not None:
        findings.append(confirmed)
    else:
        if grid is not None:
            findings.append(grid)
        # The accumulation-order emulations (one fp32/bf16 step per K element) cost more than all the
        # other models together; they run last, and, like the precision fingerprint below, not at all
        # once the output is explained closely (the output grid accounts for the whole error, or a
        # model reproduces it with a residual under a tenth of the error). Findings keep the models'
        # declared order.
        found: dict[int, tuple[float, Finding]] = {}
        for k, c in enumerate(models):
            if c.id not in _COSTLY and (f := model_finding(c)) is not None:
                found[k] = f
        explained = any(sc < _DECISIVE for sc, _ in (*findings, *found.values()))
        if not explained:
            for k, c in enumerate(models):
                if c.id in _COSTLY and (f := model_finding(c)) is not None:
                    found[k] = f
        findings += [found[k] for k in sorted(found)]
        for var in spec.variants:
            f = variant_finding(var)
            if f is not None:
                findings.append(f)
    shared = _UNSET  # the variants are done: their float64 inputs are not held any longer
    # 3. precision fingerprint (redundant once a defect model reproduces the output closely)
    if not any(sc < _DECISIVE for sc, _ in findings):
        for sc, f in _fingerprint(s, ob, ctx, tau_of, bb, ctx_memo):
            findings.append((0.5 + sc, f))
    findings += _error_shape_findings(got, s.y, s.tau)
    findings += _metric_findings(m.nan_produced, m.nan_swallowed, stream_where or m.mismatch_where)
    return _best_first(findings)


def _sample_rows(verdict: Verdict, spec: OpSpec, prep: Prepared) -> tuple[int, int]:
    """The rows sampled for the diagnosis: a budget of rows around the worst element."""
    shape = verdict.shape
    if verdict.worst and shape:
        flat = int(np.ravel_multi_index(verdict.worst[0].index, shape))
    else:
        flat = 0
    row_len = max(prep.row_len, 1)
    n_rows = prep.n_rows
    budget = max(1, _SAMPLE // max(row_len, 1))
    if spec.name == "matmul" and prep.facts.get("K"):
        budget = max(1, min(budget, _WORK // max(1, prep.facts["K"] * prep.facts.get("N", 1))))
    rw = flat // row_len
    r0 = max(0, min(rw - budget // 2, n_rows - budget))
    return r0, min(n_rows, r0 + budget)


def _grid_finding(output_grid: str | None, got: np.ndarray, ob: Any, recipe: PrecisionRecipe,
                  tau_with: Any) -> tuple[float, Finding] | None:
    """1. output grid (decisive for a silent output downcast when rounding explains the error).
    ``tau_with(recipe)``: the sample's bound under another recipe."""
    if not output_grid:
        return None
    hid = f"{output_grid}_output" if output_grid in ("bf16", "fp16") else "output_downcast"
    explains = False
    try:
        tau = tau_with(recipe.replace(output=output_grid))
        fin_g = np.isfinite(got) & np.isfinite(ob.y)
        with np.errstate(all="ignore"):
            explains = bool(np.all(np.abs(got - ob.y)[fin_g] <= tau[fin_g]))
    except ValueError:
        pass
    ev = (f"every non-zero output is exactly representable in {output_grid}, while most correctly rounded "
          f"{recipe.output} results are not")
    if explains:
        return (0.0, Finding(hid, f"the output is rounded to {output_grid} where the recipe declares "
                             f"{recipe.output}", ev + f"; rounding the correct result to {output_grid} "
                             "explains the whole error",
                             f"write the {recipe.output} result, or declare output='{output_grid}'"))
    return (0.8, Finding("output_grid", f"the output lies on the {output_grid} grid", ev + "; but "
                         "the errors are larger than that rounding alone makes",
                         "look for lower-precision accumulation or intermediates"))


def _error_shape_findings(got: np.ndarray, y_all: np.ndarray, tau_all: np.ndarray) -> list[tuple[float, Finding]]:
    """4. the shape of the error on the sample: all zeros, or a constant factor."""
    findings: list[tuple[float, Finding]] = []
    fin = np.isfinite(got) & np.isfinite(y_all)
    if not fin.any():
        return findings
    g, y = got[fin], y_all[fin]
    err = float(np.sqrt(np.mean((g - y) ** 2)))
    if np.all(g == 0) and np.any(y != 0):
        findings.append((0.05, Finding("zeros", "the kernel returns zeros", f"all {g.size} sampled outputs are 0",
                                       "check that the result is written back to the output")))
    yy = float(np.dot(y, y))
    if yy > 0 and err > 0:
        c = float(np.dot(g, y) / yy)
        res = float(np.sqrt(np.mean((g - c * y) ** 2)))
        tau_rms = float(np.sqrt(np.mean(tau_all[fin] ** 2)))
        if abs(c - 1) > 1e-3 and res <= max(0.1 * err, tau_rms) and c != 0:
            what = f"the output is off by a constant factor {c:.6g}"
            if abs(c - 1) < 0.05:
                what += " (a wrong scale, or a biased/truncating accumulation)"
            findings.append((0.2, Finding("constant_factor", what,
                                          f"got ≈ {c:.6g}·expected with residual {res:.3g} vs error {err:.3g}",
                                          "check scale factors (dequantisation scale, 1/N, temperature)")))
    return findings


def _metric_findings(nan_produced: int, nan_swallowed: int, where: str) -> list[tuple[float, Finding]]:
    """NaN produced or swallowed, and where the mismatches lie (tile edges, last tile, rows/columns)."""
    findings: list[tuple[float, Finding]] = []
    if nan_produced:
        findings.append((0.9, Finding("nan_produced", "the kernel produces NaN where the oracle is finite",
                                      f"{nan_produced} elements", "look for inf−inf, 0·inf, exp overflow or 0/0 in "
                                      "intermediates")))
    if nan_swallowed:
        findings.append((0.9, Finding("nan_swallowed", "NaN from the inputs is dropped instead of propagated",
                                      f"{nan_swallowed} elements where IEEE propagation gives NaN come out finite",
                                      "do not mask or max NaN away unless the op's contract says so")))
    if "tile-edge" in where:
        findings.append((0.3, Finding("tile_edge", "a tile-edge bug", where, "run the integers (exact) suite and "
                                      "check tile boundaries")))
    elif "last partial" in where:
        findings.append((0.3, Finding("last_tile", "the last partial tile is handled wrongly", where,
                                      "check the remainder tile (size not a multiple of 128)")))
    elif any(w in where for w in ("column", "row(s)", "diagonal")):
        findings.append((1.0, Finding("localized", "a localised error, not a precision problem", where,
                                      "look for an indexing or masking bug at those positions")))
    return findings


def _best_first(findings: list[tuple[float, Finding]]) -> list[Finding]:
    """The findings by score, best first, one per id (the best-scored)."""
    seen: set[str] = set()
    out: list[Finding] = []
    for _, f in sorted(findings, key=lambda t: t[0]):
        if f.id in seen:
            continue
        seen.add(f.id)
        out.append(f)
    return out
