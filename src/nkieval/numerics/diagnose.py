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
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .bounds import RULES, RuleContext
from .formats import Format, format_of, get_format, round_to
from .inputs import is_random_family
from .oracle import ACTIVATIONS, OpSpec, Prepared, exact_in
from .recipe import PrecisionRecipe
from .verdict import Finding, Verdict

__all__ = ["CANDIDATES", "HYPOTHESES", "diagnose"]

_SAMPLE = 1 << 14
_WORK = 1 << 22


@dataclass
class _Sample:
    """The slice of the problem diagnosis works on."""

    spec: OpSpec
    arrays: list[np.ndarray]
    sliced: list[np.ndarray] | None
    params: dict[str, Any]
    recipe: PrecisionRecipe
    y: np.ndarray
    got: np.ndarray
    tau: np.ndarray
    rows: tuple[int, int]
    prep: Prepared
    #: values derived from the sample alone, computed once for all the models that use them
    memo: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def out(self) -> str:
        return self.recipe.output

    def match_base(self) -> dict[str, Any]:
        """The candidate-independent part of :func:`_match`, computed once per sample."""
        if "match" not in self.memo:
            got, y = self.got, self.y
            with np.errstate(all="ignore"):
                g_sp = ~np.isfinite(got)
                y_sp = ~np.isfinite(round_to(y, self.recipe.out_format, overflow=self.recipe.overflow))
                gy_sp = g_sp | y_sp
                fin = ~gy_sp
                abs_err = np.abs(got - y)
                # every element compared (the common case): no masked copies
                fin_all = bool(fin.all())
                err = abs_err if fin_all else abs_err[fin]
            self.memo["match"] = {"gy_sp": gy_sp, "fin": None if fin_all else fin, "abs_err": abs_err,
                                  "err": err, "e": _rms(err), "tau_f": self.tau if fin_all else self.tau[fin],
                                  "g_rms": _rms(got if fin_all else got[fin]),
                                  "special_fail": bool(np.any(g_sp != y_sp))}
        return self.memo["match"]


# --------------------------------------------------------------------------- defect models


def _fl(v: np.ndarray, s: _Sample) -> np.ndarray:
    with np.errstate(all="ignore"):
        return round_to(np.asarray(v, dtype=np.float64), s.recipe.out_format, overflow=s.recipe.overflow).ravel()


def _mm(a: np.ndarray, b: np.ndarray, s: _Sample) -> np.ndarray:
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    sa, sb = s.params.get("scale_a"), s.params.get("scale_b")
    r0, r1 = s.rows
    if sa is not None:
        sa = np.asarray(sa, dtype=np.float64)
        a64 = a64 * (sa if sa.ndim == 0 else sa.reshape(-1)[r0:r1, None])
    if sb is not None:
        sb = np.asarray(sb, dtype=np.float64)
        b64 = b64 * (sb if sb.ndim == 0 else sb.reshape(-1)[None, :])
    with np.errstate(all="ignore"):
        return a64 @ b64


def _is_matmul2d(s: _Sample) -> bool:
    return s.spec.name == "matmul" and s.sliced is not None and s.sliced[0].ndim == 2 and s.sliced[1].ndim == 2


