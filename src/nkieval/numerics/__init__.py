"""nkieval.numerics: the cross-platform numerical-correctness standard (GPU vs Trainium).

Why: a fixed ``allclose`` rejects correct kernels (fp32 matmul with K ≥ 1024 under torch's
fp32 defaults, bf16 with cancellation) and accepts wrong ones (silent bf16 output, bf16
accumulation). This package judges a kernel output against a float64 oracle computed on the
kernel's *actual* inputs, under the kernel's *declared* precision recipe, with per-element,
condition-aware bounds that hold for every accumulation order (docs/numerics.md).

The one call the review pipeline makes::

    from nkieval.numerics import check, PrecisionRecipe

    recipe = PrecisionRecipe(inputs=("bf16", "bf16"), accumulate="fp32", output="bf16",
                             accumulation="psum_fp32_k128")
    v = check(out, [a, b], "matmul", recipe, input_family="normal")
    v.status        # "pass" | "fail" | "inconclusive"
    v.margin        # max error/bound (≤ 1 passes)
    v.explanation   # one paragraph for the reviewer
    v.to_dict()     # JSON-safe report

``check(actual, inputs, op, recipe=None, *, reference=None, input_family=None, worst_k=10,
block_elems=2**18, diagnose=True, **op_params) -> Verdict``

* ``actual``: the kernel's output (any NumPy/ml_dtypes dtype able to hold the declared
  output dtype).
* ``inputs``: the arrays the kernel actually consumed, as a list in op order or a dict by
  operand name (``{"a": ..., "b": ...}``). Arrays finer than the declared input dtypes are
  rounded to them first (declared quantisation is not kernel error).
* ``op``: a registered op name (``matmul``, ``sum``, ``mean``, ``cumsum``, ``softmax``,
  ``log_softmax``, ``layernorm``, ``rmsnorm``, activations such as ``exp``/``gelu``/
  ``gelu_tanh``/``silu``, ``add``/``mul``, ``quantize``/``dequantize``; see
  :data:`~nkieval.numerics.oracle.OPS`), an :class:`OpSpec`, or a float64 reference
  *function* for the generic path (then pass ``k=`` or set ``recipe.k``; by default the
  function is treated as a sum of products and ``S`` is obtained by evaluating it on
  ``|inputs|``; ``multilinear=False`` estimates ``S`` by perturbation).
* ``recipe``: :class:`PrecisionRecipe` or a dict (TOML table); ``None`` reads a recipe off
  the array dtypes (fp32 accumulation), which cannot know about TF32, bf16 PSUM or SR.
* ``reference``: optional same-precision reference output (PyTorch/GPU result in the same
  recipe) for the ratio gate G4.
* ``input_family``: name of the input family (:data:`~nkieval.numerics.inputs.FAMILIES`);
  a random family enables the probabilistic-bound and z-score gates (G3, G5).
* ``op_params``: op parameters (``axis``, ``mask``, ``eps``, ``scale_a``/``scale_b``,
  ``divide`` ...).

Other entry points: :func:`expected_disagreement_envelope` and
:func:`attribute_discrepancy` (GPU vs Trainium), the emulations in :mod:`.platforms`,
:func:`check_stochastic_rounding`, the input families in :mod:`.inputs`.

Only NumPy, ml_dtypes and the standard library are imported.
"""

from __future__ import annotations

from .bounds import RULES, gamma, prob_coeff
from .discrepancy import (
    ATTRIBUTION_TABLE,
    DiscrepancyReport,
    Envelope,
    attribute_discrepancy,
    expected_disagreement_envelope,
)
from .formats import FORMATS, Format, UnknownDtypeError, get_format, round_to
from .gates import PreparedCheck, check, check_stochastic_rounding, default_recipe, k_scaling_slope
from .inputs import FAMILIES, generate, is_random_family, matmul_inputs
from .oracle import OPS, OpSpec, UnknownOpError, Variant, evaluate, generic_op, get_op
from .platforms import PRESETS, emulate_matmul, gpu_matmul, trainium_matmul
from .recipe import ACCUMULATION_STRUCTURES, TRANSCENDENTALS, PrecisionRecipe, RecipeError
from .verdict import Finding, GateResult, Metrics, Verdict, WorstElement, mismatch_message

__all__ = [
    "ACCUMULATION_STRUCTURES",
    "ATTRIBUTION_TABLE",
    "FAMILIES",
    "FORMATS",
    "OPS",
    "PRESETS",
    "RULES",
    "TRANSCENDENTALS",
    "DiscrepancyReport",
    "Envelope",
    "Finding",
    "Format",
    "GateResult",
    "Metrics",
    "OpSpec",
    "PrecisionRecipe",
    "PreparedCheck",
    "RecipeError",
    "UnknownDtypeError",
    "UnknownOpError",
    "Variant",
    "Verdict",
    "WorstElement",
    "attribute_discrepancy",
    "check",
    "check_stochastic_rounding",
    "default_recipe",
    "emulate_matmul",
    "evaluate",
    "expected_disagreement_envelope",
    "gamma",
    "generate",
    "generic_op",
    "get_format",
    "get_op",
    "gpu_matmul",
    "is_random_family",
    "k_scaling_slope",
    "matmul_inputs",
    "mismatch_message",
    "prob_coeff",
    "round_to",
    "trainium_matmul",
]
