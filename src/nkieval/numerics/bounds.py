"""Per-element error bounds: one rule per op class, all built from the same few terms.

Why per-element and condition-aware: the legitimate error of a contraction is set by
``S = Σ|a||b|``, not by ``|y|``; an element that cancels to ~0 may carry an error of
``γ_K·u·S`` while ``|y|`` is tiny, which is exactly where fixed rtol/atol checks fail.

For each element the rule returns (research note §4.3):

* ``tau_det``: the hard bound ``u_out|y| + (1+u_out)(γ_K(u_acc) + ε_in)·S + η``. It holds for
  *every* summation order (sequential, pairwise, 128-row tiles + PSUM, split-K, atomics), so
  exceeding it is impossible for a correct kernel under the declared recipe (Higham,
  *Accuracy and Stability*, §3.1).
* ``tau_prb``: the same with ``γ_K`` replaced by ``λ√K·u_acc`` (Higham & Mary 2019), valid
  when rounding errors behave randomly, i.e. on randomised inputs only.
* ``sigma``: the expected error (standard deviation) of a correct kernel, used for the
  z-score that exposes silently lower precision hiding inside the bounds (§4.7). For a sum
  of ``K`` terms in random order ``E Σ_k s_k² ≈ K(y²/3 + Q/6)`` (sampling without
  replacement), so ``σ² = u_acc²/3·K(y²/3 + Q/6) + u_out²/3·y² + …``.
* ``exact``: elements whose every summation order is exact (integer-valued inputs on a
  coarse grid, ``S < 2^p_acc·grid``), where bitwise equality with ``fl_out(y)`` is required.
* ``contract``: elements outside the declared recipe's contract (activation outside the
  engine's valid range, exp overflow without max-subtraction, integer overflow).

Rules live in :data:`RULES`, keyed by :attr:`OpSpec.kind`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .formats import Format, get_format, next_toward, round_to
from .oracle import ACTIVATIONS, OracleBlock
from .recipe import PrecisionRecipe

__all__ = [
    "RULES",
    "BoundsBlock",
    "RuleContext",
    "gamma",
    "prob_coeff",
    "worked_example",
]


def gamma(n: np.ndarray | float, u: float) -> np.ndarray | float:
    """Higham's ``γ_n = n·u / (1 − n·u)``; inf once ``n·u ≥ 1`` (no bound survives)."""
    nu = np.asarray(n, dtype=np.float64) * u
    with np.errstate(divide="ignore", invalid="ignore"):
        g = np.where(nu < 1.0, nu / (1.0 - nu), np.inf)
    return float(g) if np.ndim(g) == 0 else g


def prob_coeff(n: np.ndarray | float, u: float, lam: float) -> np.ndarray | float:
    """Probabilistic coefficient ``λ√n·u``, capped by ``γ_n`` (it can never be looser)."""
    c = lam * np.sqrt(np.asarray(n, dtype=np.float64)) * u
    out = np.minimum(c, gamma(n, u))
    return float(out) if np.ndim(out) == 0 else out


@dataclass
class BoundsBlock:
    """Bounds for one block of elements (all arrays have the block's length)."""

    tau_det: np.ndarray
    tau_prb: np.ndarray
    sigma: np.ndarray | None
    terms: dict[str, np.ndarray] = field(default_factory=dict)
    exact: np.ndarray | None = None
    allowed_lo: np.ndarray | None = None
    allowed_hi: np.ndarray | None = None
    contract: np.ndarray | None = None
    contract_reason: str | None = None


@dataclass(frozen=True)
class RuleContext:
    """What a rule needs besides the oracle block.

    Attributes:
        recipe: the declared recipe.
        facts: op facts from :class:`~nkieval.numerics.oracle.Prepared` (K, grid, ...).
        operand_formats: storage format of each operand actually given (after declared
            rounding); None for non-float operands.
        eps_in: Σ ``u_compute`` over operands the kernel itself rounds (TF32, auto-cast).
        operands_exact_in_compute: every operand is exact in the compute format.
        activation: function name for unary ops.
    """

    recipe: PrecisionRecipe
    facts: Mapping[str, Any]
    operand_formats: tuple[Format | None, ...] = ()
    eps_in: float = 0.0
    operands_exact_in_compute: bool = True
    activation: str | None = None


