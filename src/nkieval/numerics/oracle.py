"""Float64 oracle: the exact-enough value of each output, plus the magnitudes its bound needs.

Why float64 on the kernel's *actual* inputs: bf16/fp8/fp16 values and their pairwise
products are exact in float64, so the oracle's own error (≤ γ_K(2^-53)·S, about 4.5e-13·S
at K = 4096) is negligible next to any fp32 budget, and input quantisation is never blamed
on the kernel. Intentional in-kernel quantisation (declared input dtypes coarser than the
arrays, fp8 scales) is emulated exactly before evaluation.

Every op is one :class:`OpSpec` in the :data:`OPS` registry. ``prepare`` returns a
:class:`Prepared` whose ``evaluate(r0, r1)`` yields an :class:`OracleBlock` for rows
``r0..r1`` of the flattened output, so a check streams over 10^7 elements in bounded
memory. Contractions and reductions also carry ``S = Σ|terms|`` (the condition scale of
the element) and ``Q = Σ terms²`` (for the expected-error model).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .opspec import (
    _ALIASES,
    OPS,
    OpSpec,
    OracleBlock,
    Prepared,
    UnknownOpError,
    Variant,
    _register,
    exact_in,
    get_op,
    grid_exponent,
    round_inputs,
)
from .oracle_elementwise import (
    _ACT_ALIASES,
    _BINARY,
    ACTIVATIONS,
    _prepare_binary,
    _prepare_quant,
    _prepare_unary,
)
from .oracle_generic import generic_op
from .oracle_reductions import (
    _prepare_cumsum,
    _prepare_matmul,
    _prepare_norm,
    _prepare_reduce,
    _prepare_softmax,
)
from .recipe import PrecisionRecipe

__all__ = [
    "ACTIVATIONS",
    "OPS",
    "OpSpec",
    "OracleBlock",
    "Prepared",
    "UnknownOpError",
    "Variant",
    "evaluate",
    "exact_in",
    "generic_op",
    "get_op",
    "grid_exponent",
    "round_inputs",
]


# --------------------------------------------------------------------------- registry

_register(OpSpec("matmul", "contraction", ("a", "b", "scale_a", "scale_b"), _prepare_matmul, n_required=2,
                 n_data=2, doc="C = A @ B (batched; 1-D operands as in NumPy)"),
          "dot", "gemm", "mm", "bmm", "nc_matmul", "int_matmul", "fp8_matmul")
_register(OpSpec("sum", "contraction", ("x",), _prepare_reduce("sum"), doc="sum over an axis"),
          "reduce_sum", "int_sum")
_register(OpSpec("mean", "contraction", ("x",), _prepare_reduce("mean"), doc="mean over an axis"))
_register(OpSpec("cumsum", "scan", ("x",), _prepare_cumsum, doc="inclusive prefix sum along the last axis"),
          "prefix_sum")
_register(OpSpec("softmax", "softmax", ("x",), _prepare_softmax(False), doc="softmax over an axis (optional mask)"))
_register(OpSpec("log_softmax", "log_softmax", ("x",), _prepare_softmax(True), doc="log-softmax over an axis"),
          "logsoftmax")
_register(OpSpec("layernorm", "layernorm", ("x", "gamma", "beta"), _prepare_norm("layernorm"), n_data=3,
                 doc="layer normalisation over the last axis"), "layer_norm")
_register(OpSpec("rmsnorm", "rmsnorm", ("x", "gamma"), _prepare_norm("rmsnorm"), n_data=2,
                 doc="RMS normalisation over the last axis"), "rms_norm")
for _name, _act in ACTIVATIONS.items():
    _register(OpSpec(_name, "unary", ("x",), _prepare_unary(_name), doc=f"elementwise {_name}",
                     confusables=_act.confusables))
for _alias, _target in _ACT_ALIASES.items():
    _ALIASES[_alias] = _target
for _name in _BINARY:
    _register(OpSpec(_name, "binary", ("a", "b"), _prepare_binary(_name), n_required=2, n_data=2,
                     doc=f"elementwise {_name}"))
_register(OpSpec("quantize", "quantize", ("x", "scale"), _prepare_quant("quantize"),
                 doc="q = fp8(x / scale), compared code for code"), "quantize_fp8", "fp8_quantize")
_register(OpSpec("dequantize", "dequantize", ("q", "scale"), _prepare_quant("dequantize"),
                 doc="y = q · scale"), "dequantize_fp8", "fp8_dequantize")


def evaluate(op: str | OpSpec, inputs: Sequence[np.ndarray], recipe: PrecisionRecipe | None = None,
             **params: Any) -> np.ndarray:
    """Whole-array float64 oracle of ``op`` on ``inputs`` (convenience for small arrays)."""
    spec = get_op(op)
    recipe = recipe or PrecisionRecipe()
    prep = spec.prepare([np.asarray(x) for x in inputs], {**spec.defaults, **params}, recipe)
    block = prep.evaluate(0, prep.n_rows)
    return block.y.reshape(prep.out_shape)


def _normalise_inputs(inputs: Any, spec: OpSpec, params: dict[str, Any]) -> list[np.ndarray]:
    if isinstance(inputs, np.ndarray) or np.isscalar(inputs):
        arrs: list[Any] = [inputs]
    elif isinstance(inputs, Mapping):
        names = spec.input_names
        unknown = [k for k in inputs if k not in names]
        if unknown and names:
            raise ValueError(f"unknown input name(s) {unknown} for op {spec.name!r}; expected {list(names)}")
        arrs = [inputs.get(n) for n in names] if names else list(inputs.values())
        while arrs and arrs[-1] is None:
            arrs.pop()
    else:
        arrs = list(inputs)
    if len(arrs) < spec.n_required:
        raise ValueError(f"op {spec.name!r} needs {spec.n_required} inputs ({', '.join(spec.input_names[:spec.n_required])}), "
                         f"got {len(arrs)}")
    if spec.name == "matmul" and len(arrs) > 2:
        for name, v in zip(("scale_a", "scale_b"), arrs[2:4]):
            if v is not None:
                params.setdefault(name, v)
        arrs = arrs[:2]
    return [None if a is None else np.asarray(a) for a in arrs]


def _resolve_op(op: Any, params: dict[str, Any]) -> OpSpec:
    if isinstance(op, OpSpec):
        return op
    if callable(op) and not isinstance(op, str):
        return generic_op(op, k=params.pop("k", None), multilinear=params.pop("multilinear", True),
                          variants=params.pop("variants", ()))
    if op == "generic":
        fn = params.pop("fn", None)
        if fn is None:
            raise ValueError("op='generic' needs fn=<float64 reference function>")
        return generic_op(fn, k=params.pop("k", None), multilinear=params.pop("multilinear", True),
                          variants=params.pop("variants", ()))
    return get_op(op)
