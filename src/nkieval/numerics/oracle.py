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

import difflib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .formats import FORMATS, Format, format_of, representable, round_to
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
    "generic_op",
    "get_op",
    "grid_exponent",
]


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


# --------------------------------------------------------------------------- contractions


def _special_contract(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """IEEE special values of ``a @ b`` without trusting BLAS with NaN/inf.

    Uses 0/1 indicator matmuls: an output is NaN if its row of ``a`` or column of ``b``
    holds a NaN, if some term is inf·0, or if it has both +inf and -inf terms.
    """
    an, bn = np.isnan(a), np.isnan(b)
    ai, bi = np.isinf(a), np.isinf(b)

    def any_mm(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return (x.astype(np.float64) @ y.astype(np.float64)) > 0

    ones_a = np.ones_like(a, dtype=bool)
    ones_b = np.ones_like(b, dtype=bool)
    nan = any_mm(an, ones_b) | any_mm(ones_a, bn) | any_mm(ai, b == 0) | any_mm(a == 0, bi)
    with np.errstate(invalid="ignore"):
        pos = (any_mm(ai & (a > 0), b > 0) | any_mm(ai & (a < 0), b < 0)
               | any_mm(a > 0, bi & (b > 0)) | any_mm(a < 0, bi & (b < 0)))
        neg = (any_mm(ai & (a > 0), b < 0) | any_mm(ai & (a < 0), b > 0)
               | any_mm(a > 0, bi & (b < 0)) | any_mm(a < 0, bi & (b > 0)))
    nan = nan | (pos & neg)
    return nan, pos & ~nan, neg & ~nan


def _format_or_none(x: np.ndarray) -> Format | None:
    try:
        return format_of(x)
    except ValueError:
        return None


def _subnormal_part(x: np.ndarray, fmt: Format | None) -> np.ndarray | None:
    """|x| restricted to values subnormal in ``fmt`` (None if there are none): the terms a
    kernel that treats denormal operands as zero (DAZ/FTZ, undocumented on Neuron, default
    under CUDA fast-math) may drop."""
    if fmt is None or fmt.kind != "float":
        return None
    ax = np.abs(x)
    sub = (ax > 0) & (ax < fmt.tiny)
    if not sub.any():
        return None
    return np.where(sub, ax, 0.0)


def _fits_f32(x: np.ndarray) -> bool:
    """Whether every value of ``x``'s dtype is an fp32 value (fp32, fp16, bf16, fp8)."""
    f = _format_or_none(x)
    return f is not None and f.kind == "float" and x.dtype.itemsize <= 4 and f.name != "tf32"


def _f32_bits(x: np.ndarray) -> np.ndarray:
    """The fp32 bit patterns of a :func:`_fits_f32` array (exact conversion), as a copy."""
    return np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).copy()


def _mag_range(x: np.ndarray, scale: Any) -> tuple[float, float]:
    """(max, min non-zero) finite magnitude of ``x`` times ``scale`` (0, inf if none)."""
    hi, lo = 0.0, math.inf
    flat = np.asarray(x).reshape(-1)
    if _fits_f32(flat):
        # magnitudes of positive floats order like their bit patterns: two integer reductions
        inf_bits = np.uint32(0x7F800000)
        for c0 in range(0, flat.size, 1 << 20):
            mag = _f32_bits(flat[c0:c0 + (1 << 20)])
            mag &= np.uint32(0x7FFFFFFF)
            fin = mag < inf_bits
            h = np.max(mag, where=fin, initial=np.uint32(0))
            if h == 0:
                continue
            lw = np.min(mag, where=fin & (mag > 0), initial=inf_bits)
            hi = max(hi, float(np.array(h, dtype=np.uint32).view(np.float32)))
            lo = min(lo, float(np.array(lw, dtype=np.uint32).view(np.float32)))
        flat = flat[:0]
    for c0 in range(0, flat.size, 1 << 20):
        v = np.abs(_f64(flat[c0:c0 + (1 << 20)]))
        v = v[np.isfinite(v) & (v > 0)]
        if v.size:
            hi, lo = max(hi, float(v.max())), min(lo, float(v.min()))
    if hi == 0.0:
        return 0.0, math.inf
    sc = np.abs(np.asarray(scale, dtype=np.float64))
    return hi * float(sc.max()), lo * float(sc.min())


def _scale_array(s: Any, n: int, what: str) -> np.ndarray | float:
    if s is None:
        return 1.0
    arr = _f64(s)
    if arr.ndim == 0:
        return float(arr)
    arr = arr.reshape(-1)
    if arr.size != n:
        raise ValueError(f"{what} has {arr.size} entries, expected 1 or {n}")
    return arr


def _prepare_matmul(inputs: list[np.ndarray], params: dict[str, Any], recipe: PrecisionRecipe) -> Prepared:
    a, b = (np.asarray(x) for x in inputs[:2])
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("matmul operands must have at least one dimension")
    a2 = a.reshape(1, -1) if a.ndim == 1 else a
    b2 = b.reshape(-1, 1) if b.ndim == 1 else b
    if a2.shape[-1] != b2.shape[-2]:
        raise ValueError(f"matmul contraction mismatch: a {a.shape} and b {b.shape}")
    batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    m, k = a2.shape[-2:]
    n = b2.shape[-1]
    a3 = np.broadcast_to(a2, (*batch, m, k)).reshape(-1, m, k)
    b3 = np.broadcast_to(b2, (*batch, k, n)).reshape(-1, k, n)
    nb = a3.shape[0]
    out_shape: tuple[int, ...] = (*batch, m, n)
    if a.ndim == 1 and b.ndim == 1:
        out_shape = tuple(batch)
    elif a.ndim == 1:
        out_shape = (*batch, n)
    elif b.ndim == 1:
        out_shape = (*batch, m)
    sa = params.get("scale_a")
    sb = params.get("scale_b")
    if sa is None and len(recipe.scales) >= 1:
        sa = recipe.scales[0]
    if sb is None and len(recipe.scales) >= 2:
        sb = recipe.scales[1]
    scale_a = _scale_array(sa, m, "scale_a")
    scale_b = _scale_array(sb, n, "scale_b")
    # flush-to-zero allowance: operands subnormal *in the accumulator's format* (fp32 denormals);
    # fp16/fp8 subnormals are normal fp32 numbers and must be handled exactly
    fa = fb = recipe.acc_format
    cache: dict[int, tuple[np.ndarray, ...]] = {}
    # S and Q may be computed in float32 when no product or sum can leave its normal range
    amax, amin = _mag_range(a3, scale_a)
    bmax, bmin = _mag_range(b3, scale_b)
    fast_mag = (amax * bmax) ** 2 * k <= 2.0**100 and (amin * bmin) ** 2 >= 2.0**-100 and k < 2**20
    mag_inflate = 1.0 + k * 2.0**-23

    def b_parts(bi: int) -> tuple[np.ndarray, ...]:
        if bi not in cache:
            cache.clear()
            bf = _f64(b3[bi])
            if not isinstance(scale_b, float) or scale_b != 1.0:
                bf = bf * (scale_b if isinstance(scale_b, float) else scale_b[None, :])
            finite = np.isfinite(bf)
            has_special = not finite.all()
            bz = np.where(finite, bf, 0.0) if has_special else bf
            babs, bsq = np.abs(bz), bz * bz
            if fast_mag:
                babs, bsq = babs.astype(np.float32), bsq.astype(np.float32)
            cache[bi] = (bf, bz, babs, bsq, has_special, _subnormal_part(_f64(b3[bi]), fb))
        return cache[bi]

    psum_tile = recipe.tile_k if recipe.structure.get("psum_rounds") else 0

    def evaluate(r0: int, r1: int) -> OracleBlock:
        ys, ss, qs, subs, psq = [], [], [], [], []
        any_sub = False
        r = r0
        while r < r1:
            bi, i0 = divmod(r, m)
            i1 = min(m, i0 + (r1 - r))
            af = _f64(a3[bi, i0:i1])
            if not isinstance(scale_a, float) or scale_a != 1.0:
                af = af * (scale_a if isinstance(scale_a, float) else scale_a[i0:i1, None])
            bf, bz, babs, bsq, b_special, b_sub = b_parts(bi)
            afin = np.isfinite(af)
            a_special = not afin.all()
            az = np.where(afin, af, 0.0) if a_special else af
            y = az @ bz
            if fast_mag:
                # magnitudes only need a few digits: float32 BLAS, inflated by its own γ_K
                s = (np.abs(az).astype(np.float32) @ babs).astype(np.float64) * mag_inflate
                q = ((az * az).astype(np.float32) @ bsq).astype(np.float64) * mag_inflate
            else:
                s = np.abs(az) @ babs
                q = (az * az) @ bsq
            if psum_tile:
                # running PSUM values after each K tile (declared tile order), for the
                # probabilistic bound λ·u·sqrt(Σ_t P_t²) of per-tile PSUM roundings
                run = np.zeros_like(y)
                sq = np.zeros_like(y)
                for t0 in range(0, k, psum_tile):
                    run += az[:, t0:t0 + psum_tile] @ bz[t0:t0 + psum_tile]
                    sq += run * run
                psq.append(sq.ravel())
            if a_special or b_special:
                nan, pinf, ninf = _special_contract(af, bf)
                y = np.where(nan, np.nan, np.where(pinf, np.inf, np.where(ninf, -np.inf, y)))
            a_sub = _subnormal_part(_f64(a3[bi, i0:i1]), fa)
            sub = None
            if a_sub is not None:
                sub = a_sub @ babs
            if b_sub is not None:
                part = np.abs(az) @ b_sub
                sub = part if sub is None else sub + part
            ys.append(y.ravel())
            ss.append(s.ravel())
            qs.append(q.ravel())
            subs.append(None if sub is None else sub.ravel())
            any_sub = any_sub or sub is not None
            r += i1 - i0
        y = np.concatenate(ys)
        subn = None
        if any_sub:
            subn = np.concatenate([np.zeros(len(yy)) if sb_ is None else sb_ for yy, sb_ in zip(ys, subs)])
        aux: dict[str, Any] = {"scaled": not (isinstance(scale_a, float) and isinstance(scale_b, float)
                                              and scale_a == 1.0 and scale_b == 1.0)}
        if psq:
            aux["psum_sq"] = np.concatenate(psq)
        return OracleBlock(y=y, scale=np.concatenate(ss), sumsq=np.concatenate(qs), k=k,
                           subnormal_scale=subn, aux=aux)

    ga = grid_exponent(a)
    gb = grid_exponent(b)
    scales_pow2 = all(
        isinstance(s, float) and s != 0 and math.frexp(abs(s))[0] == 0.5 for s in (scale_a, scale_b)
    )
    grid = None if (ga is None or gb is None or not scales_pow2) else ga + gb + (
        int(math.log2(abs(scale_a))) + int(math.log2(abs(scale_b)))  # type: ignore[arg-type]
    )
    return Prepared(
        spec=OPS["matmul"], out_shape=out_shape, row_len=n, n_rows=nb * m, work_per_row=max(n, k),
        evaluate=evaluate, inputs=[a, b], params=params, k=k,
        facts={"K": k, "M": m, "N": n, "batch": int(nb), "grid": grid, "operands": 2},
    )


def _prepare_reduce(kind: str):
    def prepare(inputs: list[np.ndarray], params: dict[str, Any], recipe: PrecisionRecipe) -> Prepared:
        x = np.asarray(inputs[0])
        axis = params.get("axis", -1)
        if axis is None:
            rows = x.reshape(1, -1)
            out_shape: tuple[int, ...] = ()
        else:
            ax = _check_axis(x.ndim, axis)
            rows, moved = _row_view(x, ax)
            out_shape = moved[:-1]
        n_rows, k = rows.shape
        if k == 0:
            raise ValueError(f"{kind} over an empty axis")
        fx = recipe.acc_format

        def evaluate(r0: int, r1: int) -> OracleBlock:
            ys, ss, qs, subs = [], [], [], []
            step = max(1, (1 << 20) // k)
            cstep = 1 << 20  # long rows are summed in column chunks: bounded memory
            for c0 in range(r0, r1, step):
                c1 = min(r1, c0 + step)
                y = np.zeros(c1 - c0)
                s_ = np.zeros(c1 - c0)
                q_ = np.zeros(c1 - c0)
                sb = np.zeros(c1 - c0)
                for k0 in range(0, k, cstep):
                    xf = _f64(rows[c0:c1, k0:k0 + cstep])
                    fin = np.isfinite(xf)
                    xz = np.where(fin, xf, 0.0)
                    with np.errstate(invalid="ignore", over="ignore"):
                        y += xf.sum(axis=1)  # IEEE special semantics from float64
                    s_ += np.abs(xz).sum(axis=1)
                    q_ += (xz * xz).sum(axis=1)
                    sp = _subnormal_part(xz, fx)
                    if sp is not None:
                        sb += sp.sum(axis=1)
                ys.append(y)
                ss.append(s_)
                qs.append(q_)
                subs.append(sb)
            y = np.concatenate(ys)
            s = np.concatenate(ss)
            q = np.concatenate(qs)
            sub = np.concatenate(subs)
            if kind == "mean":
                y, s, q, sub = y / k, s / k, q / (k * k), sub / k
            return OracleBlock(y=y, scale=s, sumsq=q, k=k, subnormal_scale=sub if sub.any() else None,
                               aux={"divide": kind == "mean"})

        return Prepared(
            spec=OPS[kind], out_shape=tuple(out_shape), row_len=1, n_rows=n_rows, work_per_row=k,
            evaluate=evaluate, inputs=[x], params=params, k=k,
            facts={"K": k, "grid": grid_exponent(x), "operands": 1},
        )

    return prepare


def _prepare_cumsum(inputs: list[np.ndarray], params: dict[str, Any], recipe: PrecisionRecipe) -> Prepared:
    x = np.asarray(inputs[0])
    ax = _check_axis(x.ndim, params.get("axis", -1))
    rows, _ = _row_view(x, ax)
    n_rows, n = rows.shape
    if ax != x.ndim - 1 and x.ndim > 1:
        raise ValueError("cumsum is supported along the last axis only; move the axis first")

    def evaluate(r0: int, r1: int) -> OracleBlock:
        xf = _f64(rows[r0:r1])
        fin = np.isfinite(xf)
        xz = np.where(fin, xf, 0.0)
        with np.errstate(invalid="ignore", over="ignore"):
            y = np.cumsum(xf, axis=1)
        s = np.cumsum(np.abs(xz), axis=1)
        q = np.cumsum(xz * xz, axis=1)
        kk = np.broadcast_to(np.arange(1, n + 1, dtype=np.float64), xf.shape)
        return OracleBlock(y=y.ravel(), scale=s.ravel(), sumsq=q.ravel(), k=kk.ravel())

    return Prepared(
        spec=OPS["cumsum"], out_shape=x.shape if x.ndim else (1,), row_len=n, n_rows=n_rows,
        work_per_row=n, evaluate=evaluate, inputs=[x], params=params, k=n,
        facts={"K": n, "grid": grid_exponent(x), "operands": 1},
    )


# --------------------------------------------------------------------------- softmax family


def _prepare_softmax(log: bool):
    def prepare(inputs: list[np.ndarray], params: dict[str, Any], recipe: PrecisionRecipe) -> Prepared:
        x = np.asarray(inputs[0])
        ax = _check_axis(x.ndim, params.get("axis", -1))
        if x.ndim > 1 and ax != x.ndim - 1:
            raise ValueError("softmax is supported along the last axis only; move the axis first")
        rows, moved = _row_view(x, ax)
        n_rows, n = rows.shape
        mask = params.get("mask")
        mrows = None
        if mask is not None:
            mk = np.broadcast_to(np.asarray(mask, dtype=bool), x.shape)
            mrows, _ = _row_view(mk, ax)

        def evaluate(r0: int, r1: int) -> OracleBlock:
            xf = _f64(rows[r0:r1])
            keep = np.ones_like(xf, dtype=bool) if mrows is None else mrows[r0:r1]
            xm = np.where(keep, xf, -np.inf)
            with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
                m = np.max(xm, axis=1, keepdims=True)
                d = xm - m
                e = np.exp(d)
                z = e.sum(axis=1, keepdims=True)
                if log:
                    y = d - np.log(z)
                else:
                    y = e / z
            nkeep = keep.sum(axis=1, keepdims=True).astype(np.float64)
            aux = {
                # masked/-inf entries have exp(d) == 0 exactly; their bound is the floor
                "absd": np.where(np.isfinite(d), np.abs(d), 0.0).ravel(),
                "absd_rowmax": np.broadcast_to(
                    np.max(np.where(keep & np.isfinite(d), np.abs(d), 0.0), axis=1, keepdims=True), xf.shape
                ).ravel(),
                "absx": np.where(keep & np.isfinite(xf), np.abs(xf), 0.0).ravel(),
                "xmax": np.broadcast_to(m, xf.shape).ravel(),
                "n": np.broadcast_to(nkeep, xf.shape).ravel(),
                "logz": np.broadcast_to(np.abs(np.log(z)), xf.shape).ravel(),
                "keep": keep.ravel(),
                "x": xf.ravel(),
            }
            return OracleBlock(y=y.ravel(), k=n, aux=aux)

        name = "log_softmax" if log else "softmax"
        return Prepared(
            spec=OPS[name], out_shape=tuple(moved), row_len=n, n_rows=n_rows, work_per_row=n,
            evaluate=evaluate, inputs=[x], params=params, k=n, facts={"N": n, "axis": ax, "moved": ax != x.ndim - 1},
        )

    return prepare


# --------------------------------------------------------------------------- normalisation


def _prepare_norm(kind: str):
    def prepare(inputs: list[np.ndarray], params: dict[str, Any], recipe: PrecisionRecipe) -> Prepared:
        x = np.asarray(inputs[0])
        ax = _check_axis(x.ndim, params.get("axis", -1))
        if ax != x.ndim - 1:
            raise ValueError(f"{kind} is supported along the last axis only")
        rows, moved = _row_view(x, ax)
        n_rows, n = rows.shape
        eps = float(params.get("eps", 1e-5 if kind == "layernorm" else 1e-6))
        gamma = inputs[1] if len(inputs) > 1 and inputs[1] is not None else params.get("gamma")
        beta = inputs[2] if len(inputs) > 2 and inputs[2] is not None else params.get("beta")
        g = None if gamma is None else np.broadcast_to(_f64(gamma), (n,))
        bt = None if beta is None else np.broadcast_to(_f64(beta), (n,))

        def evaluate(r0: int, r1: int) -> OracleBlock:
            xf = _f64(rows[r0:r1])
            with np.errstate(invalid="ignore", over="ignore"):
                if kind == "layernorm":
                    mu = xf.mean(axis=1, keepdims=True)
                    dev = xf - mu
                    var = (dev * dev).mean(axis=1, keepdims=True)
                    rstd = 1.0 / np.sqrt(var + eps)
                    xhat = dev * rstd
                else:
                    mu = np.zeros((xf.shape[0], 1))
                    dev = xf
                    var = (xf * xf).mean(axis=1, keepdims=True)
                    rstd = 1.0 / np.sqrt(var + eps)
                    xhat = xf * rstd
                y = xhat if g is None else xhat * g
                if bt is not None and kind == "layernorm":
                    y = y + bt
            shape = xf.shape
            aux = {
                "xhat": np.abs(xhat).ravel(),
                "absdev": np.abs(dev).ravel(),
                "rstd": np.broadcast_to(rstd, shape).ravel(),
                "var": np.broadcast_to(var, shape).ravel(),
                "eps": eps,
                "mean_abs": np.broadcast_to(np.abs(xf).mean(axis=1, keepdims=True), shape).ravel(),
                "mean_sq": np.broadcast_to((xf * xf).mean(axis=1, keepdims=True), shape).ravel(),
                "mu": np.broadcast_to(np.abs(mu), shape).ravel(),
                "gamma": np.ones(xf.size) if g is None else np.broadcast_to(np.abs(g), shape).ravel(),
                "has_beta": bt is not None,
            }
            return OracleBlock(y=y.ravel(), k=n, aux=aux)

        return Prepared(
            spec=OPS[kind], out_shape=tuple(moved), row_len=n, n_rows=n_rows, work_per_row=n,
            evaluate=evaluate, inputs=[x], params={**params, "eps": eps}, k=n, facts={"N": n, "eps": eps},
        )

    return prepare


# --------------------------------------------------------------------------- elementwise


def _vec(fn: Callable[[float], float]) -> Callable[[np.ndarray], np.ndarray]:
    """Vectorise a math-module function; evaluate each distinct value once (bf16/fp8
    inputs have at most 65,536 distinct values)."""
    ufunc = np.frompyfunc(fn, 1, 1)

    def apply(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        if x.size > 4096:
            uniq, inv = np.unique(x, return_inverse=True)
            if uniq.size < x.size // 4:
                return ufunc(uniq).astype(np.float64)[inv].reshape(x.shape)
        return ufunc(x).astype(np.float64)

    return apply


def _safe(fn: Callable[[float], float]) -> Callable[[float], float]:
    def g(v: float) -> float:
        if math.isnan(v):
            return math.nan
        return fn(v)

    return g


_erf = _vec(_safe(math.erf))
_erfc = _vec(_safe(lambda v: math.erfc(v) if not math.isinf(v) else (0.0 if v > 0 else 2.0)))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        ex = np.exp(-np.abs(x))
        return np.where(x >= 0, 1.0 / (1.0 + ex), ex / (1.0 + ex))


def _gelu(x: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return x * 0.5 * _erfc(-x / math.sqrt(2.0))


_GT_C = math.sqrt(2.0 / math.pi)


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    # 0.5x(1 + tanh(z)) == x·sigmoid(2z): the sigmoid form keeps relative accuracy in the tail
    with np.errstate(invalid="ignore", over="ignore"):
        z = _GT_C * (x + 0.044715 * x**3)
        return np.where(np.isinf(x), np.where(x > 0, x, -0.0), x * _sigmoid(2.0 * z))


def _gelu_sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.where(np.isinf(x), np.where(x > 0, x, -0.0), x * _sigmoid(1.702 * x))


@dataclass(frozen=True)
class Activation:
    """One elementwise function: float64 value, its condition ``|x·f'(x)|``, the magnitude of
    its intermediates (``S_e``), how many fp32 roundings a straightforward implementation
    makes (``n_ops``), whether it is a transcendental (gets the implementation's budget),
    and its magnitude near zeros (``zero_scale``) for polynomial approximations."""

    f: Callable[[np.ndarray], np.ndarray]
    cond: Callable[[np.ndarray, np.ndarray], np.ndarray]
    inter: Callable[[np.ndarray, np.ndarray], np.ndarray]
    n_ops: int
    transcendental: bool
    exact: bool = False
    zero_scale: float = 0.0
    confusables: tuple[str, ...] = ()


def _absy(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.abs(y)


def _absx(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.abs(x)


def _zero(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.zeros_like(y)


def _errfree(f):
    def g(x):
        with np.errstate(all="ignore"):
            return f(x)

    return g


def _silu_cond(x, y):
    s = _sigmoid(x)
    return np.abs(x * (s + x * s * (1 - s)))


def _gelu_cond(x, y):
    phi = np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
    return np.abs(x * (0.5 * _erfc(-x / math.sqrt(2.0)) + x * phi))


def _gelu_tanh_cond(x, y):
    z = _GT_C * (x + 0.044715 * x**3)
    s = _sigmoid(2 * z)
    dz = _GT_C * (1 + 3 * 0.044715 * x * x)
    return np.abs(x * (s + x * 2 * s * (1 - s) * dz))


ACTIVATIONS: dict[str, Activation] = {
    "exp": Activation(_errfree(np.exp), lambda x, y: np.abs(x * y), _absy, 1, True, confusables=("exp2",)),
    "exp2": Activation(_errfree(np.exp2), lambda x, y: np.abs(x * y) * math.log(2), _absy, 1, True,
                       confusables=("exp",)),
    "log": Activation(_errfree(np.log), lambda x, y: np.ones_like(y), _absy, 1, True, zero_scale=1.0),
    "sqrt": Activation(_errfree(np.sqrt), lambda x, y: 0.5 * np.abs(y), _absy, 1, True,
                       confusables=("rsqrt",)),
    "rsqrt": Activation(_errfree(lambda x: 1.0 / np.sqrt(x)), lambda x, y: 0.5 * np.abs(y), _absy, 2, True,
                        confusables=("sqrt", "reciprocal")),
    "reciprocal": Activation(_errfree(lambda x: 1.0 / x), lambda x, y: np.abs(y), _absy, 1, True),
    "tanh": Activation(_errfree(np.tanh), lambda x, y: np.abs(x * (1 - y * y)), _absy, 1, True,
                       confusables=("sigmoid",)),
    "sigmoid": Activation(_errfree(_sigmoid), lambda x, y: np.abs(x * y * (1 - y)), _absy, 3, True,
                          confusables=("tanh", "silu")),
    "silu": Activation(_errfree(lambda x: x * _sigmoid(x)), _silu_cond, _absy, 4, True,
                       confusables=("sigmoid", "gelu", "gelu_tanh")),
    "softplus": Activation(_errfree(lambda x: np.logaddexp(0.0, x)), lambda x, y: np.abs(x * _sigmoid(x)),
                           _absy, 3, True),
    "gelu": Activation(_errfree(_gelu), _gelu_cond, _absx, 4, True,
                       confusables=("gelu_tanh", "gelu_sigmoid", "silu")),
    "gelu_tanh": Activation(_errfree(_gelu_tanh), _gelu_tanh_cond, _absx, 7, True,
                            confusables=("gelu", "gelu_sigmoid", "silu")),
    "gelu_sigmoid": Activation(_errfree(_gelu_sigmoid), lambda x, y: np.abs(x) * (np.abs(y / np.where(x == 0, 1, x)) + 1.702 * np.abs(x) / 4), _absx, 4, True,
                               confusables=("gelu", "gelu_tanh")),
    "erf": Activation(_errfree(_erf), lambda x, y: np.abs(x) * 2 / math.sqrt(math.pi) * np.exp(-x * x),
                      _absy, 1, True),
    "sin": Activation(_errfree(np.sin), lambda x, y: np.abs(x * np.cos(x)), _absy, 1, True, zero_scale=1.0,
                      confusables=("cos",)),
    "cos": Activation(_errfree(np.cos), lambda x, y: np.abs(x * np.sin(x)), _absy, 1, True, zero_scale=1.0,
                      confusables=("sin",)),
    "square": Activation(_errfree(np.square), lambda x, y: 2 * np.abs(y), _absy, 1, False),
    "relu": Activation(_errfree(lambda x: np.where(np.isnan(x), x, np.maximum(x, 0.0))), _zero, _zero, 0, False,
                       exact=True),
    "abs": Activation(_errfree(np.abs), _zero, _zero, 0, False, exact=True),
    "neg": Activation(_errfree(np.negative), _zero, _zero, 0, False, exact=True),
    "copy": Activation(_errfree(lambda x: x.copy()), _zero, _zero, 0, False, exact=True),
}
_ACT_ALIASES = {
    "gelu_apprx_tanh": "gelu_tanh", "gelu_approx_tanh": "gelu_tanh", "gelu_apprx_sigmoid": "gelu_sigmoid",
    "swish": "silu", "identity": "copy", "erf_gelu": "gelu", "logistic": "sigmoid",
}


def _flat(x: np.ndarray) -> np.ndarray:
    return np.asarray(x).reshape(-1)


def _prepare_unary(name: str):
    act = ACTIVATIONS[name]

    def prepare(inputs: list[np.ndarray], params: dict[str, Any], recipe: PrecisionRecipe) -> Prepared:
        x = np.asarray(inputs[0])
        xf_all = _flat(x)

        def evaluate(r0: int, r1: int) -> OracleBlock:
            xf = _f64(xf_all[r0:r1])
            y = act.f(xf)
            with np.errstate(all="ignore"):
                cond = act.cond(xf, y)
                inter = act.inter(xf, y)
            return OracleBlock(y=y, k=1, aux={"x": xf, "cond": cond, "inter": inter})

        return Prepared(
            spec=OPS[name], out_shape=x.shape, row_len=1, n_rows=int(xf_all.size), work_per_row=1,
            evaluate=evaluate, inputs=[x], params=params, k=1, facts={"activation": name},
        )

    return prepare


_BINARY = {
    "add": (np.add, lambda a, b, y: np.abs(a) + np.abs(b), False),
    "sub": (np.subtract, lambda a, b, y: np.abs(a) + np.abs(b), False),
    "mul": (np.multiply, lambda a, b, y: np.abs(y), False),
    "div": (np.divide, lambda a, b, y: np.abs(y), False),
    "maximum": (np.maximum, lambda a, b, y: np.zeros_like(y), True),
    "minimum": (np.minimum, lambda a, b, y: np.zeros_like(y), True),
}


def _prepare_binary(name: str):
    fn, inter, exact = _BINARY[name]

    def prepare(inputs: list[np.ndarray], params: dict[str, Any], recipe: PrecisionRecipe) -> Prepared:
        a, b = np.asarray(inputs[0]), np.asarray(inputs[1])
        shape = np.broadcast_shapes(a.shape, b.shape)
        af = _flat(np.broadcast_to(a, shape)) if a.shape != shape else _flat(a)
        bf = _flat(np.broadcast_to(b, shape)) if b.shape != shape else _flat(b)

        def evaluate(r0: int, r1: int) -> OracleBlock:
            x1, x2 = _f64(af[r0:r1]), _f64(bf[r0:r1])
            with np.errstate(all="ignore"):
                y = fn(x1, x2)
                return OracleBlock(y=y, k=1, aux={"inter": inter(x1, x2, y), "exact": exact})

        g = None
        ga, gb = grid_exponent(a), grid_exponent(b)
        if ga is not None and gb is not None:
            g = ga + gb if name == "mul" else min(ga, gb)
        return Prepared(
            spec=OPS[name], out_shape=tuple(shape), row_len=1, n_rows=int(math.prod(shape)), work_per_row=1,
            evaluate=evaluate, inputs=[a, b], params=params, k=1, facts={"grid": g if name in ("add", "sub", "mul") else None},
        )

    return prepare


# --------------------------------------------------------------------------- fp8 quantisation


def _prepare_quant(kind: str):
    def prepare(inputs: list[np.ndarray], params: dict[str, Any], recipe: PrecisionRecipe) -> Prepared:
        x = np.asarray(inputs[0])
        scale = inputs[1] if len(inputs) > 1 else params.get("scale")
        if scale is None:
            scale = recipe.scales[0] if recipe.scales else 1.0
        s = np.broadcast_to(_f64(scale), x.shape) if np.ndim(scale) else float(scale)
        xs = _flat(x)
        ss = _flat(s) if isinstance(s, np.ndarray) else None
        divide = bool(params.get("divide", True))

        def evaluate(r0: int, r1: int) -> OracleBlock:
            xf = _f64(xs[r0:r1])
            sc = float(s) if ss is None else ss[r0:r1]  # type: ignore[arg-type]
            with np.errstate(all="ignore"):
                if kind == "quantize":
                    y = xf / sc if divide else xf * sc
                else:
                    y = xf * sc
            return OracleBlock(y=y, k=1, aux={"x": xf, "scale": sc})

        return Prepared(
            spec=OPS[kind], out_shape=x.shape, row_len=1, n_rows=int(xs.size), work_per_row=1,
            evaluate=evaluate, inputs=[x], params={**params, "divide": divide}, k=1,
            facts={"scale": float(s) if ss is None else "per-element", "divide": divide},
        )

    return prepare


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