def _out_terms(recipe: PrecisionRecipe) -> tuple[float, float, float]:
    """(u_out_eff, tiny_out, variance factor): SR errs by < 1 ulp = 2u, with up to 3× the
    variance of RNE."""
    out = recipe.out_format
    sr = recipe.rounding == "sr"
    u = out.u * (2.0 if sr else 1.0)
    return u, (out.tiny if out.kind == "float" else 0.0), (3.0 if sr else 1.0)


def _acc_u(recipe: PrecisionRecipe) -> float:
    return float(recipe.structure.get("acc_u", recipe.acc_format.u))


def _fl_out_neighbours(y: np.ndarray, recipe: PrecisionRecipe) -> tuple[np.ndarray, np.ndarray]:
    """The two output-format values bracketing ``y`` (equal when ``y`` is representable)."""
    out = recipe.out_format
    r = round_to(y, out, overflow=recipe.overflow)
    fin = np.isfinite(r) & np.isfinite(y)
    with np.errstate(invalid="ignore"):
        up = fin & (r < y)
        down = fin & (r > y)
    hi = np.where(up, next_toward(np.where(up, r, 0.0), out, +1.0), r)
    lo = np.where(down, next_toward(np.where(down, r, 0.0), out, -1.0), r)
    return lo, hi


# --------------------------------------------------------------------------- contraction


def _products_exact(ctx: RuleContext) -> bool:
    """bf16·bf16 (16 bits), fp16·fp16 (22), fp8·fp8 products are exact in fp32; fp32·fp32
    products are not (one more rounding per term)."""
    n_ops = int(ctx.facts.get("operands", 2))
    if n_ops < 2:
        return True
    comp = ctx.recipe.compute_format
    ps = []
    for f in ctx.operand_formats[:2]:
        if f is None or f.kind != "float":
            return True
        p = f.p if comp is None or comp.kind != "float" else min(f.p, comp.p)
        ps.append(p)
    acc = ctx.recipe.acc_format
    if acc.kind == "int":
        return True
    return sum(ps) <= acc.p


