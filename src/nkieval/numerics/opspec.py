"""The oracle's vocabulary: an op class (:class:`OpSpec`) and its registry, what a prepared op yields
(:class:`Prepared`, :class:`OracleBlock`), known wrong formulas (:class:`Variant`), and the helpers every op
family shares (exactness of inputs in a format, power-of-two grids, declared input rounding)."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .formats import FORMATS, Format, format_of, representable, round_to
from .recipe import PrecisionRecipe

FLOAT64 = FORMATS["fp64"]


class UnknownOpError(ValueError):
    """An op name that is not registered (message lists close matches)."""


@dataclass
class OracleBlock:
    """Oracle values for a contiguous run of flattened output elements.

    Attributes:
        y: float64 oracle values (NaN/inf where IEEE semantics give them).
        scale: ``S = Σ|terms|`` per element for contractions/reductions, else None.
        sumsq: ``Q = Σ terms²`` per element, else None.
        k: number of terms per element (int or array).
        aux: op-specific magnitudes used by that op's bound rule.
        subnormal_scale: part of ``S`` contributed by subnormal operands (DAZ allowance).
    """

    y: np.ndarray
    scale: np.ndarray | None = None
    sumsq: np.ndarray | None = None
    k: np.ndarray | int | None = None
    aux: dict[str, Any] = field(default_factory=dict)
    subnormal_scale: np.ndarray | None = None


@dataclass
class Prepared:
    """An op bound to concrete inputs: output geometry plus a block evaluator."""

    spec: OpSpec
    out_shape: tuple[int, ...]
    row_len: int
    n_rows: int
    work_per_row: int
    evaluate: Callable[[int, int], OracleBlock]
    inputs: list[np.ndarray]
    params: dict[str, Any]
    k: int | None = None
    facts: dict[str, Any] = field(default_factory=dict)
    #: Set while the magnitudes ``S`` that ``evaluate`` returns are a provisional *lower bound*
    #: of their final values (generic path, sequential perturbation draws): ``refine()``
    #: completes them (and sets ``refine`` to None); ``witness_scale`` gives, per flattened
    #: element, the inflated magnitude used to decide G7 before they are complete
    #: (see :func:`generic_op`).
    refine: Callable[[], None] | None = None
    witness_scale: Callable[[int, int], np.ndarray] | None = None


@dataclass(frozen=True)
class Variant:
    """A known wrong formula for a reference op: diagnosis names it when it reproduces the output.

    ``fn`` takes the same operands (float64) and params as the reference function. Task authors
    declare the mistakes a kernel author typically makes for *their* op (the tanh GELU where the
    exact one is specified, a missing scale, ...), which the built-in defect models cannot know.
    """

    id: str
    cause: str
    action: str
    fn: Callable[..., np.ndarray]


@dataclass(frozen=True)
class OpSpec:
    """One op class of the standard.

    Attributes:
        name: registry key.
        kind: bound-rule key in :mod:`nkieval.numerics.bounds` (``contraction``, ``scan``,
            ``softmax``, ``log_softmax``, ``layernorm``, ``rmsnorm``, ``unary``, ``binary``,
            ``quantize``, ``dequantize``, ``generic``).
        input_names: operand names, in order (``inputs`` may be a dict keyed by them).
        n_required: how many leading operands are required.
        n_data: how many leading operands a single declared input dtype applies to.
        prepare: binds inputs and params, returns :class:`Prepared`.
        doc: one line for reports.
        confusables: ops commonly written by mistake for this one (diagnosis tries them).
    """

    name: str
    kind: str
    input_names: tuple[str, ...]
    prepare: Callable[..., Prepared]
    n_required: int = 1
    n_data: int = 1
    doc: str = ""
    confusables: tuple[str, ...] = ()
    defaults: Mapping[str, Any] = field(default_factory=dict)
    #: known wrong formulas of a reference (generic) op, tried by diagnosis
    variants: tuple[Variant, ...] = ()


OPS: dict[str, OpSpec] = {}
_ALIASES: dict[str, str] = {}


def _register(spec: OpSpec, *aliases: str) -> OpSpec:
    OPS[spec.name] = spec
    for a in aliases:
        _ALIASES[a] = spec.name
    return spec


def get_op(op: str | OpSpec) -> OpSpec:
    """Resolve an op name or alias.

    Raises:
        UnknownOpError: naming the closest registered ops.
    """
    if isinstance(op, OpSpec):
        return op
    key = str(op).strip().lower()
    key = _ALIASES.get(key, key)
    if key in OPS:
        return OPS[key]
    close = difflib.get_close_matches(key, list(OPS) + list(_ALIASES), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
    raise UnknownOpError(f"unknown op {op!r}{hint} Known ops: {', '.join(sorted(OPS))}")


# --------------------------------------------------------------------------- helpers


def _f64(x: np.ndarray) -> np.ndarray:
    return np.asarray(x).astype(np.float64, copy=False)


def grid_exponent(x: np.ndarray) -> int | None:
    """Largest ``e`` such that every finite value of ``x`` is an integer multiple of ``2**e``.

    Why: if all operands lie on coarse power-of-two grids and ``S`` is small enough, every
    partial sum is exactly representable in the accumulator, so every summation order gives
    the same, exact result and the standard demands bitwise equality (exact-arithmetic
    suite, research note §4.5). Returns None when there are no finite non-zero values.
    """
    flat = np.asarray(x).reshape(-1)
    best: int | None = None
    if _fits_f32(flat):
        # same result from the fp32 bit pattern (every value of a ≤ 32-bit float format is an
        # fp32 value): lowest set bit of the significand plus the exponent of its last place
        for c0 in range(0, flat.size, 1 << 20):
            b = _f32_bits(flat[c0:c0 + (1 << 20)])
            ex = (b >> np.uint32(23)) & np.uint32(0xFF)
            sig = b & np.uint32(0x7FFFFF)
            normal = ex > 0
            sig[normal] |= np.uint32(0x800000)
            ok = (ex != 0xFF) & (sig != 0)
            if not ok.any():
                continue
            tz = np.bitwise_count((sig & (~sig + np.uint32(1))) - np.uint32(1)).astype(np.int32)
            tz += np.where(normal, ex.astype(np.int32) - 150, np.int32(-149))
            g = int(np.min(tz, where=ok, initial=np.iinfo(np.int32).max))
            best = g if best is None else min(best, g)
        return best
    for c0 in range(0, flat.size, 1 << 20):  # chunked: bounded memory on huge inputs
        v = _f64(flat[c0:c0 + (1 << 20)])
        v = v[np.isfinite(v) & (v != 0)]
        if v.size == 0:
            continue
        m, e = np.frexp(v)
        n = np.abs(m * 2.0**53).astype(np.int64)
        low = n & -n
        tz = np.log2(low.astype(np.float64)).astype(np.int64)
        g = int(np.min(e.astype(np.int64) - 53 + tz))
        best = g if best is None else min(best, g)
    return best


def _row_view(x: np.ndarray, axis: int) -> tuple[np.ndarray, tuple[int, ...]]:
    """Move ``axis`` last and flatten the rest: (rows, length) plus the moved shape."""
    x = np.asarray(x)
    if x.ndim == 0:
        x = x.reshape(1)
    xm = np.moveaxis(x, axis, -1)
    return xm.reshape(-1, xm.shape[-1]), xm.shape


def _check_axis(ndim: int, axis: int) -> int:
    if not -max(ndim, 1) <= axis < max(ndim, 1):
        raise ValueError(f"axis {axis} is out of range for an input with {ndim} dimensions")
    return axis % max(ndim, 1)

def _fits_f32(x: np.ndarray) -> bool:
    """Whether every value of ``x``'s dtype is an fp32 value (fp32, fp16, bf16, fp8)."""
    f = _format_or_none(x)
    return f is not None and f.kind == "float" and x.dtype.itemsize <= 4 and f.name != "tf32"


