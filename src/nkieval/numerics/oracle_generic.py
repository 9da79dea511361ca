"""The oracle of an op known only by a float64 reference function: magnitudes from ``|inputs|`` for
multilinear functions, else from random-sign perturbation draws (see :func:`generic_op`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .opspec import (
    FLOAT64,
    OpSpec,
    OracleBlock,
    Prepared,
    Variant,
    _f64,
    _format_or_none,
)
from .recipe import PrecisionRecipe

# --------------------------------------------------------------------------- generic


#: Perturbation draws of the generic path's magnitude estimate, the draws judged before
#: deciding whether the rest are needed, and the G7 witness inflation (see :func:`generic_op`).
GENERIC_DRAWS = 16
GENERIC_EARLY_DRAWS = 4
GENERIC_WITNESS_FACTOR = 16.0


def generic_op(fn: Callable[..., np.ndarray], *, k: int | None = None, multilinear: bool = True,
               name: str = "generic", early: bool = True, variants: Sequence[Variant] = ()) -> OpSpec:
    """Wrap a float64 reference function whose op class is unknown.

    The bound needs a magnitude scale ``S`` per output. For ``multilinear=True`` (sums of
    products with non-negative coefficients: matmul, conv, einsum, pooling, sums) evaluating
    ``fn`` on ``|inputs|`` gives ``S = Σ|terms|`` exactly. Otherwise ``S`` is estimated by
    random-sign perturbation: 16 draws of relative perturbations give ``‖∂f/∂x ∘ x‖₂`` per
    output, and Cauchy–Schwarz over the declared ``K`` contributions turns it into
    ``√K·‖·‖₂ ≥ Σ|∂f/∂x_i·x_i|`` (times 2 for the sampling error of 16 draws). ``K`` comes
    from the recipe or ``k=``.

    Sequential draws (each draw is one more evaluation of ``fn``, the whole cost of the path):
    ``S₁₆ = 2√K·sqrt(Σ_(r≤16) d_r²/16)``. After the first :data:`GENERIC_EARLY_DRAWS` draws,
    ``S_lo = 2√K·sqrt(Σ_(r≤4) d_r²/16)`` is a *deterministic lower bound* of ``S₁₆`` (the
    remaining ``d_r²`` are ≥ 0, and every floating-point step is monotone). Every bound is
    non-decreasing in ``S``, so an output whose every element passes G2/G3 under ``S_lo``
    passes them under ``S₁₆``: :func:`~nkieval.numerics.gates.check` judges with ``S_lo``
    first and calls ``refine()`` (the remaining 12 draws, the same random stream, so
    ``S₁₆`` is bit-for-bit the single-pass value) whenever that is not a pass, so a fail is
    only ever declared under ``S₁₆``. The only gate that moves the other way is G7 (a
    smaller ``S`` makes "an all-zeros output would pass" *less* likely); before accepting
    early, ``check`` requires a G7 witness under ``witness_scale``: ``16·S₄`` with ``S₄ =
    2√K·sqrt(Σ_(r≤4) d_r²/4)``, elements with ``Σ_(r≤4) d_r² = 0`` counting as infinite.
    It could mislead only if ``S₁₆ > 16·S₄`` at the witness element, i.e. the 12 remaining
    draws' ``Σ d_r²`` exceeded 1023 times the first four's: the random signs would have to
    cancel almost exactly in four independent draws (Gaussian limit of the first-order model:
    an F(12, 4) variate above 341, p ≈ 2e-5; lattice cases such as two equal terms, where a
    draw cancels exactly with probability ½, give ``Σ d_r² = 0``, which is never a witness).
    Otherwise the remaining draws are taken.

    ``variants`` are known wrong formulas (:class:`Variant`) that diagnosis tries on a failure.
    """

    def prepare(inputs: list[np.ndarray], params: dict[str, Any], recipe: PrecisionRecipe) -> Prepared:
        kk = k if k is not None else recipe.k
        if kk is None:
            raise ValueError("the generic path needs the contraction/reduction length: pass k= or recipe.k")
        arrs = [_f64(x) for x in inputs]
        # integer operands (indices, counts) are not perturbed: they carry no rounding error
        floaty = [(_format_or_none(np.asarray(x)) or FLOAT64).kind == "float" for x in inputs]
        kwargs = {p: v for p, v in params.items() if p not in ("k", "multilinear")}
        with np.errstate(all="ignore"):
            y = np.asarray(fn(*arrs, **kwargs), dtype=np.float64)
            if multilinear:
                s = np.abs(np.asarray(fn(*[np.abs(a) for a in arrs], **kwargs), dtype=np.float64))
                method = "abs-evaluation (exact for sums of products)"
            else:
                rng = np.random.default_rng(0)
                h = 2.0**-20
                acc = np.zeros_like(y)
                draws = GENERIC_DRAWS

                def draw(n: int) -> None:
                    with np.errstate(all="ignore"):
                        for _ in range(n):
                            # the stream of rng.choice([-1.0, 1.0]): integers(0, 2) picks the
                            # index; (1 - h) + 2h·idx is exactly 1 ± h, the factor 1 + h·(±1)
                            pert = [a * (rng.integers(0, 2, size=a.shape, dtype=np.int64) * (2 * h) + (1 - h))
                                    if fl else a for a, fl in zip(arrs, floaty)]
                            d = (np.asarray(fn(*pert, **kwargs), dtype=np.float64) - y) / h
                            np.add(acc, d * d, out=acc)

                first = min(draws, GENERIC_EARLY_DRAWS) if early else draws
                draw(first)
                c = 2.0 * math.sqrt(kk)
                s = c * np.sqrt(acc / draws)
                method = "random-sign perturbation (first order, ×2 safety)"
        yf = y.ravel()
        state = {"s": np.broadcast_to(s, y.shape).ravel()}

        def evaluate(r0: int, r1: int) -> OracleBlock:
            ys = yf[r0:r1]
            sc = state["s"][r0:r1]
            return OracleBlock(y=ys, scale=sc, sumsq=None, k=kk)

        prep = Prepared(
            spec=spec, out_shape=y.shape, row_len=1, n_rows=int(yf.size), work_per_row=1,
            evaluate=evaluate, inputs=list(inputs), params=params, k=kk,
            facts={"K": kk, "scale_method": method, "operands": len(inputs), "grid": None},
        )
        if not multilinear and first < draws:
            prep.facts["early_draws"] = first
            acc_first = acc.ravel().copy()

            def witness_scale(r0: int, r1: int) -> np.ndarray:
                a = acc_first[r0:r1]
                with np.errstate(divide="ignore"):
                    return np.where(a > 0, GENERIC_WITNESS_FACTOR * c * np.sqrt(a / first), np.inf)

            def refine() -> None:
                draw(draws - first)
                state["s"] = np.broadcast_to(c * np.sqrt(acc / draws), y.shape).ravel()
                prep.refine = prep.witness_scale = None

            prep.refine, prep.witness_scale = refine, witness_scale
        return prep

    spec = OpSpec(name=name, kind="generic", input_names=(), prepare=prepare, n_required=0, n_data=99,
                  doc=f"reference function {getattr(fn, '__name__', 'fn')} with declared K",
                  variants=tuple(variants))
    return spec