def rule_contraction(b: OracleBlock, ctx: RuleContext) -> BoundsBlock:
    """matmul / dot / sum / mean / cumsum / fp8 matmul with scales."""
    r = ctx.recipe
    y = b.y
    ay = np.abs(y)
    S = b.scale if b.scale is not None else ay
    Q = b.sumsq if b.sumsq is not None else S * S
    K = np.asarray(b.k if b.k is not None else 1, dtype=np.float64)
    acc = r.acc_format
    u_out, tiny_out, vf = _out_terms(r)
    lam = r.lam
    contract = None
    reason = None

    if acc.kind == "int":
        # integer accumulation is exact in range; beyond it, wrap vs saturate differ by platform
        over = S > acc.max
        out_over = (r.out_format.kind == "int") & (ay > r.out_format.max)
        bad = over | out_over
        zeros = np.zeros_like(ay)
        return BoundsBlock(
            tau_det=zeros, tau_prb=zeros, sigma=None, terms={}, exact=np.ones(ay.shape, dtype=bool),
            contract=bad if bad.any() else None,
            contract_reason=f"integer result or partial sums exceed {acc.name}/{r.out_format.name} range "
            "(wrap-around vs saturation is platform-specific)" if bad.any() else None,
        )

    u_acc = _acc_u(r)
    exact_products = _products_exact(ctx)
    eps_prod = 0.0 if exact_products else u_acc
    eps_in = ctx.eps_in
    n_round = np.maximum(K - (1.0 if exact_products else 0.0), 0.0)
    promote = r.structure.get("promote")
    if promote:
        inner = np.minimum(K, promote)
        c_det = gamma(inner, u_acc) + gamma(np.ceil(K / promote), acc.u)
        c_prb = prob_coeff(inner, u_acc, lam) + prob_coeff(np.ceil(K / promote), acc.u, lam)
    else:
        c_det = gamma(n_round, u_acc)
        c_prb = prob_coeff(n_round, u_acc, lam)
    if r.structure.get("biased"):
        c_prb = c_det  # truncation errors do not cancel: no √K gain
    psum_fmt = r.structure.get("psum_rounds")
    psum_det = psum_prb = psum_var = 0.0
    if psum_fmt:

        sr = bool(r.structure.get("psum_sr"))
        up = get_format(psum_fmt).u * (2.0 if sr else 1.0)
        T = np.ceil(K / r.tile_k)
        psum_det = T * up * S  # every tile order: each write errs by ≤ u·|P_t| ≤ u·S
        # Σ_t P_t² of the running PSUM values (oracle, declared tile order) when available,
        # else its expectation for random data; Azuma: |Σ δ_t P_t| ≤ λ·u·sqrt(Σ P_t²)
        psq = b.aux.get("psum_sq")
        if psq is None:
            psq = T * (ay * ay / 3.0 + (Q + ay * ay / T) / 6.0)
        psq = psq * (1.0 + T * up) ** 2
        psum_prb = np.minimum(lam * up * np.sqrt(psq), psum_det)
        psum_var = (3.0 if sr else 1.0) * up**2 / 3.0 * psq
    extra_rel = 0.0
    if b.aux.get("divide"):
        extra_rel += u_acc
    if b.aux.get("scaled"):
        extra_rel += 2.0 * acc.u
    sub = b.subnormal_scale if b.subnormal_scale is not None else 0.0
    eta = K * acc.tiny + tiny_out + sub
    t_out = u_out * ay
    t_acc = (1.0 + u_out) * c_det * S
    t_in = (1.0 + u_out) * (eps_in + eps_prod) * S
    t_extra = extra_rel * ay
    tau_det = t_out + t_acc + t_in + (1.0 + u_out) * psum_det + t_extra + eta
    tau_prb = t_out + (1.0 + u_out) * (c_prb * S + psum_prb) + t_in + t_extra + eta
    tau_prb = np.minimum(tau_prb, tau_det)
    var = (
        vf * u_out**2 / 3.0 * ay * ay
        + (u_acc**2 / 3.0) * np.maximum(K - 1.0, 0.0) * (ay * ay / 3.0 + Q / 6.0)
        + ((eps_prod**2) + ctx.eps_in**2) / 3.0 * Q
        + psum_var
        + (extra_rel**2 / 3.0) * ay * ay
        + (eta * eta) / 3.0
    )
    if r.structure.get("biased"):
        # truncation errs one way: the mean error grows like (u/2)·Σ_k|s_k| ≲ (u/2)·K·sqrt(y²/3 + Q/6)
        inner_k = np.minimum(K, promote) if promote else K
        var = var + (0.5 * u_acc * inner_k) ** 2 * (ay * ay / 3.0 + Q / 6.0) * (K / inner_k)
    sigma = np.sqrt(var)
    terms = {"output rounding": t_out, "accumulation": t_acc, "underflow floor": eta + 0 * ay}
    if eps_in or eps_prod:
        terms["input/product rounding"] = t_in
    if psum_fmt:
        terms["bf16 PSUM writes"] = (1.0 + u_out) * psum_det
    if extra_rel:
        terms["division/scaling"] = t_extra

    exact = None
    grid = ctx.facts.get("grid")
    structure_exact = r.accumulation == "exact"
    if grid is not None and ctx.operands_exact_in_compute:
        p_eff = min(acc.p, round(-math.log2(u_acc)))
        if psum_fmt:

            p_eff = min(p_eff, get_format(psum_fmt).p)
        limit = 2.0 ** (p_eff + grid)
        if 2.0**grid >= acc.subnormal:
            ex = S <= limit
            if b.subnormal_scale is not None:  # a DAZ kernel may legally drop those terms
                ex = ex & (b.subnormal_scale == 0)
            if b.aux.get("divide"):
                kk = int(np.max(K)) if np.size(K) else 1
                ex = ex & ((kk & (kk - 1)) == 0)
            exact = ex
    elif structure_exact:
        exact = np.ones(ay.shape, dtype=bool)
    return BoundsBlock(tau_det, tau_prb, sigma, terms, exact=exact, contract=contract, contract_reason=reason)


# --------------------------------------------------------------------------- softmax family


def _trans_eps(r: PrecisionRecipe, arg: np.ndarray) -> np.ndarray:
    m = r.transcendental_model
    return m.rel + m.rel_per_abs_x * np.abs(arg)