def _f32_bits(x: np.ndarray) -> np.ndarray:
    """The fp32 bit patterns of a :func:`_fits_f32` array (exact conversion), as a copy."""
    return np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).copy()


def exact_in(fmt: Format, x: np.ndarray) -> bool:
    """Whether every finite value of ``x`` is exactly representable in ``fmt``."""
    flat = np.asarray(x).reshape(-1)
    for c0 in range(0, flat.size, 1 << 20):
        v = _f64(flat[c0:c0 + (1 << 20)])
        v = v[np.isfinite(v)]
        if fmt.kind == "int":
            if not (np.all(v == np.rint(v)) and np.all(np.abs(v) <= fmt.max)):
                return False
        elif not np.all(representable(v, fmt)):
            return False
    return True


def round_inputs(inputs: list[np.ndarray], spec: OpSpec, recipe: PrecisionRecipe) -> tuple[list[np.ndarray], list[str]]:
    """Apply declared input quantisation: arrays finer than their declared dtype are rounded
    (RNE, as the kernel's own cast would) and a note says so."""
    out, notes = [], []
    for i, x in enumerate(inputs):
        if x is None:
            out.append(x)
            continue
        arr = np.asarray(x)
        declared_here = i < len(recipe.inputs) or (len(recipe.inputs) == 1 and i < spec.n_data)
        if not declared_here or arr.dtype == bool:
            out.append(arr)
            continue
        try:
            have = format_of(arr)
        except ValueError:
            out.append(arr)
            continue
        want = recipe.input_format(i)
        if have.kind == "float" and want.kind == "float" and have.name != want.name and not exact_in(want, arr):
            r = round_to(arr, want).astype(want.storage)
            name = spec.input_names[i] if i < len(spec.input_names) else f"#{i}"
            notes.append(f"input {name} ({have.name}) was rounded to the declared {want.name} before evaluation")
            out.append(r)
        else:
            out.append(arr)
    return out, notes


def _format_or_none(x: np.ndarray) -> Format | None:
    try:
        return format_of(x)
    except ValueError:
        return None
