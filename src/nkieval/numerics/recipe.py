"""Precision recipes: the declared numerics of a kernel, which a verdict is judged against.

Why declare rather than infer: a kernel that silently uses TF32 inputs, bf16 accumulation or
a bf16 output can stay inside a loose tolerance. The standard therefore judges every output
against *what the kernel says it does* (research note §4.1), and refuses a kernel whose
errors are statistically inconsistent with that declaration. Tasks declare recipes in TOML,
so :meth:`PrecisionRecipe.from_dict` validates every key and dtype and names close matches.

Example (TOML)::

    [numerics]
    inputs = ["bf16", "bf16"]
    accumulate = "fp32"
    output = "bf16"
    accumulation = "psum_fp32_k128"
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .formats import Format, get_format

__all__ = [
    "ACCUMULATION_STRUCTURES",
    "TRANSCENDENTALS",
    "PrecisionRecipe",
    "RecipeError",
    "TranscendentalModel",
]


class RecipeError(ValueError):
    """An invalid recipe field (unknown key, dtype, structure or value)."""


# One table of accumulation structures. Each entry says what the structure means and how it
# changes the bound; the hard bound γ_K holds for *every* order, so most entries only
# document; the ones with ``psum_rounds`` add a per-K-tile rounding of the running sum.
ACCUMULATION_STRUCTURES: dict[str, dict[str, Any]] = {
    "any": {"doc": "any summation order in the accumulate dtype (the bound covers all orders)"},
    "sequential": {"doc": "one running sum over K"},
    "pairwise": {"doc": "pairwise (tree) summation, as NumPy and many BLAS reductions"},
    "psum_fp32_k128": {
        "doc": "Trainium: fp32 accumulation inside each 128-row K tile on the PE array, "
        "fp32 PSUM accumulation across tiles"
    },
    "bf16_psum_rne": {
        "doc": "Trainium gen4: fp32 inside each K tile, PSUM stored as bf16, rounded to "
        "nearest-even after every K tile",
        "psum_rounds": "bf16",
        "psum_sr": False,
    },
    "bf16_psum_sr": {
        "doc": "Trainium gen4: as bf16_psum_rne with stochastic rounding of each PSUM write",
        "psum_rounds": "bf16",
        "psum_sr": True,
    },
    "split_k": {"doc": "GPU split-K: K partitions reduced separately, then combined"},
    "atomic": {"doc": "GPU atomics: partial sums added in a run-dependent order"},
    "tensor_core_fp32": {"doc": "GPU tensor cores: fp32 accumulation of small K chunks"},
    "fp8_fast_accum": {
        "doc": "GPU FP8 'fast accumulation': a ~14-bit truncating accumulator without "
        "promotion (DeepSeek-V3 §3.3); modelled as accumulating with u = 2^-13. Truncation is "
        "biased, so the √K probabilistic bound does not apply (errors grow like K)",
        "acc_u": 2.0**-13,
        "biased": True,
    },
    "fp8_fast_accum_promote128": {
        "doc": "FP8 limited-precision accumulator promoted to fp32 every 128 products",
        "acc_u": 2.0**-13,
        "promote": 128,
        "biased": True,
    },
    "exact": {"doc": "exact (integer) accumulation: every order gives the same result"},
}


@dataclass(frozen=True)
class TranscendentalModel:
    """Error budget of one implementation of transcendental functions.

    The per-element allowance is ``(rel + rel_per_abs_x·|x|)·max(|f(x)|, floor·zero_scale)``
    where ``zero_scale`` is a per-function magnitude near its zeros (sin, cos, log). Ranges
    are the inputs outside which the implementation is documented to be invalid (Neuron
    ScalarE, nki.api.shared); elements outside make the case out of contract.
    """

    name: str
    rel: float
    rel_per_abs_x: float = 0.0
    floor: float = 0.0
    valid_ranges: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    doc: str = ""


_SCALARE_RANGES = {
    "log": (2.0**-64, 2.0**64),
    "sin": (-math.pi, math.pi),
    "cos": (-math.pi, math.pi),
    "sqrt": (2.0**-116, 2.0**118),
    "rsqrt": (2.0**-87, 2.0**97),
    "reciprocal": (2.0**-42, 2.0**42),  # magnitude range, either sign
}

TRANSCENDENTALS: dict[str, TranscendentalModel] = {
    m.name: m
    for m in [
        TranscendentalModel("correctly_rounded", 0.0, doc="exact function value, rounded once"),
        TranscendentalModel(
            "libm", 2.0**-21,
            doc="fp32 libm class (NumPy float32 exp measured at 1.93 ulp; budget 4 ulp = 2^-21)",
        ),
        TranscendentalModel(
            "scalar_engine", 2.0**-12, floor=2.0**-12, valid_ranges=_SCALARE_RANGES,
            doc="Neuron ScalarE piece-wise polynomials: no published error; provisional "
            "2^-12 relative (research note §4.6) until calibrated on hardware",
        ),
        TranscendentalModel(
            "cuda_fast_math", 2.0 * 2.0**-23, rel_per_abs_x=1.173 * 2.0**-23,
            doc="CUDA -use_fast_math: __expf is 2 + floor(1.173|x|) ulp (CUDA C guide)",
        ),
    ]
}

Rounding = Literal["rne", "sr"]
Variance = Literal["two_pass", "welford", "one_pass"]
Overflow = Literal["ieee", "saturate"]
_PLATFORMS = (None, "cpu", "gpu", "trn1", "trn2", "trn3")


def _canon_dtype(value: Any, what: str) -> str:
    try:
        return get_format(value).name
    except ValueError as exc:
        raise RecipeError(f"{what}: {exc}") from exc


@dataclass(frozen=True, kw_only=True)
class PrecisionRecipe:
    """Declared numerics of one kernel (or one test case).

    Attributes:
        inputs: storage dtype of each operand, in op order (``("bf16", "bf16")`` for a
            matmul). A single name applies to every operand. If an input array is finer than
            declared (fp32 data, bf16 declared), the oracle rounds it first: that
            quantisation is part of the declared algorithm, not kernel error.
        compute: dtype the engine consumes operands in, when coarser than their storage
            (``"tf32"`` for fp32 operands fed to TF32 matmul, ``"bf16"`` for auto-cast).
            ``None``: operands are used as stored. Adds ``u_compute`` per operand to the
            bound, because hardware TF32 rounding (RNE or truncation) is undocumented.
        accumulate: accumulator dtype (``fp32`` on every TensorE/PSUM path).
        output: dtype the result is rounded to.
        k: declared contraction/reduction length; ``None`` derives it from the shapes.
            Required by the generic path (reference function, unknown op class).
        accumulation: structure, a key of :data:`ACCUMULATION_STRUCTURES`.
        tile_k: K-tile height for tiled structures (128 rows of the PE array).
        rounding: ``"rne"`` or ``"sr"`` (stochastic rounding of outputs and PSUM writes).
        scales: per-tensor dequantisation scales of the operands (FP8), multiplied in.
        transcendental: implementation of exp/tanh/..., a key of :data:`TRANSCENDENTALS`.
        variance: variance algorithm of layernorm: ``two_pass`` (mean, then mean of squared
            deviations, any summation order), ``welford`` (chunks of ≤ 512 merged, as
            bn_stats/bn_aggr: the blocked constant γ_{512+N/512−1} applies), ``one_pass``
            (E[x²]−E[x]², whose budget grows with μ²/σ²).
        max_subtraction: whether softmax subtracts the row max before exp.
        overflow: what the kernel does past the output format's max: ``"ieee"`` (inf, or NaN
            for formats without inf) or ``"saturate"`` (±max).
        platform: optional target (``trn1/trn2/trn3/gpu/cpu``) for the special-value table.
        lam: λ of the probabilistic bound ``λ√K·u`` (8: ~1e-10 failure odds per element).
        name: free label shown in reports.
    """

    inputs: tuple[str, ...] = ("fp32",)
    compute: str | None = None
    accumulate: str = "fp32"
    output: str = "fp32"
    k: int | None = None
    accumulation: str = "any"
    tile_k: int = 128
    rounding: Rounding = "rne"
    scales: tuple[float, ...] = ()
    transcendental: str = "libm"
    variance: Variance = "two_pass"
    max_subtraction: bool = True
    overflow: Overflow = "ieee"
    platform: str | None = None
    lam: float = 8.0
    name: str | None = None

    def __post_init__(self) -> None:
        ins = self.inputs
        if isinstance(ins, str):
            ins = (ins,)
        try:
            ins = tuple(ins)
        except TypeError as exc:
            raise RecipeError(f"inputs must be a dtype name or a list of them, got {self.inputs!r}") from exc
        if not ins:
            raise RecipeError("inputs must name at least one dtype")
        object.__setattr__(self, "inputs", tuple(_canon_dtype(x, "inputs") for x in ins))
        if self.compute is not None:
            object.__setattr__(self, "compute", _canon_dtype(self.compute, "compute"))
        object.__setattr__(self, "accumulate", _canon_dtype(self.accumulate, "accumulate"))
        object.__setattr__(self, "output", _canon_dtype(self.output, "output"))
        if self.accumulation not in ACCUMULATION_STRUCTURES:
            close = difflib.get_close_matches(self.accumulation, list(ACCUMULATION_STRUCTURES), n=2)
            hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
            raise RecipeError(
                f"unknown accumulation structure {self.accumulation!r}{hint} "
                f"Known: {', '.join(ACCUMULATION_STRUCTURES)}"
            )
        if self.transcendental not in TRANSCENDENTALS:
            raise RecipeError(
                f"unknown transcendental implementation {self.transcendental!r}; "
                f"known: {', '.join(TRANSCENDENTALS)}"
            )
        for fld, allowed in (("rounding", ("rne", "sr")), ("variance", ("two_pass", "welford", "one_pass")),
                             ("overflow", ("ieee", "saturate"))):
            if getattr(self, fld) not in allowed:
                raise RecipeError(f"{fld} must be one of {allowed}, got {getattr(self, fld)!r}")
        if self.platform not in _PLATFORMS:
            raise RecipeError(f"platform must be one of {_PLATFORMS[1:]} or None, got {self.platform!r}")
        if self.k is not None and (not isinstance(self.k, int) or self.k < 1):
            raise RecipeError(f"k must be a positive integer, got {self.k!r}")
        if not isinstance(self.tile_k, int) or self.tile_k < 1:
            raise RecipeError(f"tile_k must be a positive integer, got {self.tile_k!r}")
        if not (isinstance(self.lam, int | float) and self.lam > 0):
            raise RecipeError(f"lam must be positive, got {self.lam!r}")
        scales = self.scales
        if isinstance(scales, int | float):
            scales = (scales,)
        try:
            scales = tuple(float(s) for s in scales)
        except (TypeError, ValueError) as exc:
            raise RecipeError(f"scales must be numbers, got {self.scales!r}") from exc
        if any(not math.isfinite(s) or s == 0 for s in scales):
            raise RecipeError(f"scales must be finite and non-zero, got {scales}")
        object.__setattr__(self, "scales", scales)
        object.__setattr__(self, "max_subtraction", bool(self.max_subtraction))
        object.__setattr__(self, "lam", float(self.lam))

    # ------------------------------------------------------------------ formats

    def input_format(self, i: int) -> Format:
        """Declared storage format of operand ``i`` (the last entry repeats)."""
        return get_format(self.inputs[min(i, len(self.inputs) - 1)])

    @property
    def acc_format(self) -> Format:
        return get_format(self.accumulate)

    @property
    def out_format(self) -> Format:
        return get_format(self.output)

    @property
    def compute_format(self) -> Format | None:
        return None if self.compute is None else get_format(self.compute)

    @property
    def transcendental_model(self) -> TranscendentalModel:
        return TRANSCENDENTALS[self.transcendental]

    @property
    def structure(self) -> dict[str, Any]:
        return ACCUMULATION_STRUCTURES[self.accumulation]

    def replace(self, **changes: Any) -> PrecisionRecipe:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def describe(self) -> str:
        """One line such as ``bf16×bf16 → fp32 acc (psum_fp32_k128) → bf16, RNE``."""
        ins = "×".join(self.inputs)
        comp = f" as {self.compute}" if self.compute else ""
        acc = f"{self.accumulate} acc" + (f" ({self.accumulation})" if self.accumulation != "any" else "")
        extra = []
        if self.scales:
            extra.append("scales " + ",".join(f"{s:g}" for s in self.scales))
        if self.transcendental != "libm":
            extra.append(f"transcendentals: {self.transcendental}")
        if self.variance != "two_pass":
            extra.append(f"variance: {self.variance}")
        if not self.max_subtraction:
            extra.append("no max-subtraction")
        tail = ("; " + "; ".join(extra)) if extra else ""
        return f"{ins}{comp} → {acc} → {self.output}, {self.rounding.upper()}{tail}"

    # ------------------------------------------------------------------ serialisation

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (lists, no None values) that TOML and JSON can hold."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if v is None:
                continue
            out[f.name] = list(v) if isinstance(v, tuple) else v
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PrecisionRecipe:
        """Build from a TOML/JSON table, rejecting unknown keys by name.

        Raises:
            RecipeError: unknown key (with the closest valid key), unknown dtype, unknown
                structure, or an out-of-range value.
        """
        if not isinstance(data, Mapping):
            raise RecipeError(f"a recipe must be a table/dict, got {type(data).__name__}")
        names = [f.name for f in dataclasses.fields(cls)]
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            if key not in names:
                close = difflib.get_close_matches(str(key), names, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise RecipeError(f"unknown recipe key {key!r}{hint} Valid keys: {', '.join(names)}")
            if key in ("inputs", "scales") and isinstance(value, list):
                value = tuple(value)
            kwargs[key] = value
        return cls(**kwargs)