def _softmax_common(b: OracleBlock, ctx: RuleContext):
    r = ctx.recipe
    acc = r.acc_format
    u = acc.u
    N = b.aux["n"]
    d = b.aux["absd"]
    arg = d if r.max_subtraction else b.aux["absx"]
    eps_exp = _trans_eps(r, arg)
    argmax = b.aux["absd_rowmax"] if r.max_subtraction else np.maximum(b.aux["absx"], 0.0)
    eps_z = _trans_eps(r, argmax)
    contract = None
    reason = None
    if not r.max_subtraction:
        ln_max = math.log(acc.max)
        ln_tiny = math.log(acc.tiny)
        xmax = b.aux["xmax"]
        with np.errstate(invalid="ignore"):
            bad = (xmax > ln_max) | (xmax < ln_tiny)
        if bad.any():
            contract = bad
            reason = (f"the recipe declares softmax without max-subtraction, but some rows have max logit "
                      f"outside [{ln_tiny:.1f}, {ln_max:.2f}] where exp overflows/underflows {acc.name}")
    u_sub = u if r.max_subtraction else 0.0
    relz_det = gamma(np.maximum(N - 1, 0), u) + eps_z
    relz_prb = prob_coeff(np.maximum(N - 1, 0), u, r.lam) + eps_z
    relz_sig = u / 3.0 * np.sqrt(np.maximum(N - 1, 0)) + eps_z / math.sqrt(3.0)
    return eps_exp, u_sub, d, relz_det, relz_prb, relz_sig, contract, reason, N


def rule_softmax(b: OracleBlock, ctx: RuleContext) -> BoundsBlock:
    """``τ_i = y_i(u_out + ε_exp + u·|x_i−m| + relerr(Z) + 2u) + η`` (research note §4.6)."""
    r = ctx.recipe
    u = r.acc_format.u
    u_out, tiny_out, vf = _out_terms(r)
    eps_exp, u_sub, d, relz_det, relz_prb, relz_sig, contract, reason, N = _softmax_common(b, ctx)
    ay = np.abs(b.y)
    eta = tiny_out + N * r.acc_format.tiny
    local = eps_exp + u_sub * d + 2.0 * u
    tau_det = ay * (u_out + (1 + u_out) * (local + relz_det)) + eta
    tau_prb = ay * (u_out + (1 + u_out) * (local + relz_prb)) + eta
    sig = ay * np.sqrt(vf * u_out**2 / 3 + (eps_exp**2 + (u_sub * d) ** 2 + 2 * u * u) / 3 + relz_sig**2) + eta / 3
    terms = {
        "output rounding": u_out * ay,
        "exp error": ay * eps_exp,
        "max-subtraction rounding": ay * u_sub * d,
        "normaliser sum": ay * relz_det,
        "underflow floor": eta + 0 * ay,
    }
    return BoundsBlock(tau_det, np.minimum(tau_prb, tau_det), sig, terms, contract=contract, contract_reason=reason)


def rule_log_softmax(b: OracleBlock, ctx: RuleContext) -> BoundsBlock:
    """Absolute: ``u|x_i−m| + relerr(Z) + (ε_log+u)|log Z| + (u + u_out)|y_i| + η``."""
    r = ctx.recipe
    u = r.acc_format.u
    u_out, tiny_out, vf = _out_terms(r)
    _, u_sub, d, relz_det, relz_prb, relz_sig, contract, reason, N = _softmax_common(b, ctx)
    ay = np.abs(b.y)
    logz = b.aux["logz"]
    eps_log = r.transcendental_model.rel
    base = u_sub * d + (eps_log + u) * logz + u * ay
    eta = tiny_out + N * r.acc_format.tiny
    tau_det = u_out * ay + (1 + u_out) * (base + relz_det) + eta
    tau_prb = u_out * ay + (1 + u_out) * (base + relz_prb) + eta
    sig = np.sqrt(vf * (u_out * ay) ** 2 / 3 + base**2 / 3 + relz_sig**2) + eta / 3
    terms = {"output rounding": u_out * ay, "subtraction/log": base, "normaliser sum": relz_det + 0 * ay}
    return BoundsBlock(tau_det, np.minimum(tau_prb, tau_det), sig, terms, contract=contract, contract_reason=reason)


# --------------------------------------------------------------------------- normalisation


