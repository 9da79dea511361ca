"""Diagnosis, mechanism 2: the precision fingerprint. The z-score model evaluated under alternative recipes
(TF32 operands, bf16 accumulation, bf16 PSUM, FP8 fast accumulation, bf16 output, fast-math): the one under
which the errors look like a correct kernel's names the precision the kernel used
(:mod:`nkieval.numerics.diagnose`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .bounds import RULES, RuleContext
from .diagnose_sample import _Sample
from .formats import Format, format_of, get_format
from .oracle import OpSpec, exact_in
from .recipe import PrecisionRecipe
from .verdict import Finding

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
