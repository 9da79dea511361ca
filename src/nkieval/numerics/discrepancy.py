"""How far apart a GPU and a Trainium result may land, and why an observed discrepancy happened.

Research note §4.1 and §4.8: the two results are never compared with each other by a fixed tolerance; each is
judged against the float64 oracle under its own recipe. :func:`expected_disagreement_envelope` gives
``|ŷ_A − ŷ_B| ≤ τ_A + τ_B`` and :func:`attribute_discrepancy` maps each side's diagnosis onto the attribution
table. The emulated computations and the named recipes (:data:`PRESETS`) are in :mod:`.platforms`; this module
sits above the gates (:func:`~nkieval.numerics.gates.check`), which the platforms do not need.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .bounds import RULES, RuleContext
from .gates import check
from .oracle import _normalise_inputs, _resolve_op, exact_in, round_inputs
from .platforms import PRESETS, _fmt
from .recipe import PrecisionRecipe

__all__ = [
    "ATTRIBUTION_TABLE",
    "AttributionRule",
    "DiscrepancyReport",
    "Envelope",
    "attribute_discrepancy",
    "expected_disagreement_envelope",
]


@dataclass(frozen=True)
class Envelope:
    """Per-element bound on ``|ŷ_A − ŷ_B|`` for two correct implementations: ``τ_A + τ_B``
    (triangle inequality through the oracle), hard and probabilistic."""

    tau_det: np.ndarray
    tau_prb: np.ndarray
    share_a: float
    recipe_a: PrecisionRecipe
    recipe_b: PrecisionRecipe
    dominant_a: str
    dominant_b: str

    def ratio(self, out_a: np.ndarray, out_b: np.ndarray, *, probabilistic: bool = True) -> np.ndarray:
        tau = self.tau_prb if probabilistic else self.tau_det
        d = np.abs(np.asarray(out_a, dtype=np.float64) - np.asarray(out_b, dtype=np.float64)).reshape(tau.shape)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(tau > 0, d / tau, np.where(d > 0, np.inf, 0.0))

    def contains(self, out_a: np.ndarray, out_b: np.ndarray, *, probabilistic: bool = True) -> bool:
        r = self.ratio(out_a, out_b, probabilistic=probabilistic)
        fin = np.isfinite(np.asarray(out_a, dtype=np.float64)).reshape(r.shape) & np.isfinite(
            np.asarray(out_b, dtype=np.float64)).reshape(r.shape)
        return bool(np.all(r[fin] <= 1.0))

    def summary(self) -> str:
        med = float(np.median(self.tau_prb)) if self.tau_prb.size else 0.0
        return (f"expected |A−B| ≤ τ_A+τ_B: median {med:.3g} (probabilistic), {float(np.median(self.tau_det)):.3g} "
                f"(hard); {100 * self.share_a:.0f}% of it from {self.recipe_a.name or 'A'} "
                f"(dominated by {self.dominant_a}), the rest from {self.recipe_b.name or 'B'} "
                f"(dominated by {self.dominant_b})")


def _bounds_full(op: Any, inputs: Sequence[np.ndarray], recipe: PrecisionRecipe, params: Mapping[str, Any]):

    p = dict(params)
    spec = _resolve_op(op, p)
    arrays = _normalise_inputs(inputs, spec, p)
    arrays, _ = round_inputs(arrays, spec, recipe)
    prep = spec.prepare(arrays, {**spec.defaults, **p}, recipe)
    comp = recipe.compute_format
    eps_in = 0.0
    fmts = []
    for i, a in enumerate(arrays):
        f = _fmt(a)
        fmts.append(f)
        if comp is not None and i < max(spec.n_data, 1) and f.p > comp.p and not exact_in(comp, a):
            eps_in += comp.u
    ctx = RuleContext(recipe=recipe, facts=prep.facts, operand_formats=tuple(fmts), eps_in=eps_in,
                      operands_exact_in_compute=eps_in == 0,
                      activation=spec.name if spec.kind == "unary" else None)
    ob = prep.evaluate(0, prep.n_rows)
    bb = RULES[spec.kind](ob, ctx)
    return ob, bb, prep


def _dominant(terms: Mapping[str, np.ndarray]) -> str:
    if not terms:
        return "bitwise exactness"
    sums = {k: float(np.nansum(np.broadcast_to(v, np.shape(next(iter(terms.values())))))) for k, v in terms.items()}
    return max(sums, key=sums.get)


def expected_disagreement_envelope(op: Any, inputs: Sequence[np.ndarray], recipe_a: PrecisionRecipe | str,
                                   recipe_b: PrecisionRecipe | str, **params: Any) -> Envelope:
    """Per-element envelope for two platforms' *correct* results on the same inputs.

    Recipes may be preset names (:data:`PRESETS`). The envelope is the sum of each side's
    bound against the float64 oracle, so it holds for any accumulation orders on both sides.
    """
    ra = PRESETS[recipe_a].recipe if isinstance(recipe_a, str) else recipe_a
    rb = PRESETS[recipe_b].recipe if isinstance(recipe_b, str) else recipe_b
    _, ba, prep = _bounds_full(op, inputs, ra, params)
    _, bb, _ = _bounds_full(op, inputs, rb, params)
    shape = prep.out_shape
    tda, tdb = ba.tau_det.reshape(shape), bb.tau_det.reshape(shape)
    tpa, tpb = ba.tau_prb.reshape(shape), bb.tau_prb.reshape(shape)
    tot = float(np.sum(tpa) + np.sum(tpb))
    share = float(np.sum(tpa)) / tot if tot > 0 else 0.5
    return Envelope(tda + tdb, tpa + tpb, share, ra, rb, _dominant(ba.terms), _dominant(bb.terms))


# --------------------------------------------------------------------------- attribution


@dataclass(frozen=True)
class AttributionRule:
    """One row of the research note's §4.8 table: a signature, its likely cause, what to
    check, and the diagnosis finding ids that establish it."""

    id: str
    signature: str
    cause: str
    check: str
    finding_ids: tuple[str, ...]


ATTRIBUTION_TABLE: tuple[AttributionRule, ...] = (
    AttributionRule("order_rounding", "both within τ; different bits",
                    "accumulation order / FMA contraction / output rounding",
                    "G2/G3 pass for both: nothing to fix", ()),
    AttributionRule("tf32", "f32 matmul error ~1e-3 relative on one side",
                    "TF32 operands (JAX/TF default, cuDNN conv default, allow_tf32)",
                    "rerun with torch fp32_precision='ieee' / precision=HIGHEST", ("tf32_inputs",)),
    AttributionRule("fp8_fast_accum", "FP8 error growing with K (up to ~2% max rel at K = 4096)",
                    "limited-precision FP8 accumulation (cuBLASLt fast accumulation)",
                    "rerun with use_fast_accum=False", ("fp8_fast_accum",)),
    AttributionRule("fast_math", "transcendental error growing with |x|", "--use_fast_math / __expf",
                    "recompile without fast-math", ("fast_math",)),
    AttributionRule("ftz", "tiny outputs 0 on one side", "flush-to-zero of subnormals",
                    "FTZ-equivalence rule (|y| < tiny_out)", ("ftz",)),
    AttributionRule("fp8_overflow", "NaN vs ±448/±240/inf at overflow", "fp8 saturation semantics differ",
                    "research note §2.4 table", ("overflow_semantics",)),
    AttributionRule("bf16_psum", "error ∝ u_bf16·√(K/128)·S on the Trainium side", "bf16 PSUM accumulation (v4)",
                    "the recipe must declare bf16_psum_rne/sr", ("bf16_psum", "bf16_accumulation")),
    AttributionRule("low_precision_max_sub", "softmax error ∝ |x_i − m|", "max-subtraction in low precision",
                    "compute x − max in fp32", ("low_precision_max_subtraction",)),
    AttributionRule("tile_edge", "periodic error pattern with period 128 in K or N", "tile-edge bug",
                    "run the exact-arithmetic (integers) suite", ("tile_edge", "dropped_last_k_tile",
                                                                   "dropped_first_k_tile")),
)


@dataclass(frozen=True)
class DiscrepancyReport:
    """Why two platform results differ: each side's verdict against the oracle, the envelope
    ratio of their difference, and the matching rows of :data:`ATTRIBUTION_TABLE`."""

    verdict_a: Any
    verdict_b: Any
    envelope_ratio: float
    rows: tuple[tuple[AttributionRule, str, str], ...] = field(default_factory=tuple)

    @property
    def causes(self) -> list[str]:
        return [r.id for r, _, _ in self.rows]

    def explanation(self) -> str:
        if not self.rows:
            return ("The difference is not explained by any known platform effect; at least one side fails its own "
                    "recipe — see its verdict.")
        lines = [f"{side}: {rule.cause} ({rule.signature}); evidence: {ev}; check: {rule.check}"
                 for rule, side, ev in self.rows]
        return f"Difference/envelope = {self.envelope_ratio:.3g}. " + " | ".join(lines)


def attribute_discrepancy(out_a: np.ndarray, out_b: np.ndarray, inputs: Sequence[np.ndarray], op: Any,
                          recipe_a: PrecisionRecipe | str, recipe_b: PrecisionRecipe | str, *,
                          names: tuple[str, str] = ("GPU", "Trainium"), input_family: str | None = None,
                          **params: Any) -> DiscrepancyReport:
    """Attribute an observed A-vs-B discrepancy to its causes (research note §4.8).

    Each side is checked against the oracle under *its own* recipe; a side that fails is
    diagnosed, and its findings are mapped onto the attribution table. If both pass, the
    difference is ordinary order/rounding noise and there is nothing to fix.
    """
    ra = PRESETS[recipe_a].recipe if isinstance(recipe_a, str) else recipe_a
    rb = PRESETS[recipe_b].recipe if isinstance(recipe_b, str) else recipe_b
    va = check(out_a, inputs, op, ra, input_family=input_family, **params)
    vb = check(out_b, inputs, op, rb, input_family=input_family, **params)
    env = expected_disagreement_envelope(op, inputs, ra, rb, **params)
    fin = np.isfinite(np.asarray(out_a, dtype=np.float64)) & np.isfinite(np.asarray(out_b, dtype=np.float64))
    ratio = env.ratio(out_a, out_b)
    env_ratio = float(np.max(ratio[fin.reshape(ratio.shape)])) if fin.any() else 0.0
    rows: list[tuple[AttributionRule, str, str]] = []
    if va.status == "pass" and vb.status == "pass":
        rows.append((ATTRIBUTION_TABLE[0], "both",
                     f"{names[0]} margin {va.margin:.3g}, {names[1]} margin {vb.margin:.3g}; |A−B| is "
                     f"{env_ratio:.3g}× the envelope"))
    table = {r.id: r for r in ATTRIBUTION_TABLE}
    for name, v in ((names[0], va), (names[1], vb)):
        if v.status == "fail":
            for rule in ATTRIBUTION_TABLE[1:]:
                hit = next((f for f in v.findings if f.id in rule.finding_ids), None)
                if hit is not None:
                    rows.append((rule, name, hit.evidence))
        if v.metrics.special_explained:
            rows.append((table["fp8_overflow"], name,
                         f"{v.metrics.special_explained} overflow elements differ by the platform's convention"))
    # flush-to-zero: tiny results zero on exactly one side (both sides may still pass)
    ob, _, _ = _bounds_full(op, inputs, ra, params)
    y = ob.y.reshape(-1)
    tiny = min(ra.out_format.tiny, rb.out_format.tiny) if ra.out_format.kind == "float" else 0.0
    fa_ = np.asarray(out_a, dtype=np.float64).reshape(-1)
    fb_ = np.asarray(out_b, dtype=np.float64).reshape(-1)
    with np.errstate(invalid="ignore"):
        sub = (np.abs(y) < tiny) & (y != 0)
        for name, mine, other in ((names[0], fa_, fb_), (names[1], fb_, fa_)):
            n_ftz = int(np.sum(sub & (mine == 0) & (other != 0)))
            if n_ftz:
                rows.append((table["ftz"], name, f"{n_ftz} subnormal results are 0 on {name} only"))
    return DiscrepancyReport(va, vb, env_ratio, tuple(rows))