def _norm_bound(b: OracleBlock, ctx: RuleContext, c: np.ndarray | float, ur: float, rms: bool) -> dict[str, np.ndarray]:
    """One evaluation of the layernorm/rmsnorm error formula for accumulation coefficient
    ``c`` and per-rounding unit ``ur`` (u for bounds, u/√3 for the expected error)."""
    r = ctx.recipe
    a = b.aux
    eps = a["eps"]
    var = a["var"]
    eps_rsqrt = r.transcendental_model.rel
    g = a["gamma"]
    ay = np.abs(b.y)
    with np.errstate(divide="ignore", invalid="ignore"):
        if rms:
            rel_ms = c + 2 * ur
            rel_v = rel_ms * var / (var + eps)
            rel_rstd = 0.5 * rel_v + eps_rsqrt + ur
            core = ay * (rel_rstd + 2 * ur)
            return {"normalisation": core, "mean": 0 * ay}
        mean_abs, mean_sq, mu = a["mean_abs"], a["mean_sq"], a["mu"]
        dmu = (c + ur) * mean_abs
        if r.variance == "one_pass":
            abs_var_err = (c + 2 * ur) * mean_sq + 2 * mu * dmu + ur * mu * mu + ur * var
        else:
            abs_var_err = (c + 4 * ur) * var + dmu * dmu
        rel_v = abs_var_err / (var + eps)
        rel_rstd = 0.5 * rel_v + eps_rsqrt + ur
        xhat = a["xhat"]
        rstd = a["rstd"]
        dx = xhat * (rel_rstd + ur) + (dmu + ur * a["absdev"]) * rstd
        core = g * dx + ur * g * xhat + (ur * ay if a["has_beta"] else 0 * ay)
        return {"variance/rstd": g * xhat * (rel_rstd + ur), "mean": g * (dmu + ur * a["absdev"]) * rstd,
                "normalisation": core}


_WELFORD_CHUNK = 512  # bn_stats processes at most 512 elements per partition (nki.isa)


def _rule_norm(rms: bool):
    def rule(b: OracleBlock, ctx: RuleContext) -> BoundsBlock:
        r = ctx.recipe
        u = r.acc_format.u
        N = float(b.k or 1)
        u_out, tiny_out, vf = _out_terms(r)
        ay = np.abs(b.y)
        n_eff = N
        if r.variance == "welford" and N > _WELFORD_CHUNK:
            # chunks of ≤ 512 summed, then merged: each term sees ≤ 512 + N/512 − 1 roundings
            n_eff = _WELFORD_CHUNK + math.ceil(N / _WELFORD_CHUNK) - 1
        det = _norm_bound(b, ctx, gamma(n_eff, u), u, rms)
        prb = _norm_bound(b, ctx, prob_coeff(n_eff, u, r.lam), u, rms)
        sig = _norm_bound(b, ctx, u * math.sqrt(N) / 3.0, u / math.sqrt(3.0), rms)
        eta = tiny_out + N * r.acc_format.tiny
        tau_det = u_out * ay + (1 + u_out) * det["normalisation"] + eta
        tau_prb = u_out * ay + (1 + u_out) * prb["normalisation"] + eta
        sigma = np.sqrt(vf * (u_out * ay) ** 2 / 3 + sig["normalisation"] ** 2) + eta / 3
        terms = {"output rounding": u_out * ay, **{k: v for k, v in det.items() if k != "normalisation"}}
        contract = None
        reason = None
        acc = r.acc_format
        if acc.kind == "float":
            with np.errstate(invalid="ignore", over="ignore"):
                over = np.isfinite(b.aux["mean_sq"]) & (b.aux["mean_sq"] * N > acc.max / 2)
            if over.any():
                contract = over
                reason = f"Σx² of a row overflows the declared {acc.name} accumulator"
        rng = r.transcendental_model.valid_ranges.get("rsqrt")
        if rng is not None:
            v = b.aux["var"] + b.aux["eps"]
            bad = (v < rng[0]) | (v > rng[1])
            if bad.any():
                contract = bad if contract is None else (contract | bad)
                reason = f"variance+eps outside the rsqrt valid range [{rng[0]:g}, {rng[1]:g}]"
        return BoundsBlock(tau_det, np.minimum(tau_prb, tau_det), sigma, terms, contract=contract,
                           contract_reason=reason)

    return rule


