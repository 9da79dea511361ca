"""Diagnosis, mechanism 1: the defect models. Each re-runs the op on a slice of the output the way a known
defect would (a K tile dropped, no max-subtraction, one-pass variance, the mask shifted by one, a confusable
activation, the scale divided ...), and :func:`_match` decides whether the model explains the kernel's output
(:mod:`nkieval.numerics.diagnose`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .diagnose_sample import _WORK, _rms, _Sample
from .formats import format_of, get_format, round_to
from .oracle import ACTIVATIONS, OpSpec
from .platforms import emulate_matmul, emulate_sum, gpu_fast_expf

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


def _activation_candidates(spec: OpSpec) -> list[Candidate]:
    out = []
    for name in spec.confusables:
        out.append(Candidate(f"computes_{name}", f"computes {name} instead of {spec.name}",
                             f"use {spec.name} as specified", lambda s, n=name: _confusable(s, n)))
    return out




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