def _k_drop(s: _Sample, which: str) -> np.ndarray | None:
    t = s.recipe.tile_k
    if _is_matmul2d(s):
        a, b = s.sliced  # type: ignore[misc]
        k = a.shape[1]
        if which == "last_tile" and k > t:
            kl = ((k - 1) // t) * t
            return _fl(_mm(a[:, :kl], b[:kl], s), s)
        if which == "first_tile" and k > t:
            return _fl(_mm(a[:, t:], b[t:], s), s)
        if which == "last_one" and k > 1:
            return _fl(_mm(a[:, :-1], b[:-1], s), s)
        return None
    if s.spec.name in ("sum", "mean") and s.sliced is not None:
        x = s.sliced[0].astype(np.float64)
        k = x.shape[-1]
        div = k if s.spec.name == "mean" else 1
        if which == "last_tile" and k > t:
            return _fl(x[:, : ((k - 1) // t) * t].sum(-1) / div, s)
        if which == "first_tile" and k > t:
            return _fl(x[:, t:].sum(-1) / div, s)
        if which == "last_one" and k > 1:
            return _fl(x[:, :-1].sum(-1) / div, s)
    return None


def _transposed(s: _Sample) -> np.ndarray | None:
    if _is_matmul2d(s):
        a, b = s.sliced  # type: ignore[misc]
        if b.shape[0] == b.shape[1]:
            return _fl(_mm(a, b.T, s), s)
    return None


def _emul_acc(s: _Sample, **kw: Any) -> np.ndarray | None:
    from .platforms import emulate_matmul, emulate_sum

    if _is_matmul2d(s):
        a, b = s.sliced  # type: ignore[misc]
        if a.shape[0] * b.shape[0] * b.shape[1] > _WORK or s.params.get("scale_a") is not None:
            return None
        return emulate_matmul(a, b, out=s.out, **kw).ravel()
    if s.spec.name == "sum" and s.sliced is not None:
        x = s.sliced[0]
        if x.size > _WORK:
            return None
        return emulate_sum(x, out=s.out, **kw).ravel()
    return None


def _rounded_inputs(s: _Sample, fmt: str) -> np.ndarray | None:
    f = get_format(fmt)
    if _is_matmul2d(s):
        a, b = s.sliced  # type: ignore[misc]
        if min(format_of(a).p, format_of(b).p) <= f.p:
            return None
        if f.name == "tf32":
            from .formats import round_mantissa

            ar = round_mantissa(a.astype(np.float32), 10).astype(np.float64)
            br = round_mantissa(b.astype(np.float32), 10).astype(np.float64)
        else:
            ar, br = round_to(a, f), round_to(b, f)
        return _fl(_mm(ar, br, s), s)
    return None


def _output_as(s: _Sample, fmt: str) -> np.ndarray | None:
    f = get_format(fmt)
    if s.recipe.out_format.kind != "float" or s.recipe.out_format.p <= f.p:
        return None
    return round_to(s.y, f)


def _row_x(s: _Sample) -> np.ndarray | None:
    """The sampled rows of the first operand in float64 (converted once per sample; read-only:
    the models that read it build new arrays)."""
    if s.sliced is None:
        return None
    x = s.memo.get("row_x")
    if x is None:
        x = s.memo["row_x"] = s.sliced[0].astype(np.float64)
        x.flags.writeable = False
    return x


def _mask_rows(s: _Sample) -> np.ndarray | None:
    m = s.params.get("mask")
    if m is None:
        return None
    x = np.asarray(s.arrays[0])
    mk = np.broadcast_to(np.asarray(m, dtype=bool), x.shape)
    mk = np.moveaxis(mk, s.prep.facts.get("axis", -1), -1).reshape(-1, x.shape[s.prep.facts.get("axis", -1)])
    return mk[s.rows[0]:s.rows[1]]


def _softmax64(x: np.ndarray, keep: np.ndarray | None, log: bool) -> np.ndarray:
    with np.errstate(all="ignore"):
        xm = x if keep is None else np.where(keep, x, -np.inf)
        m = xm.max(-1, keepdims=True)
        e = np.exp(xm - m)
        z = e.sum(-1, keepdims=True)
        return (xm - m - np.log(z)) if log else e / z


def _softmax_no_max(s: _Sample) -> np.ndarray | None:
    x = _row_x(s)
    if x is None or s.spec.kind not in ("softmax", "log_softmax") or not s.recipe.max_subtraction:
        return None
    keep = _mask_rows(s)
    x32 = x.astype(np.float32)
    with np.errstate(all="ignore"):
        e = np.exp(x32)
        if keep is not None:
            e = np.where(keep, e, np.float32(0))
        z = e.sum(-1, keepdims=True, dtype=np.float32)
        y = np.log(e / z) if s.spec.kind == "log_softmax" else e / z
    return _fl(y.astype(np.float64), s)


def _softmax_mask_shift(s: _Sample, shift: int) -> np.ndarray | None:
    x = _row_x(s)
    keep = _mask_rows(s)
    if x is None or keep is None:
        return None
    k2 = np.zeros_like(keep)
    if shift > 0:
        k2[:, shift:] = keep[:, :-shift]
        k2[:, :shift] = keep[:, :1]
    else:
        k2[:, :shift] = keep[:, -shift:]
        k2[:, shift:] = keep[:, -1:]
    return _fl(_softmax64(x, k2, s.spec.kind == "log_softmax"), s)


def _softmax_mask_ignored(s: _Sample) -> np.ndarray | None:
    x = _row_x(s)
    if x is None or _mask_rows(s) is None:
        return None
    return _fl(_softmax64(x, None, s.spec.kind == "log_softmax"), s)


def _softmax_lowp_sub(s: _Sample) -> np.ndarray | None:
    x = _row_x(s)
    if x is None or s.spec.kind != "softmax":
        return None
    keep = _mask_rows(s)
    with np.errstate(all="ignore"):
        xm = x if keep is None else np.where(keep, x, -np.inf)
        d = round_to(xm - xm.max(-1, keepdims=True), "bf16")
        e = np.exp(d)
        y = e / e.sum(-1, keepdims=True)
    return _fl(y, s)


def _ln_variant(s: _Sample, which: str) -> np.ndarray | None:
    x = _row_x(s)
    if x is None or s.spec.kind not in ("layernorm", "rmsnorm"):
        return None
    n = x.shape[-1]
    eps = float(s.params.get("eps", 1e-5))
    g = s.arrays[1] if len(s.arrays) > 1 and s.arrays[1] is not None else s.params.get("gamma")
    b = s.arrays[2] if len(s.arrays) > 2 and s.arrays[2] is not None else s.params.get("beta")
    g = 1.0 if g is None else np.asarray(g, dtype=np.float64)
    b = 0.0 if b is None else np.asarray(b, dtype=np.float64)
    with np.errstate(all="ignore"):
        if s.spec.kind == "rmsnorm":
            if which == "mean_subtracted":
                mu = x.mean(-1, keepdims=True)
                v = ((x - mu) ** 2).mean(-1, keepdims=True)
                return _fl((x - mu) / np.sqrt(v + eps) * g, s)
            if which == "eps_missing":
                return _fl(x / np.sqrt((x * x).mean(-1, keepdims=True)) * g, s)
            return None
        if which == "one_pass":
            if s.recipe.variance == "one_pass":
                return None
            x32 = x.astype(np.float32)
            mu = x32.mean(-1, keepdims=True, dtype=np.float32)
            ms = (x32 * x32).mean(-1, keepdims=True, dtype=np.float32)
            var = np.maximum(ms - mu * mu, np.float32(0))
            y = (x32 - mu) / np.sqrt(var + np.float32(eps))
            return _fl(y.astype(np.float64) * g + b, s)
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        if which == "unbiased":
            var = var * n / max(n - 1, 1)
            return _fl((x - mu) / np.sqrt(var + eps) * g + b, s)
        if which == "eps_missing":
            return _fl((x - mu) / np.sqrt(var) * g + b, s)
    return None


def _confusable(s: _Sample, name: str) -> np.ndarray | None:
    if s.spec.kind != "unary" or name not in ACTIVATIONS or s.sliced is None:
        return None
    return _fl(ACTIVATIONS[name].f(s.sliced[0].astype(np.float64)), s)


def _fast_exp(s: _Sample) -> np.ndarray | None:
    if s.spec.name != "exp" or s.sliced is None:
        return None
    from .platforms import gpu_fast_expf

    return _fl(gpu_fast_expf(s.sliced[0]).astype(np.float64), s)


def _quant_variant(s: _Sample, which: str) -> np.ndarray | None:
    if s.spec.kind not in ("quantize", "dequantize") or s.sliced is None:
        return None
    x = s.sliced[0].astype(np.float64)
    sc = s.sliced[1] if len(s.sliced) > 1 else s.params.get("scale", s.recipe.scales[0] if s.recipe.scales else 1.0)
    sc = np.asarray(sc, dtype=np.float64)
    with np.errstate(all="ignore"):
        if s.spec.kind == "dequantize":
            v = {"scale_divided": x / sc, "scale_missing": x, "scale_squared": x * sc * sc}.get(which)
        else:
            divide = s.params.get("divide", True)
            v = {"scale_inverted": x * sc if divide else x / sc, "scale_missing": x}.get(which)
            if which == "saturation" :
                v = x / sc if divide else x * sc
                return round_to(v, s.recipe.out_format, overflow="ieee" if s.recipe.overflow == "saturate"
                                else "saturate").ravel()
    return None if v is None else _fl(v, s)


@dataclass(frozen=True)
class Candidate:
    """A defect model: id, plain-words cause, suggested action, emulation."""

    id: str
    cause: str
    action: str
    run: Callable[[_Sample], np.ndarray | None]


CANDIDATES: tuple[Candidate, ...] = (
    Candidate("dropped_last_k_tile", "the last K tile is not accumulated (loop bound or tile count off by one)",
              "check the K-tile loop bound (ceil(K/128) tiles, including a partial last tile)",
              lambda s: _k_drop(s, "last_tile")),
    Candidate("dropped_first_k_tile", "the first K tile is lost (PSUM overwritten instead of accumulated)",
              "start the accumulation group on the first tile and accumulate the rest",
              lambda s: _k_drop(s, "first_tile")),
    Candidate("k_off_by_one", "the last element of the contraction is skipped (off-by-one in K)",
              "check the contraction loop bound", lambda s: _k_drop(s, "last_one")),
    Candidate("transposed_operand", "the second operand is used transposed", "check operand layout", _transposed),
    Candidate("bf16_accumulation", "bf16 accumulation instead of fp32",
              "accumulate in fp32 (fp32 PSUM tile / fp32 reduction) or declare accumulate='bf16'",
              lambda s: _emul_acc(s, order="sequential", acc="bf16")),
    Candidate("bf16_psum", "bf16 PSUM writes once per K tile (NeuronCore-v4) that the recipe does not declare",
              "use an fp32 PSUM tile or declare accumulation='bf16_psum_rne'",
              lambda s: _emul_acc(s, order="chunked", psum="bf16") if _is_matmul2d(s) else None),
    Candidate("tf32_inputs", "TF32 operands where fp32 was declared",
              "disable TF32 (fp32_precision='ieee' / precision=HIGHEST) or declare compute='tf32'",
              lambda s: _rounded_inputs(s, "tf32")),
    Candidate("bf16_inputs", "operands silently cast to bf16", "keep operands in the declared dtype",
              lambda s: _rounded_inputs(s, "bf16")),
    Candidate("fp8_inputs", "operands silently quantised to fp8", "keep operands in the declared dtype",
              lambda s: _rounded_inputs(s, "fp8_e4m3fn")),
    Candidate("bf16_output", "the output is rounded to bf16 where the recipe declares a finer dtype",
              "write the accumulator in the declared output dtype or declare output='bf16'",
              lambda s: _output_as(s, "bf16")),
    Candidate("fp16_output", "the output is rounded to fp16 where the recipe declares a finer dtype",
              "write the declared output dtype", lambda s: _output_as(s, "fp16")),
    Candidate("no_max_subtraction", "softmax computed without max-subtraction: exp overflows on large logits",
              "subtract the row max before exp", _softmax_no_max),
    Candidate("mask_off_by_one_right", "the mask is off by one (one extra position kept)",
              "check the mask comparison (<= vs <)", lambda s: _softmax_mask_shift(s, 1)),
    Candidate("mask_off_by_one_left", "the mask is off by one (one position too few kept)",
              "check the mask comparison (< vs <=)", lambda s: _softmax_mask_shift(s, -1)),
    Candidate("mask_ignored", "the mask is not applied", "apply the mask before the max and the exp",
              _softmax_mask_ignored),
    Candidate("low_precision_max_subtraction", "x − max computed in bf16 (error ∝ |x_i − m|)",
              "compute x − max in fp32", _softmax_lowp_sub),
    Candidate("one_pass_variance", "one-pass variance E[x²]−E[x]² in fp32: catastrophic cancellation on offset data",
              "use two-pass or Welford/bn_stats+bn_aggr, or declare variance='one_pass'",
              lambda s: _ln_variant(s, "one_pass")),
    Candidate("unbiased_variance", "variance divided by N−1 instead of N", "use the biased (1/N) variance",
              lambda s: _ln_variant(s, "unbiased")),
    Candidate("eps_missing", "epsilon left out of the normaliser", "add eps inside the square root",
              lambda s: _ln_variant(s, "eps_missing")),
    Candidate("mean_subtracted", "mean subtracted in RMSNorm (LayerNorm computed instead)",
              "RMSNorm does not centre the input", lambda s: _ln_variant(s, "mean_subtracted")),
    Candidate("fast_math", "fast-math exp (__expf-class, error growing with |x|)", "compile without fast-math",
              _fast_exp),
    Candidate("scale_divided", "the dequantisation scale divides instead of multiplies", "multiply by the scale",
              lambda s: _quant_variant(s, "scale_divided")),
    Candidate("scale_missing", "the scale is not applied", "apply the scale",
              lambda s: _quant_variant(s, "scale_missing")),
    Candidate("scale_squared", "the scale is applied twice", "apply the scale once",
              lambda s: _quant_variant(s, "scale_squared")),
    Candidate("scale_inverted", "quantisation multiplies by the scale instead of dividing (or vice versa)",
              "check the scale convention", lambda s: _quant_variant(s, "scale_inverted")),
    Candidate("overflow_semantics", "a different overflow convention (saturating vs IEEE inf/NaN)",
              "declare overflow='saturate' or 'ieee' to match the platform", lambda s: _quant_variant(s, "saturation")),
)


_UNSET: Any = object()

#: Exceptions that make a variant (a reference.py formula) count as having no output.
_RAISED = (ValueError, TypeError, FloatingPointError, IndexError, ArithmeticError)

#: A score below this (the output grid explaining the whole error, or a model reproducing the
#: output with a residual under a tenth of the error) decides the diagnosis: the precision
#: fingerprint and the costly emulations are not run, and a hint counts as confirmed.
_DECISIVE = 0.11

#: Defect models that emulate an accumulation order step by step (the costly ones).
_COSTLY = frozenset({"bf16_accumulation", "bf16_psum"})


def _activation_candidates(spec: OpSpec) -> list[Candidate]:
    out = []
    for name in spec.confusables:
        out.append(Candidate(f"computes_{name}", f"computes {name} instead of {spec.name}",
                             f"use {spec.name} as specified", lambda s, n=name: _confusable(s, n)))
    return out


def _rms(v: np.ndarray) -> float:
    return float(np.sqrt(np.mean(v * v))) if v.size else 0.0


def _match(s: _Sample, cand: np.ndarray) -> float | None:
    """Score (lower is better) if the candidate explains the kernel's output, else None."""
    got, y = s.got, s.y
    if cand.shape != got.shape:
        return None
    b = s.match_base()
    with np.errstate(all="ignore"):
        c_sp = ~np.isfinite(cand)
        if c_sp.any():
            fin = ~(b["gy_sp"] | c_sp)
            err, tau_f = b["abs_err"][fin], s.tau[fin]
            e = _rms(err)
        else:  # the mask of the elements compared is the sample's own
            fin, err, tau_f, e = b["fin"], b["err"], b["tau_f"], b["e"]
        res = np.abs(got - cand)
        if fin is not None:
            res = res[fin]
    r = _rms(res)
    if not b["special_fail"] and (e == 0 or r > 0.3 * e):
        return None  # as below, whatever the model's distance from the oracle (not computed)
    if not b["special_fail"] and r >= 0.5 * b["g_rms"]:
        # the model is no closer to the output than zeros is: a model whose values are tiny next to the
        # oracle's would otherwise "reproduce" an all-zeros (unwritten) output
        return None
    with np.errstate(all="ignore"):
        dif = np.abs(cand - y)
        if fin is not None:
            dif = dif[fin]
    d = _rms(dif)
    if b["special_fail"]:
        same = np.array_equal(np.isnan(got), np.isnan(cand)) and np.array_equal(np.isinf(got) & (got > 0),
                                                                               np.isinf(cand) & (cand > 0))
        if not same:
            return None
        if r <= max(0.25 * e, _rms(tau_f)):
            return 0.0 if e == 0 else r / max(e, 1e-300)
        return None
    if e == 0 or d <= 0.5 * e:
        return None  # the model is too close to the oracle to explain the error
    with np.errstate(invalid="ignore"):
        within = bool(res.size) and bool(np.all(res <= tau_f))
    if r <= 0.1 * e or (r <= 0.3 * e and within):
        return r / e
    return None


# --------------------------------------------------------------------------- fingerprint


@dataclass(frozen=True)
class Hypothesis:
    """An alternative recipe the kernel may really be using."""

    id: str
    cause: str
    action: str
    applies: Callable[[PrecisionRecipe, OpSpec, list[np.ndarray]], bool]
    change: Callable[[PrecisionRecipe], PrecisionRecipe]


def _finer(fmt_name: str, p: int) -> bool:
    f = get_format(fmt_name)
    return f.kind == "float" and f.p > p


def _inputs_finer(r: PrecisionRecipe, arrs: list[np.ndarray], p: int, n: int) -> bool:
    ok = False
    for a in arrs[:n]:
        try:
            f = format_of(a)
        except ValueError:
            continue
        ok = ok or (f.kind == "float" and f.p > p)
    return ok


HYPOTHESES: tuple[Hypothesis, ...] = (
    Hypothesis("tf32_inputs", "TF32 operands where fp32 was declared",
               "disable TF32 (fp32_precision='ieee' / precision=HIGHEST) or declare compute='tf32'",
               lambda r, s, a: s.kind in ("contraction",) and _inputs_finer(r, a, 11, 2),
               lambda r: r.replace(compute="tf32")),
    Hypothesis("bf16_inputs", "operands silently cast to bf16", "keep operands in the declared dtype",
               lambda r, s, a: s.kind not in ("quantize", "dequantize") and _inputs_finer(r, a, 8, 3),
               lambda r: r.replace(compute="bf16")),
    Hypothesis("fp8_inputs", "operands silently quantised to fp8", "keep operands in the declared dtype",
               lambda r, s, a: s.kind == "contraction" and _inputs_finer(r, a, 4, 2),
               lambda r: r.replace(compute="fp8_e4m3fn")),
    Hypothesis("bf16_psum", "bf16 PSUM writes once per K tile that the recipe does not declare",
               "use an fp32 PSUM tile or declare accumulation='bf16_psum_rne'",
               lambda r, s, a: s.kind == "contraction" and r.acc_format.p > 8 and r.accumulation != "bf16_psum_rne",
               lambda r: r.replace(accumulation="bf16_psum_rne")),
    Hypothesis("bf16_accumulation", "bf16 accumulation instead of fp32",
               "accumulate in fp32 (fp32 PSUM tile / fp32 reduction) or declare accumulate='bf16'",
               lambda r, s, a: s.kind not in ("unary", "binary", "quantize", "dequantize") and _finer(r.accumulate, 8),
               lambda r: r.replace(accumulate="bf16", accumulation="any")),
    Hypothesis("fp8_fast_accum", "a limited-precision (~14-bit) FP8 accumulator",
               "turn off fast accumulation (use_fast_accum=False) or promote to fp32 every 128 products",
               lambda r, s, a: s.kind == "contraction" and _finer(r.accumulate, 14),
               lambda r: r.replace(accumulation="fp8_fast_accum")),
    Hypothesis("bf16_output", "the output is rounded to bf16 where the recipe declares a finer dtype",
               "write the declared output dtype or declare output='bf16'",
               lambda r, s, a: _finer(r.output, 8), lambda r: r.replace(output="bf16")),
    Hypothesis("fp16_output", "the output is rounded to fp16 where the recipe declares a finer dtype",
               "write the declared output dtype", lambda r, s, a: _finer(r.output, 11),
               lambda r: r.replace(output="fp16")),
    Hypothesis("fast_math", "fast-math transcendentals (__expf-class error growing with |x|)",
               "compile without fast-math or declare transcendental='cuda_fast_math'",
               lambda r, s, a: s.kind in ("unary", "softmax", "log_softmax") and r.transcendental in
               ("libm", "correctly_rounded"), lambda r: r.replace(transcendental="cuda_fast_math")),
    Hypothesis("approximate_transcendental", "transcendentals approximated to ~2^-12 (ScalarE-class polynomials)",
               "declare transcendental='scalar_engine' or use an accurate implementation",
               lambda r, s, a: s.kind in ("unary", "softmax", "log_softmax", "layernorm", "rmsnorm")
               and r.transcendental in ("libm", "correctly_rounded"),
               lambda r: r.replace(transcendental="scalar_engine")),
)


def _exact_in(fmt: Format, a: np.ndarray) -> bool:
    """``exact_in(fmt, a)``, deciding from a strided subset of ``a`` first: "every value is
    exact" fails on the subset only if it fails on the whole, and inputs that are not exact (the
    common case: the check runs only for inputs finer than the compute format) fail there at
    once, without scanning the whole array."""
    x = np.asarray(a)
    if x.size > 2 * _EXACT_PROBE and not exact_in(fmt, x.flat[np.arange(0, x.size, x.size // _EXACT_PROBE)]):
        return False
    return exact_in(fmt, a)


#: Elements of an input checked before the whole of it (:func:`_exact_in`).
_EXACT_PROBE = 1024


def _ctx_for(recipe: PrecisionRecipe, base: RuleContext, spec: OpSpec, arrays: list[np.ndarray],
             memo: dict[Any, tuple[float, bool]] | None = None) -> RuleContext:
    """``base`` under ``recipe``. ``memo``: the input-exactness terms by compute format, for the
    calls of one diagnosis (the same ``spec`` and ``arrays``: they scan every input)."""
    comp = recipe.compute_format
    hit = None if memo is None else memo.get(comp)
    if hit is None:
        eps_in, all_exact = 0.0, True
        if comp is not None:
            for a in arrays[: max(spec.n_data, 1)]:
                if a is None:
                    continue
                try:
                    f = format_of(a)
                except ValueError:
                    continue
                if f.kind == "float" and f.p > comp.p and not _exact_in(comp, a):
                    eps_in += comp.u
                    all_exact = False
        hit = (eps_in, all_exact)
        if memo is not None:
            memo[comp] = hit
    eps_in, all_exact = hit
    return RuleContext(recipe=recipe, facts=base.facts, operand_formats=base.operand_formats, eps_in=eps_in,
                       operands_exact_in_compute=all_exact, activation=base.activation)


def _fingerprint(s: _Sample, ob: Any, ctx: RuleContext, tau_of: Callable[[Any], np.ndarray], base: Any,
                 ctx_memo: dict[Any, tuple[float, bool]] | None = None) -> list[tuple[float, Finding]]:
    """``base``: ``RULES[s.spec.kind](ob, ctx)`` (the declared recipe's bounds, which the caller has)."""
    rule = RULES[s.spec.kind]
    if base.sigma is None:
        return []
    fin = np.isfinite(s.got) & np.isfinite(s.y)
    if base.exact is not None:
        fin &= ~base.exact
    if fin.sum() < 8:
        return []
    e = np.abs(s.got - s.y)[fin]

    def zrms(sig: np.ndarray) -> float:
        z = e / np.maximum(sig[fin], 1e-300)
        return float(np.sqrt(np.mean(z * z)))

    z0 = zrms(base.sigma)
    if z0 <= 3.0:
        return []
    # rounding to nearest (and SR) is unbiased: errors that shrink (or grow) |y| systematically
    # can only come from a biased model such as a truncating accumulator
    sgn = (s.got - s.y)[fin] * np.sign(s.y[fin])
    sd = float(np.std(sgn))
    bias_t = float(np.mean(sgn) / (sd / math.sqrt(sgn.size))) if sd > 0 else 0.0
    biased = abs(bias_t) > 4.0 and sgn.size >= 32
    out = []
    for h in HYPOTHESES:
        try:
            if not h.applies(s.recipe, s.spec, s.arrays):
                continue
            hr = h.change(s.recipe)
        except ValueError:
            continue
        if biased != bool(hr.structure.get("biased")):
            continue
        hb = rule(ob, _ctx_for(hr, ctx, s.spec, s.arrays, ctx_memo))
        if hb.sigma is None:
            continue
        zh = zrms(hb.sigma)
        with np.errstate(divide="ignore", invalid="ignore"):
            marg = float(np.max(e / np.maximum(tau_of(hb)[fin], 1e-300)))
        # consistent (z ≈ 1, inside its hard bound) but not vacuous (σ ≫ the errors)
        if 0.03 <= zh <= 2.5 and marg <= 1.0:
            score = abs(math.log(max(zh, 1e-12) / 0.6))
            ev = (f"the errors are {z0:.3g}σ (RMS) under the declared recipe but {zh:.3g}σ under "
                  f"'{hr.describe()}', inside that recipe's bound")
            out.append((score, Finding(h.id, h.cause, ev, h.action)))
    out.sort(key=lambda t: t[0])
    return out[:2]


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
    shape = verdict.shape
    m = verdict.metrics
    # sample rows around the worst element
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
    r1 = min(n_rows, r0 + budget)
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

    def grid_finding() -> tuple[float, Finding] | None:
        """1. output grid (decisive for a silent output downcast when rounding explains the error)"""
        if not m.output_grid:
            return None
        hid = f"{m.output_grid}_output" if m.output_grid in ("bf16", "fp16") else "output_downcast"
        explains = False
        try:
            hb = rule(ob, _ctx_for(recipe.replace(output=m.output_grid), ctx, spec, arrays, ctx_memo))
            fin_g = np.isfinite(got) & np.isfinite(ob.y)
            with np.errstate(all="ignore"):
                explains = bool(np.all(np.abs(got - ob.y)[fin_g] <= tau_of(hb)[fin_g]))
        except ValueError:
            pass
        ev = (f"every non-zero output is exactly representable in {m.output_grid}, while most correctly rounded "
              f"{recipe.output} results are not")
        if explains:
            return (0.0, Finding(hid, f"the output is rounded to {m.output_grid} where the recipe declares "
                                 f"{recipe.output}", ev + f"; rounding the correct result to {m.output_grid} "
                                 "explains the whole error",
                                 f"write the {recipe.output} result, or declare output='{m.output_grid}'"))
        return (0.8, Finding("output_grid", f"the output lies on the {m.output_grid} grid", ev + "; but "
                             "the errors are larger than that rounding alone makes",
                             "look for lower-precision accumulation or intermediates"))

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
    grid = grid_finding()
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
    # 4. shape of the error
    fin = np.isfinite(got) & np.isfinite(s.y)
    if fin.any():
        g, y = got[fin], s.y[fin]
        err = float(np.sqrt(np.mean((g - y) ** 2)))
        if np.all(g == 0) and np.any(y != 0):
            findings.append((0.05, Finding("zeros", "the kernel returns zeros", f"all {g.size} sampled outputs are 0",
                                           "check that the result is written back to the output")))
        yy = float(np.dot(y, y))
        if yy > 0 and err > 0:
            c = float(np.dot(g, y) / yy)
            res = float(np.sqrt(np.mean((g - c * y) ** 2)))
            tau_rms = float(np.sqrt(np.mean(s.tau[fin] ** 2)))
            if abs(c - 1) > 1e-3 and res <= max(0.1 * err, tau_rms) and c != 0:
                what = f"the output is off by a constant factor {c:.6g}"
                if abs(c - 1) < 0.05:
                    what += " (a wrong scale, or a biased/truncating accumulation)"
                findings.append((0.2, Finding("constant_factor", what,
                                              f"got ≈ {c:.6g}·expected with residual {res:.3g} vs error {err:.3g}",
                                              "check scale factors (dequantisation scale, 1/N, temperature)")))
    if m.nan_produced:
        findings.append((0.9, Finding("nan_produced", "the kernel produces NaN where the oracle is finite",
                                      f"{m.nan_produced} elements", "look for inf−inf, 0·inf, exp overflow or 0/0 in "
                                      "intermediates")))
    if m.nan_swallowed:
        findings.append((0.9, Finding("nan_swallowed", "NaN from the inputs is dropped instead of propagated",
                                      f"{m.nan_swallowed} elements where IEEE propagation gives NaN come out finite",
                                      "do not mask or max NaN away unless the op's contract says so")))
    where = stream_where or m.mismatch_where
    if "tile-edge" in where:
        findings.append((0.3, Finding("tile_edge", "a tile-edge bug", where, "run the integers (exact) suite and "
                                      "check tile boundaries")))
    elif "last partial" in where:
        findings.append((0.3, Finding("last_tile", "the last partial tile is handled wrongly", where,
                                      "check the remainder tile (size not a multiple of 128)")))
    elif any(w in where for w in ("column", "row(s)", "diagonal")):
        findings.append((1.0, Finding("localized", "a localised error, not a precision problem", where,
                                      "look for an indexing or masking bug at those positions")))
    # dedupe by id, best score first
    seen: set[str] = set()
    out: list[Finding] = []
    for _, f in sorted(findings, key=lambda t: t[0]):
        if f.id in seen:
            continue
        seen.add(f.id)
        out.append(f)
    return out