# --------------------------------------------------------------------------- elementwise


def rule_unary(b: OracleBlock, ctx: RuleContext) -> BoundsBlock:
    """``u_out|y| + (ε_f(x)|y| + floor) + ε_in·|x f'(x)| + n_ops·u·S_e + η`` per element."""
    r = ctx.recipe
    name = ctx.activation or ""
    act = ACTIVATIONS[name]
    u_out, tiny_out, vf = _out_terms(r)
    y = b.y
    ay = np.abs(y)
    if act.exact:
        z = np.zeros_like(ay)
        return BoundsBlock(z, z, None, {}, exact=np.ones(ay.shape, dtype=bool))
    u = r.acc_format.u
    x = b.aux["x"]
    cond = np.nan_to_num(b.aux["cond"], nan=0.0, posinf=0.0)
    inter = np.nan_to_num(b.aux["inter"], nan=0.0, posinf=0.0)
    model = r.transcendental_model
    if act.transcendental:
        t_f = _trans_eps(r, x) * ay + model.floor * act.zero_scale
    else:
        t_f = np.zeros_like(ay)
    # the kernel's input is exact; only a declared coarser compute dtype rounds the argument
    # (an implementation's own argument reduction belongs to its transcendental budget)
    t_cond = ctx.eps_in * cond
    t_ops = act.n_ops * u * inter
    eta = tiny_out + r.acc_format.tiny * (1 + act.n_ops)
    tau = u_out * ay + (1 + u_out) * (t_f + t_cond + t_ops) + eta
    sig = np.sqrt(vf * (u_out * ay) ** 2 / 3 + (t_f**2 + t_cond**2 + t_ops**2) / 3) + eta / 3
    terms = {"output rounding": u_out * ay, "function approximation": t_f, "argument conditioning": t_cond,
             "intermediate roundings": t_ops}
    contract = None
    reason = None
    rng = model.valid_ranges.get(name) if act.transcendental else None
    if rng is not None:
        xx = np.abs(x) if name == "reciprocal" else x
        with np.errstate(invalid="ignore"):
            bad = np.isfinite(x) & ((xx < rng[0]) | (xx > rng[1]))
        if bad.any():
            contract = bad
            reason = (f"{name} inputs outside the {model.name} valid range [{rng[0]:g}, {rng[1]:g}] "
                      "(the engine is documented to return invalid results there)")
    return BoundsBlock(tau, tau, sig, terms, contract=contract, contract_reason=reason)


def rule_binary(b: OracleBlock, ctx: RuleContext) -> BoundsBlock:
    """add/sub: ``u(|a|+|b|)``; mul/div: ``u|y|``; max/min exact."""
    r = ctx.recipe
    u_out, tiny_out, vf = _out_terms(r)
    ay = np.abs(b.y)
    if b.aux.get("exact"):
        z = np.zeros_like(ay)
        return BoundsBlock(z, z, None, {}, exact=np.ones(ay.shape, dtype=bool))
    acc = r.acc_format
    if acc.kind == "int":  # integer arithmetic in range is exact
        z = np.zeros_like(ay)
        bad = (r.out_format.kind == "int") & (ay > r.out_format.max)
        return BoundsBlock(z, z, None, {}, exact=np.ones(ay.shape, dtype=bool),
                           contract=bad if bad.any() else None,
                           contract_reason="integer result outside the output range" if bad.any() else None)
    inter = b.aux["inter"]
    t = (acc.u + ctx.eps_in) * inter
    eta = tiny_out + acc.tiny
    tau = u_out * ay + (1 + u_out) * t + eta
    sig = np.sqrt(vf * (u_out * ay) ** 2 / 3 + t * t / 3) + eta / 3
    exact = None
    grid = ctx.facts.get("grid")
    if grid is not None and ctx.operands_exact_in_compute and acc.kind == "float" and 2.0**grid >= acc.subnormal:
        exact = inter <= 2.0 ** (acc.p + grid)
    return BoundsBlock(tau, tau, sig, {"output rounding": u_out * ay, "operation rounding": t}, exact=exact)


# --------------------------------------------------------------------------- quantisation


def rule_quantize(b: OracleBlock, ctx: RuleContext) -> BoundsBlock:
    """Codes must match bitwise, except where the kernel's fp32 ``x/scale`` (or
    ``x·(1/scale)``, two roundings) can land across an output rounding boundary; there
    either neighbour is accepted. Under SR both neighbours are always accepted."""
    r = ctx.recipe
    v = b.y
    lo, hi = _fl_out_neighbours(v, r)
    u = r.acc_format.u
    mid = 0.5 * (lo + hi)
    with np.errstate(invalid="ignore"):
        near = (lo != hi) & (np.abs(v - mid) <= 3.0 * u * np.abs(v) + r.acc_format.tiny)
    if r.rounding == "sr":
        near = lo != hi
    z = np.zeros_like(v)
    return BoundsBlock(z, z, None, {}, exact=np.ones(v.shape, dtype=bool),
                       allowed_lo=np.where(near, lo, np.nan), allowed_hi=np.where(near, hi, np.nan))


def rule_dequantize(b: OracleBlock, ctx: RuleContext) -> BoundsBlock:
    """``y = q·scale`` is exact in float64; the kernel rounds once in the accumulate dtype
    (exact when the product fits) and once to the output."""
    r = ctx.recipe
    u_out, tiny_out, vf = _out_terms(r)
    ay = np.abs(b.y)
    acc = r.acc_format
    fits = round_to(b.y, acc) == b.y
    t = np.where(fits, 0.0, acc.u * ay)
    eta = tiny_out
    tau = u_out * ay + (1 + u_out) * t + eta
    sig = np.sqrt(vf * (u_out * ay) ** 2 / 3 + t * t / 3) + eta / 3
    return BoundsBlock(tau, tau, sig, {"output rounding": u_out * ay, "product rounding": t}, exact=fits)


def rule_generic(b: OracleBlock, ctx: RuleContext) -> BoundsBlock:
    """Unknown op with a declared K: the contraction bound with ``S`` from the oracle's
    magnitude estimate; no expected-error model (the z-score gate is skipped)."""
    r = ctx.recipe
    u_out, tiny_out, _ = _out_terms(r)
    ay = np.abs(b.y)
    S = b.scale if b.scale is not None else ay
    K = float(b.k or 1)
    u = _acc_u(r)
    eps = ctx.eps_in + u  # products assumed inexact
    t_acc = (1 + u_out) * gamma(K, u) * S
    t_in = (1 + u_out) * eps * S
    eta = K * r.acc_format.tiny + tiny_out
    tau_det = u_out * ay + t_acc + t_in + eta
    tau_prb = u_out * ay + (1 + u_out) * prob_coeff(K, u, r.lam) * S + t_in + eta
    return BoundsBlock(tau_det, np.minimum(tau_prb, tau_det), None,
                       {"output rounding": u_out * ay, "accumulation": t_acc, "input/product rounding": t_in})


RULES: dict[str, Callable[[OracleBlock, RuleContext], BoundsBlock]] = {
    "contraction": rule_contraction,
    "scan": rule_contraction,
    "softmax": rule_softmax,
    "log_softmax": rule_log_softmax,
    "layernorm": _rule_norm(False),
    "rmsnorm": _rule_norm(True),
    "unary": rule_unary,
    "binary": rule_binary,
    "quantize": rule_quantize,
    "dequantize": rule_dequantize,
    "generic": rule_generic,
}


def worked_example(k: int = 4096, inputs: str = "bf16", acc: str = "fp32", out: str = "bf16",
                   y: float = 43.0, s: float = 2608.0, lam: float = 6.0) -> dict[str, float]:
    """The research note's worked numbers for one element (median |y| and S of N(0,1) data
    at K = 4096): output-rounding, probabilistic and worst-case accumulation terms."""

    ua, uo = get_format(acc).u, get_format(out).u
    return {
        "output_rounding": uo * y,
        "acc_prb": float(prob_coeff(k - 1, ua, lam)) * s,
        "acc_det": float(gamma(k - 1, ua)) * s,
        "tau_prb": uo * y + (1 + uo) * float(prob_coeff(k - 1, ua, lam)) * s,
        "tau_det": uo * y + (1 + uo) * float(gamma(k - 1, ua)) * s,
        "tf32_inputs": 2 * get_format("tf32").u * s,
    }
