"""Gates: stream the output block by block, collect the facts, decide the verdict.

Why streaming: a check must handle 10^7-element outputs in seconds and in memory a few times
the input size, so nothing of output size is materialised in float64 except one block at a
time (2^18 elements by default). Each gate is a test on the streamed statistics:

====  =====================================================  ================================
gate  test                                                   on failure
====  =====================================================  ================================
G0    output shape and storage dtype match the declaration   FAIL
G1    NaN/Inf parity with the oracle cast to the output dtype  FAIL (WARN if a documented
                                                             platform semantic explains it)
GE    elements exact in every summation order match bitwise  FAIL
G2    max |ŷ−y|/τ_det ≤ 1 (hard bound, any order)            FAIL
G3    no element above τ_prb (λ√K bound), random inputs      FAIL (reported only otherwise)
G5    99th percentile of z = |ŷ−y|/σ ≤ 10, random inputs     FAIL (silent lower precision)
G4    RMS and max error ≤ 1.5× / 3× a same-precision         FAIL
      reference (floored by the recipe's expected error)
GC    inputs inside the recipe's contract                    INCONCLUSIVE
G7    an all-zeros output would fail (data discriminate)     INCONCLUSIVE
====  =====================================================  ================================
"""

from __future__ import annotations

import heapq
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .bounds import RULES, BoundsBlock, RuleContext, _fl_out_neighbours
from .diagnose import diagnose as _diagnose
from .formats import FORMATS, Format, format_of, get_format, round_to, ulp_key
from .inputs import is_random_family
from .oracle import OpSpec, OracleBlock, Prepared, exact_in, generic_op, get_op, round_inputs
from .recipe import PrecisionRecipe
from .verdict import Finding, GateResult, Metrics, Verdict, WorstElement, explain

__all__ = [
    "SPECIAL_VALUE_TABLE",
    "Z_P99_LIMIT",
    "PreparedCheck",
    "SpecialValueRule",
    "check",
    "check_stochastic_rounding",
    "default_recipe",
    "k_scaling_slope",
]

Z_P99_LIMIT = 10.0  # research note §4.4 G5: 99th percentile of z above 10 fails
RATIO_RMS_LIMIT = 1.5  # G4, FlashAttention/AWS-style ratio to a same-precision reference
RATIO_MAX_LIMIT = 3.0
_Z_EDGES = np.concatenate([[0.0], 10.0 ** np.linspace(-4, 7, 221)])
_S_EDGES = np.linspace(-20.0, 20.0, 81)
_GRID_CANDIDATES = ("fp16", "bf16", "fp8_e5m2", "fp8_e4m3fn")
_MISMATCH_CAP = 1 << 16
_GRID_SAMPLE = 1 << 20  # elements enough to fingerprint the output grid


def _ulp_buckets(d: np.ndarray) -> np.ndarray:
    """ULP-histogram bucket of each distance ``d`` (int64, >= 0): d itself up to 2, then
    ceil(log2 d) + 1 (the bit length of d - 1, plus 1), at most 39."""
    b = np.frexp(np.maximum(d, 2) - 1)[1].astype(np.int64)
    b += 1
    np.copyto(b, d, where=d <= 2)
    np.minimum(b, 39, out=b)
    return b


_ULP_TABLE_N = 1 << 16
_ULP_BUCKET = _ulp_buckets(np.arange(_ULP_TABLE_N, dtype=np.int64))  # the bucket of every small distance


# _ulp_buckets by the float64 exponent field of d - 1: 0x3FF + j for d - 1 in [2^j, 2^(j+1)), i.e.
# bit length j + 1 and bucket j + 2 (d - 1 >= 2^53 may round up a binade: bucket 39 either way);
# field 0 is d = 1 (bucket 1) and 0xBFF, the sign and exponent of -1.0, is d = 0 (bucket 0)
_EXP_BUCKET = np.full(1 << 12, 39, dtype=np.intp)
_EXP_BUCKET[0x3FF:0x3FF + 38] = np.arange(2, 40)
_EXP_BUCKET[0] = 1
_EXP_BUCKET[0xBFF] = 0


def _ulp_hist(d: np.ndarray) -> np.ndarray:
    """``np.bincount(_ulp_buckets(d), minlength=40)[:40]`` for int64 distances ``d >= 0``, which it
    overwrites: counts per float64 exponent field of ``d - 1`` (cast in place), added up per
    bucket — no frexp, no masked copy, no fresh array of the size of ``d``."""
    d -= 1
    f = d.view(np.float64)
    np.copyto(f, d, casting="unsafe")
    k = f.view(np.uint64)
    k >>= np.uint64(52)
    counts = np.bincount(k.view(np.int64), minlength=1 << 12)
    return np.bincount(_EXP_BUCKET, weights=counts, minlength=40)[:40].astype(np.int64)


def _z_bins(z: np.ndarray, overwrite: bool = False) -> np.ndarray:
    """Index into _Z_EDGES (0, then 10^-4 … 10^7 in 220 log steps) without a search.

    ``overwrite``: ``z`` (float64, no longer needed) is used as the work buffer and the int64
    bins come back in its memory: the same operations on the same values, without the two fresh
    arrays (first touches of fresh memory cost more than the arithmetic on it)."""
    t = np.maximum(z, 1e-300, out=z if overwrite else None)
    with np.errstate(divide="ignore"):
        np.log10(t, out=t)
    t += 4.0
    t *= 20.0
    np.floor(t, out=t)
    np.clip(t, -1.0, len(_Z_EDGES) - 2.0, out=t)  # same bins as clipping the integer b = t + 1
    b = t.view(np.int64)
    np.copyto(b, t, casting="unsafe")  # integral values in [-1, 220]: the cast is exact, element by element
    b += 1
    # z <= 0 needs no fix-up: max(z, 1e-300) makes t = -5920 there, clipped to -1, so b = 0 already
    return b


def _ratio(e: np.ndarray, tau: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """``e/tau`` where ``mask`` (inf where ``tau`` is not positive and ``e > 0``, else 0),
    0 outside ``mask``: ``np.where`` chains in one pass."""
    with np.errstate(divide="ignore", invalid="ignore"):
        r = e / tau
    bad = ~(tau > 0)
    if bad.any():
        r[bad] = np.where(e[bad] > 0, np.inf, 0.0)
    if mask is not None:
        r[~mask] = 0.0
    return r


def _narrow_mask_table(f: Format) -> tuple[np.ndarray, np.uint32, np.uint32]:
    """For a float format no wider and no finer than fp32 (fp16, the fp8 grids): per fp32 biased
    exponent, the bits of ``|x|`` that must be zero for ``f`` to hold ``x`` (normals: the fp32
    mantissa bits below ``f``'s; subnormals: multiples of ``f.subnormal``; exponent fields 0 and
    255: zero, and inf where ``f`` has it; every bit, exponent included, elsewhere: out of range),
    plus the largest finite magnitude's bit pattern (e4m3fn's top binade stops short of a full
    mantissa) and inf's pattern (0 where ``f`` has no inf)."""
    t = np.full(256, 0x7FFFFFFF, dtype=np.uint32)
    t[0] = 0x7FFFFF
    low = 23 - (f.p - 1)  # fp32 mantissa bits f does not have
    e_min = round(math.log2(f.tiny)) + 127
    e_sub = round(math.log2(f.subnormal)) + 127
    e_max = math.floor(math.log2(f.max)) + 127
    for e in range(e_min, e_max + 1):
        t[e] = (1 << low) - 1
    for e in range(e_sub, e_min):
        t[e] = (1 << (low + e_min - e)) - 1
    inf = np.uint32(0x7F800000) if f.has_inf else np.uint32(0)
    if f.has_inf:
        t[255] = 0x7FFFFF
    return t, np.float32(f.max).view(np.uint32), inf


_NARROW_MASKS = {c: _narrow_mask_table(FORMATS[c]) for c in ("fp8_e5m2", "fp8_e4m3fn")}
# fp16: the low 13 mantissa bits for normals (2^-14 .. 2^15), more for subnormals (multiples of
# 2^-24), only ±0 and ±inf in exponent fields 0 and 255. Its top binade is full (65504 has an
# all-ones mantissa), so unlike e4m3fn it needs no test against the largest value.
_FP16_MASK = _narrow_mask_table(FORMATS["fp16"])[0]


def _fp16_held(x32: np.ndarray) -> np.ndarray:
    """``x32.astype(float16).astype(float32) == x32`` from the bits alone (the same for every
    one of the 2^32 fp32 values, checked exhaustively), without the two conversions."""
    u = x32.view(np.uint32) & np.uint32(0x7FFFFFFF)
    return (u & _FP16_MASK.take((u >> np.uint32(23)).astype(np.intp))) == 0


def _narrow_held(x32: np.ndarray, name: str) -> np.ndarray:
    """``x32.astype(fmt).astype(float32) == x32`` for an fp8 format from the bits alone (the same
    for every one of the 2^32 fp32 values, checked exhaustively), without the two conversions."""
    t, top, inf = _NARROW_MASKS[name]
    u = x32.view(np.uint32) & np.uint32(0x7FFFFFFF)
    ok = (u & t.take((u >> np.uint32(23)).astype(np.intp))) == 0
    ok &= (u <= top) | (u == inf) if inf else u <= top
    return ok


def _ulp_key32(x32: np.ndarray) -> np.ndarray:
    """:func:`~.formats.ulp_key` of float32 values for an fp32 format (the same int64 keys for
    every one of the 2^32 bit patterns, checked exhaustively): sign-magnitude to two's
    complement in int32 (``(m ^ s) - s`` negates ``m`` where the sign ``s`` is -1), then widened.
    About ten times faster than the masked negation, on every output block."""
    b = x32.view(np.int32)
    s = b >> 31
    k = b & np.int32(0x7FFFFFFF)
    k ^= s
    k -= s
    return k.astype(np.int64)


def _held_where(x32: np.ndarray, base: np.ndarray, test: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """``test(x32) & base``, testing only where ``base`` holds when that is a small part of the
    values (the common case: an fp32 output on no coarser grid)."""
    idx = np.flatnonzero(base)
    if idx.size * 8 >= base.size:
        ok = test(x32)
        ok &= base
        return ok
    ok = np.zeros(base.shape, dtype=bool)
    if idx.size:
        ok.reshape(-1)[idx] = test(x32.reshape(-1)[idx])
    return ok


def _grid_held(x: np.ndarray, out: Format) -> dict[str, np.ndarray]:
    """Per coarser grid candidate, which of the values ``x`` it holds exactly (fp32 values whose
    narrow cast round-trips, as :func:`~.formats.representable`), by bit tests that give the same
    answer. fp16 holds a value only where its low 13 fp32 significand bits are zero, and the fp8
    grids only where fp16 holds it (every fp8 value is an fp16 value): each test runs on those
    values only. ``x`` may be float32 already (the kernel's own output), which skips the cast;
    the answer is the same."""
    res: dict[str, np.ndarray] = {}
    with np.errstate(over="ignore", invalid="ignore"):
        x32 = x.astype(np.float32, copy=False)
        in32 = x32 == x
    sub: np.ndarray | None = None
    for c in _GRID_CANDIDATES:
        cf = FORMATS[c]
        if cf.p >= out.p:
            continue
        if c in _NARROW_MASKS:
            ok = _held_where(x32, in32 if sub is None else sub, lambda v, c=c: _narrow_held(v, c))
        elif c == "bf16":
            # bf16 is fp32 with the low 16 significand bits zero (same exponent range, subnormals
            # and inf included): the round trip holds exactly those values (NaN fails in32)
            ok = (x32.view(np.uint32) & np.uint32(0xFFFF)) == 0
            ok &= in32
        else:
            if cf.storage == np.float16:
                low = (x32.view(np.uint32) & np.uint32(0x1FFF)) == 0
                low &= in32
                ok = _held_where(x32, low, _fp16_held)
            else:
                with np.errstate(over="ignore", invalid="ignore"):
                    ok = x32.astype(cf.storage).astype(np.float32) == x32
                ok &= in32
            if c in ("fp16", "bf16"):
                sub = ok.copy() if sub is None else sub & ok
        res[c] = ok
    return res


def _grid_counts(x: np.ndarray, out: Format) -> dict[str, int]:
    """How many of the (finite) values ``x`` each coarser grid candidate holds exactly.

    Every candidate grid (fp16, bf16, the fp8 grids) holds a value only where its low 13 fp32
    significand bits are zero, which is a small part of a typical output (1 in 8192 of random
    significands): the tests run on those values only, with the same counts."""
    with np.errstate(over="ignore", invalid="ignore"):
        x32 = x.astype(np.float32, copy=False)
    idx = np.flatnonzero((x32.view(np.uint32) & np.uint32(0x1FFF)) == 0)
    if idx.size * 8 < x.size:
        x = x[idx]
    return {c: int(np.count_nonzero(ok)) for c, ok in _grid_held(x, out).items()}


def _top_k(score: np.ndarray, k: int) -> np.ndarray:
    """Indices (ascending) of the ``k`` largest scores, ties to the lowest index.

    Exact: the ``k``-th largest of a strided subsample is at most the ``k``-th largest of
    all, so every element of the top ``k`` passes the first filter; the rest is a partition
    of the (few) survivors."""
    n = score.size
    if n <= k:
        return np.arange(n)
    step = max(1, n // (256 * k))
    smp = score[::step]
    thr = np.partition(smp, smp.size - k)[smp.size - k] if smp.size > k else smp.min()
    cand = np.flatnonzero(score >= thr)
    if cand.size > k:
        vals = score[cand]
        # Often most candidates tie at the threshold (0 for an exact output, inf for unwritten
        # elements): with fewer than k above it, the k-th largest is the threshold itself, and
        # otherwise it lies among those above, so only they need a partition.
        above_thr = vals[vals > thr]
        if above_thr.size < k:
            kth = thr
        else:
            kth = np.partition(above_thr, above_thr.size - k)[above_thr.size - k]
        above = cand[vals > kth]
        tied = cand[vals == kth][: k - above.size]
        cand = np.sort(np.concatenate([above, tied]))
    return cand


# --------------------------------------------------------------------------- recipe helpers


def default_recipe(inputs: Sequence[np.ndarray], actual: np.ndarray) -> PrecisionRecipe:
    """Recipe read off the arrays: inputs as stored, fp32 accumulation (fp64 if any input is
    fp64, int64 if all are integers), output as stored. Pass an explicit recipe whenever the
    kernel declares one; this default cannot know about TF32, bf16 PSUM or SR."""
    fmts = []
    for x in inputs:
        if x is None:
            continue
        try:
            fmts.append(format_of(np.asarray(x)))
        except ValueError:
            continue
    if not fmts:
        fmts = [FORMATS["fp32"]]
    if all(f.kind == "int" for f in fmts):
        acc = "int64"
    elif any(f.name == "fp64" for f in fmts):
        acc = "fp64"
    else:
        acc = "fp32"
    try:
        out = format_of(np.asarray(actual)).name
    except ValueError:
        out = "fp32"
    return PrecisionRecipe(inputs=tuple(f.name for f in fmts), accumulate=acc, output=out)


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


# --------------------------------------------------------------------------- special values


@dataclass(frozen=True)
class SpecialValueRule:
    """One documented platform difference in special values (research note §2.4, §4.6).

    ``applies(y, got, out)`` marks elements where a NaN/Inf mismatch is this documented
    difference (G1 then warns instead of failing); rules without it are documentation only
    (handled elsewhere, or not detectable from outputs). ``platforms`` restricts a rule to
    recipes declaring one of them.
    """

    id: str
    situation: str
    behaviours: str
    applies: Callable[[np.ndarray, np.ndarray, Format], np.ndarray] | None = None
    platforms: tuple[str, ...] = ()


def _overflow_variant(y: np.ndarray, got: np.ndarray, out: Format) -> np.ndarray:
    if out.kind != "float":
        return np.zeros(y.shape, dtype=bool)
    over = np.isfinite(y) & (np.abs(y) > out.max)
    same_sign = np.sign(got) == np.sign(y)
    return over & (np.isnan(got) | (np.isinf(got) & same_sign) | ((np.abs(got) == out.max) & same_sign))


def _saturated_inf(y: np.ndarray, got: np.ndarray, out: Format) -> np.ndarray:
    return np.isinf(y) & (np.abs(got) == out.max) & (np.sign(got) == np.sign(y))


SPECIAL_VALUE_TABLE: tuple[SpecialValueRule, ...] = (
    SpecialValueRule("overflow", "result beyond the output format's max",
                     "ml_dtypes e4m3/e5m2 → ±inf, ml_dtypes/PyTorch e4m3fn → NaN, Neuron trn2 e4m3 → NaN, "
                     "NVIDIA __NV_SATFINITE → ±max", _overflow_variant),
    SpecialValueRule("saturate_infinity", "±inf result on trn1 with --enable-saturate-infinity", "±max",
                     _saturated_inf, ("trn1",)),
    SpecialValueRule("ftz", "subnormal result", "flushed to ±0 (CUDA fast-math; undocumented on Neuron): "
                     "accepted through the underflow floor η, not a special value"),
    SpecialValueRule("nan_payload", "NaN sign and payload", "ignored: every NaN matches every NaN"),
    SpecialValueRule("signed_zero", "±0", "equal (except ops whose result is the sign of zero)"),
    SpecialValueRule("transpose_nan_spread", "NaN/Inf through a TensorE identity-matmul transpose (NeuronCore-v2)",
                     "spreads across the output row; v3+ is_transpose is bit-accurate (not modelled: no transpose op)"),
)


# --------------------------------------------------------------------------- prepared blocks


def _ratio_pre(e: np.ndarray, tau: np.ndarray, bad: np.ndarray | None, mask: np.ndarray | None) -> np.ndarray:
    """:func:`_ratio` with the ``tau``-only part (where ``tau`` is not positive) precomputed."""
    r = e / tau
    if bad is not None:
        r[bad] = np.where(e[bad] > 0, np.inf, 0.0)
    if mask is not None:
        np.putmask(r, ~mask, 0.0)
    return r


@dataclass
class _Block:
    """One block of output elements with everything the gates derive from the oracle and the
    bounds alone (nothing here depends on the kernel's output), so a :class:`PreparedCheck`
    can keep it and judge many outputs against it."""

    e0: int
    y: np.ndarray
    scale: np.ndarray | None
    bb: BoundsBlock
    y_out: np.ndarray
    exp_nan: np.ndarray
    exp_inf: np.ndarray
    exp_sp: np.ndarray
    exp_special: bool
    valid: np.ndarray
    all_valid: bool
    n_contract: int
    nan_expected: int
    inf_expected: int
    ay: np.ndarray
    y_zero: bool
    ulp_y: np.ndarray
    sum_y2: float
    det_bad: np.ndarray | None
    prb_bad: np.ndarray | None
    exact_any: bool
    exact_nz: np.ndarray | None
    exact_nz_any: bool
    sig_fin: np.ndarray | None
    sig_fin_all: bool
    sg_all: np.ndarray | None
    sig_sum2: float
    sig_max: float
    zeros_ratio: float
    grid_y: dict[str, np.ndarray]
    grid_y_n: dict[str, int]
    #: G7 witness (generic path, provisional magnitudes): compared, non-exact elements whose
    #: |y| exceeds the bound under the inflated witness magnitude; None elsewhere
    witness: np.ndarray | None = None

    def nbytes(self) -> int:
        seen: set[int] = set()
        total = 0

        def add(a: Any) -> None:
            nonlocal total
            if isinstance(a, np.ndarray) and id(a) not in seen:
                seen.add(id(a))
                total += a.nbytes

        for v in vars(self).values():
            add(v)
        for v in vars(self.bb).values():
            add(v)
        for v in (*self.bb.terms.values(), *self.grid_y.values()):
            add(v)
        return total


def _make_block(e0: int, ob: OracleBlock, bb: BoundsBlock, recipe: PrecisionRecipe, statistical: bool,
                witness_bb: BoundsBlock | None = None) -> _Block:
    out = recipe.out_format
    y = ob.y
    n = y.size
    with np.errstate(all="ignore"):
        y_out = round_to(y, out, overflow=recipe.overflow)
        exp_nan, exp_inf = np.isnan(y_out), np.isinf(y_out)
        exp_sp = exp_nan | exp_inf
        if bb.contract is None:
            valid = np.ones(n, dtype=bool)
            n_contract = 0
        else:
            valid = ~bb.contract
            n_contract = int(bb.contract.sum())
        ay = np.abs(y)
        det_bad = ~(bb.tau_det > 0)
        prb_bad = ~(bb.tau_prb > 0)
        exact_nz = None if bb.exact is None else bb.exact & (y_out != 0)
        sig = bb.sigma
        sig_fin = None if sig is None else np.isfinite(sig)
        sig_fin_all = sig_fin is not None and bool(sig_fin.all())
        sg_all = np.maximum(sig, np.finfo(np.float64).tiny) if sig_fin_all else None
        tau_gate = bb.tau_prb if statistical else bb.tau_det
        zeros_ratio = float(_ratio(ay, tau_gate, None).max()) if n else 0.0
        grid_y = _grid_held(y_out, out) if out.kind == "float" and out.p > 8 else {}
        witness = None
        if witness_bb is not None:
            m = np.isfinite(y_out)
            if witness_bb.contract is not None:
                m &= ~witness_bb.contract
            if witness_bb.exact is not None:
                m &= ~witness_bb.exact
            tau_w = witness_bb.tau_prb if statistical else witness_bb.tau_det
            witness = m & (ay > tau_w)
        return _Block(
            e0=e0, y=y, scale=ob.scale, bb=bb, y_out=y_out, exp_nan=exp_nan, exp_inf=exp_inf, exp_sp=exp_sp,
            exp_special=bool(exp_sp.any()), valid=valid, all_valid=bool(valid.all()), n_contract=n_contract,
            nan_expected=int((exp_nan & valid).sum()), inf_expected=int((exp_inf & valid).sum()), ay=ay,
            y_zero=bool((ay == 0).any() or np.isnan(ay).any()),
            ulp_y=ulp_key(y_out, out), sum_y2=float(np.sum(y * y)),
            det_bad=det_bad if det_bad.any() else None, prb_bad=prb_bad if prb_bad.any() else None,
            exact_any=bool(bb.exact is not None and bb.exact.any()), exact_nz=exact_nz,
            exact_nz_any=bool(exact_nz is not None and exact_nz.any()), sig_fin=sig_fin, sig_fin_all=sig_fin_all,
            sg_all=sg_all, sig_sum2=float(np.sum(sg_all * sg_all)) if sg_all is not None else 0.0,
            sig_max=float(sg_all.max()) if sg_all is not None and n else 0.0, zeros_ratio=zeros_ratio,
            grid_y=grid_y, grid_y_n={c: int(np.count_nonzero(v)) for c, v in grid_y.items()}, witness=witness)


# --------------------------------------------------------------------------- streaming stats


@dataclass
class _Stream:
    recipe: PrecisionRecipe
    statistical: bool
    out_shape: tuple[int, ...]
    worst_k: int
    has_ref: bool
    n: int = 0
    n_compared: int = 0
    n_exact: int = 0
    n_contract: int = 0
    contract_reasons: set[str] = field(default_factory=set)
    max_abs: float = 0.0
    max_abs_idx: int = -1
    max_abs_allowed: float = math.nan
    max_rel: float = 0.0
    max_rel_idx: int = -1
    max_ulp: int = 0
    ulp_hist: np.ndarray = field(default_factory=lambda: np.zeros(40, dtype=np.int64))
    sum_e2: float = 0.0
    sum_y2: float = 0.0
    margin_det: float = 0.0
    margin_prb: float = 0.0
    exceed_det: int = 0
    exceed_prb: int = 0
    exact_bad: int = 0
    exact_bad_maxulp: int = 0
    nan_expected: int = 0
    nan_got: int = 0
    inf_expected: int = 0
    inf_got: int = 0
    nan_produced: int = 0
    nan_swallowed: int = 0
    inf_mismatch: int = 0
    explained: int = 0
    explained_by: dict[str, int] = field(default_factory=dict)
    first_special: int = -1
    z_hist: np.ndarray = field(default_factory=lambda: np.zeros(len(_Z_EDGES), dtype=np.int64))
    z_max: float = 0.0
    z_over: int = 0
    z_sum2: float = 0.0
    z_n: int = 0
    s_sum: float = 0.0
    s_sum2: float = 0.0
    sig_sum2: float = 0.0
    sig_max: float = 0.0
    ref_sum2: float = 0.0
    ref_max: float = 0.0
    ref_e_sum2: float = 0.0
    ref_e_max: float = 0.0
    ref_n: int = 0
    cr: int = 0
    cr_ref: int = 0
    s_hist: np.ndarray = field(default_factory=lambda: np.zeros(len(_S_EDGES) + 1, dtype=np.int64))
    s_hist_ref: np.ndarray = field(default_factory=lambda: np.zeros(len(_S_EDGES) + 1, dtype=np.int64))
    zeros_ratio: float = 0.0
    zeros_fail: bool = False
    grid_got: dict[str, int] = field(default_factory=dict)
    grid_exp: dict[str, int] = field(default_factory=dict)
    grid_total: int = 0
    mismatch_idx: list[np.ndarray] = field(default_factory=list)
    mismatch_n: int = 0
    heap: list[tuple[float, int, dict[str, Any]]] = field(default_factory=list)

    def _push_worst(self, score: np.ndarray, base: int, rec: Callable[[int], dict[str, Any]]) -> None:
        if score.size == 0:
            return
        for j in _top_k(score, min(self.worst_k, score.size)):
            s = float(score[j])
            if not s > 0 and not math.isinf(s):
                continue
            item = (s, -(base + int(j)), rec(int(j)))
            if len(self.heap) < self.worst_k:
                heapq.heappush(self.heap, item)
            elif item[:2] > self.heap[0][:2]:
                heapq.heapreplace(self.heap, item)

    def update(self, blk: _Block, got: np.ndarray, ref: np.ndarray | None, out: Format,
               raw: np.ndarray | None = None) -> None:
        """Fold one block in. ``got`` is the block of the output in float64; ``raw``, when given,
        the same elements in the output's own dtype if that is ``out``'s storage type: the ULP
        keys and grid membership are read off it directly (the float64 round trip is exact, so
        the results are the same, without two conversions)."""
        r = self.recipe
        e0, y, bb = blk.e0, blk.y, blk.bb
        nblk = y.size
        self.n += nblk
        valid = blk.valid
        if bb.contract is not None:
            self.n_contract += blk.n_contract
            if bb.contract_reason:
                self.contract_reasons.add(bb.contract_reason)
        y_out = blk.y_out
        unexplained: np.ndarray | None = None
        fin: np.ndarray | None = None  # None: every element finite on both sides
        self.nan_expected += blk.nan_expected
        self.inf_expected += blk.inf_expected
        if blk.exp_special or not np.isfinite(got).all():
            exp_nan, exp_inf = blk.exp_nan, blk.exp_inf
            got_nan, got_inf = np.isnan(got), np.isinf(got)
            fin = ~(blk.exp_sp | got_nan | got_inf)
            sp_match = (exp_nan & got_nan) | (exp_inf & got_inf & (y_out == got))
            sp_bad = ~fin & ~sp_match & valid
            self.nan_got += int((got_nan & valid).sum())
            self.inf_got += int((got_inf & valid).sum())
            if sp_bad.any():
                # the rules are elementwise: test the offending elements only
                bi = np.flatnonzero(sp_bad)
                y_b, got_b = y.take(bi), got.take(bi)
                expl = np.zeros(bi.size, dtype=bool)
                for rule in SPECIAL_VALUE_TABLE:
                    if rule.applies is None or (rule.platforms and r.platform not in rule.platforms):
                        continue
                    hit = ~expl & rule.applies(y_b, got_b, out)
                    if hit.any():
                        self.explained_by[rule.id] = self.explained_by.get(rule.id, 0) + int(hit.sum())
                        expl |= hit
                self.explained += int(expl.sum())
                unexplained = sp_bad.copy()
                unexplained[bi[expl]] = False
                un_b = ~expl
                gn_b, en_b = got_nan.take(bi), exp_nan.take(bi)
                self.nan_produced += int((un_b & gn_b & ~en_b).sum())
                self.nan_swallowed += int((un_b & en_b & ~gn_b).sum())
                self.inf_mismatch += int((un_b & ~(gn_b & ~en_b) & ~(en_b & ~gn_b)).sum())
                if self.first_special < 0 and un_b.any():
                    self.first_special = e0 + int(bi[np.argmax(un_b)])
        if fin is None:
            cmp_ = valid
            all_cmp = blk.all_valid
        else:
            cmp_ = fin & valid
            all_cmp = bool(cmp_.all())
        exact = bb.exact
        if exact is None or not blk.exact_any:
            ex_any = False
            ex = None
        else:
            ex = exact if all_cmp else exact & cmp_
            ex_any = bool(ex.any())
        all_ne = all_cmp and not ex_any
        if all_ne:
            ne = cmp_
        else:
            ne = cmp_ & ~ex if ex is not None else cmp_
        self.n_compared += nblk if all_cmp else int(np.count_nonzero(cmp_))
        if ex_any:
            self.n_exact += int(np.count_nonzero(ex))
        diff = got - y
        e = np.abs(diff)
        # the compared elements as indices (gathering with them is several times faster than
        # indexing with the mask each time); None: all of them
        ci = None if all_cmp else np.flatnonzero(cmp_)
        if not all_cmp:
            np.putmask(e, ~cmp_, 0.0)
        # exact elements: bitwise (value) equality with fl_out(y), or either neighbour
        exact_bad = None
        n_exact_bad = 0
        if ex_any:
            assert ex is not None
            ok = got == y_out
            if out.kind == "float":  # flush-to-zero equivalence for subnormal results
                ok |= (blk.ay < out.tiny) & (got == 0)
            if bb.allowed_lo is not None:
                ok |= (got == bb.allowed_lo) | (got == bb.allowed_hi)
            if r.rounding == "sr" and out.kind == "float":
                lo, hi = _fl_out_neighbours(np.where(ex, y, 0.0), r)
                ok |= (got == lo) | (got == hi)
            exact_bad = ex & ~ok
            n_exact_bad = int(np.count_nonzero(exact_bad))
            if n_exact_bad:
                self.exact_bad += n_exact_bad
                d = np.abs(ulp_key(got[exact_bad], out) - ulp_key(y_out[exact_bad], out))
                self.exact_bad_maxulp = max(self.exact_bad_maxulp, int(d.max()))
            else:
                exact_bad = None
        r_det = _ratio_pre(e, bb.tau_det, blk.det_bad, None if all_ne else ne)
        r_prb = _ratio_pre(e, bb.tau_prb, blk.prb_bad, None if all_ne else ne)
        if exact_bad is not None:
            r_det[exact_bad] = np.inf
            r_prb[exact_bad] = np.inf
        if nblk:
            self.margin_det = max(self.margin_det, float(r_det.max()))
            self.margin_prb = max(self.margin_prb, float(r_prb.max()))
        over_det, over_prb = r_det > 1, r_prb > 1
        self.exceed_det += int(np.count_nonzero(over_det)) - n_exact_bad
        self.exceed_prb += int(np.count_nonzero(over_prb)) - n_exact_bad
        tau_gate = bb.tau_prb if self.statistical else bb.tau_det
        # plain metrics
        if nblk and (all_cmp or cmp_.any()):
            j = int(np.argmax(e))
            if e[j] > self.max_abs or self.max_abs_idx < 0:
                self.max_abs, self.max_abs_idx = float(e[j]), e0 + j
                self.max_abs_allowed = 0.0 if (ex is not None and ex[j]) else float(tau_gate[j])
            # e/|y| on compared elements (inf where y = 0 < e), 0 elsewhere: outside cmp_ e is
            # 0 and 0/|y| is 0 or NaN, as is 0/0 inside, so NaN -> 0 is exactly the old where-chain
            rel = e / blk.ay
            if blk.y_zero or not all_cmp:  # 0/0 only where y = 0 (or e was zeroed outside cmp_)
                rel[np.isnan(rel)] = 0.0
            j = int(np.argmax(rel))
            if rel[j] > self.max_rel or self.max_rel_idx < 0:
                self.max_rel, self.max_rel_idx = float(rel[j]), e0 + j
            gc, yoc = (got, y_out) if ci is None else (got.take(ci), y_out.take(ci))
            if raw is not None and raw.dtype == np.float32 and out.name == "fp32":
                d = _ulp_key32(raw if ci is None else raw.take(ci))
            elif raw is not None:
                d = ulp_key(raw if ci is None else raw.take(ci), out)
            else:
                d = ulp_key(gc, out)
            d -= blk.ulp_y if ci is None else blk.ulp_y.take(ci)
            np.abs(d, out=d)
            if d.size:
                dmax = int(d.max())
                self.max_ulp = max(self.max_ulp, dmax)
                if dmax < _ULP_TABLE_N:
                    # count each distance once, then add the counts up per bucket (two passes, not six)
                    counts = np.bincount(d)
                    self.ulp_hist += np.bincount(_ULP_BUCKET[:counts.size], weights=counts,
                                                 minlength=40)[:40].astype(np.int64)
                elif d.dtype == np.int64:
                    self.ulp_hist += _ulp_hist(d)
                else:
                    self.ulp_hist += np.bincount(_ulp_buckets(d.astype(np.int64)), minlength=40)[:40]
            ec = e if ci is None else e.take(ci)
            self.sum_e2 += float(np.sum(ec * ec))
            if ci is None:
                self.sum_y2 += blk.sum_y2
            else:
                yc = y.take(ci)
                self.sum_y2 += float(np.sum(yc * yc))
            self.cr += int(np.count_nonzero(gc == yoc))
        # z-score (expected error of a correct kernel under the declared recipe)
        sig = bb.sigma
        if sig is not None and nblk:
            all_z = all_ne and blk.sig_fin_all
            zm = None if all_z else (ne if blk.sig_fin_all else ne & blk.sig_fin)
            if all_z or zm.any():  # type: ignore[union-attr]
                if all_z:
                    sg = blk.sg_all
                    s = diff / sg
                    self.sig_sum2 += blk.sig_sum2
                    self.sig_max = max(self.sig_max, blk.sig_max)
                else:
                    zi = np.flatnonzero(zm)
                    sg = np.maximum(sig.take(zi), np.finfo(np.float64).tiny)
                    s = diff.take(zi) / sg
                    self.sig_sum2 += float(np.sum(sg * sg))
                    self.sig_max = max(self.sig_max, float(sg.max()))
                # z = e / sg = |diff| / sg is exactly |s| (sg > 0; division is sign-symmetric), and
                # so z * z is s * s: one division and one sum of squares serve both statistics
                z = np.abs(s)
                self.z_max = max(self.z_max, float(z.max()))
                self.z_over += int(np.count_nonzero(z > Z_P99_LIMIT))
                s2 = float(np.sum(z * z))
                self.z_sum2 += s2
                self.z_n += int(z.size)
                # z is not needed after this: its memory holds the bins
                self.z_hist += np.bincount(_z_bins(z, overwrite=True), minlength=len(_Z_EDGES))[: len(_Z_EDGES)]
                self.s_sum += float(s.sum())
                self.s_sum2 += s2
                if self.has_ref:
                    self.s_hist += np.bincount(np.searchsorted(_S_EDGES, s), minlength=len(_S_EDGES) + 1)
        # reference implementation in the same recipe
        if ref is not None:
            fin_m = np.ones(nblk, dtype=bool) if fin is None else fin
            rf = fin_m & valid & np.isfinite(ref) & (blk.sig_fin if sig is not None else True)
            if rf.any():
                er = np.abs(ref[rf] - y[rf])
                self.ref_n += int(rf.sum())
                self.ref_sum2 += float(np.sum(er * er))
                self.ref_max = max(self.ref_max, float(er.max()))
                self.ref_e_sum2 += float(np.sum(e[rf] ** 2))
                self.ref_e_max = max(self.ref_e_max, float(e[rf].max()))
                self.cr_ref += int(np.sum(ref[rf] == y_out[rf]))
                if sig is not None:
                    sgr = np.maximum(sig[rf], np.finfo(np.float64).tiny)
                    self.s_hist_ref += np.bincount(np.searchsorted(_S_EDGES, (ref[rf] - y[rf]) / sgr),
                                                   minlength=len(_S_EDGES) + 1)
        # would an all-zeros output pass?
        if nblk:
            if all_ne:
                self.zeros_ratio = max(self.zeros_ratio, blk.zeros_ratio)
            elif ne.any():
                ni = np.flatnonzero(ne)
                zr = _ratio(blk.ay.take(ni), tau_gate.take(ni), None)
                self.zeros_ratio = max(self.zeros_ratio, float(zr.max()))
        if blk.exp_special or (ex_any and (blk.exact_nz_any if all_cmp else bool((blk.exact_nz & cmp_).any()))):
            self.zeros_fail = True
        # output-grid fingerprint (silent downcast of the output)
        if out.kind == "float" and out.p > 8 and self.grid_total < _GRID_SAMPLE:
            gv = got if raw is None else raw
            nz = gv != 0
            if not all_cmp:
                nz &= cmp_
            n_nz = int(np.count_nonzero(nz))
            if n_nz:
                self.grid_total += n_nz
                all_nz = n_nz == nblk
                for c, n in _grid_counts(gv if all_nz else gv.take(np.flatnonzero(nz)), out).items():
                    self.grid_got[c] = self.grid_got.get(c, 0) + n
                for c, held in blk.grid_y.items():
                    n = blk.grid_y_n[c] if all_nz else int(np.count_nonzero(held & nz))
                    self.grid_exp[c] = self.grid_exp.get(c, 0) + n
        # mismatches (for counts and location patterns)
        mism = over_det
        if self.statistical:
            mism |= over_prb
        if unexplained is not None:
            mism |= unexplained
        if exact_bad is not None:
            mism |= exact_bad
        n_mism = int(np.count_nonzero(mism))
        if n_mism:
            self.mismatch_n += n_mism
            if sum(len(a) for a in self.mismatch_idx) < _MISMATCH_CAP:
                self.mismatch_idx.append(np.flatnonzero(mism)[:_MISMATCH_CAP] + e0)
        # worst elements
        r_gate = r_prb if self.statistical else r_det
        score = r_gate if unexplained is None else np.where(unexplained, np.inf, r_gate)
        terms = bb.terms
        scale = blk.scale

        def rec(j: int) -> dict[str, Any]:
            dom = ""
            if terms:
                vals = {k: float(np.asarray(v)[j]) if np.ndim(v) else float(v) for k, v in terms.items()}
                dom = max(vals, key=vals.get)  # type: ignore[arg-type]
            exj = ex is not None and bool(ex[j])
            return {
                "got": float(got[j]), "expected": float(y[j]),
                "error": float(abs(got[j] - y[j])) if (fin is None or fin[j]) else math.nan,
                "bound": 0.0 if exj else float(tau_gate[j]), "bound_det": 0.0 if exj else float(bb.tau_det[j]),
                "scale": None if scale is None else float(scale[j]),
                "z": None if sig is None or not ne[j] else float(e[j] / max(sig[j], 1e-300)),
                "dominant": "bitwise (exact in every order)" if exj else dom,
            }

        self._push_worst(score, e0, rec)

    # ------------------------------------------------------------------ summaries

    def z_quantile(self, q: float) -> float:
        if self.z_n == 0:
            return math.nan
        c = np.cumsum(self.z_hist)
        i = int(np.searchsorted(c, q * self.z_n))
        i = min(i, len(_Z_EDGES) - 1)
        return float(_Z_EDGES[min(i + 1, len(_Z_EDGES) - 1)])

    def worst(self) -> list[WorstElement]:
        out = []
        for score, negi, d in sorted(self.heap, key=lambda t: (-t[0], -t[1])):
            flat = -negi
            index = tuple(int(v) for v in np.unravel_index(flat, self.out_shape)) if self.out_shape else ()
            out.append(WorstElement(index=index, ratio=score, **d))
        return out

    def grid_fingerprint(self) -> str | None:
        """Coarsest format that holds (nearly) every output although the oracle's rounded
        values would mostly not fit it: the output was silently rounded to that format."""
        if self.grid_total < 16:
            return None
        best = None
        for c in _GRID_CANDIDATES:
            if c not in self.grid_got:
                continue
            frac_got = self.grid_got[c] / self.grid_total
            frac_exp = self.grid_exp[c] / self.grid_total
            if frac_got >= 0.999 and frac_exp <= 0.5:
                if best is None or FORMATS[c].p < FORMATS[best].p:
                    best = c
        return best


def _ulp_hist_dict(h: np.ndarray) -> dict[str, int]:
    out = {}
    for b, c in enumerate(h):
        if not c:
            continue
        if b <= 2:
            label = str(b)
        else:
            lo, hi = 2 ** (b - 2) + 1, 2 ** (b - 1)
            label = f"{lo}-{hi}" if b < 39 else f">{2 ** 36}"
        out[label] = int(c)
    return out


def _bhattacharyya(h1: np.ndarray, h2: np.ndarray) -> float:
    if h1.sum() == 0 or h2.sum() == 0:
        return math.nan
    p, q = h1 / h1.sum(), h2 / h2.sum()
    return float(np.sum(np.sqrt(p * q)))


def _few(v: np.ndarray) -> np.ndarray | None:
    """``np.unique(v)`` when it has at most two values (every value is the min or the max), else
    None: the pattern tests below only ever ask whether there are at most two, and which. Two
    reductions and one comparison instead of a sort or hash of every index."""
    if v.size == 0:
        return np.unique(v)
    lo, hi = v.min(), v.max()
    if lo == hi:
        return np.array([lo], dtype=v.dtype)
    if np.all((v == lo) | (v == hi)):
        return np.array([lo, hi], dtype=v.dtype)
    return None


def _where(indices: list[np.ndarray], total_mismatch: int, shape: tuple[int, ...], n: int) -> str:
    """Describe where mismatches sit: a few rows/columns, a diagonal, a 128-periodic pattern,
    the last tile, or spread out."""
    if not indices or total_mismatch == 0:
        return ""
    flat = np.concatenate(indices)
    if not shape or len(shape) == 0:
        return "the scalar output"
    sub = np.unravel_index(flat, shape)
    parts = []
    if len(shape) >= 2:
        rows, cols = sub[-2], sub[-1]
        ur, uc = _few(rows), _few(cols)
        nr, nc = shape[-2], shape[-1]
        if uc is not None and nr > 1 and total_mismatch >= min(nr, 4) and uc.size < nc:
            parts.append(f"confined to column(s) {', '.join(map(str, uc[:2]))}")
        elif ur is not None and nc > 1 and total_mismatch >= min(nc, 4) and ur.size < nr:
            parts.append(f"confined to row(s) {', '.join(map(str, ur[:2]))}")
        elif total_mismatch >= 4 and (diag := _few(cols - rows)) is not None:
            parts.append(f"along the diagonal(s) col−row = {', '.join(map(str, diag[:2]))}")
        for name, v, size in (("columns", cols, nc), ("rows", rows, nr)):
            if size > 128 and v.size >= 4:
                res = _few(v % 128)
                if res is not None and v.min() != v.max():
                    parts.append(f"periodic in the {name} with period 128 (residue {res[0]}): a tile-edge pattern")
                    break
                if v.min() >= (size // 128) * 128 and size % 128:
                    parts.append(f"only in the last partial 128-{name[:-1]} tile")
                    break
    else:
        v = sub[-1]
        size = shape[-1]
        if size > 128 and v.size >= 2 and _few(v % 128) is not None:
            parts.append("periodic with period 128: a tile-edge pattern")
    if not parts:
        frac = 100.0 * total_mismatch / max(n, 1)
        parts.append(f"spread over the output ({frac:.3g}% of elements)")
    return "; ".join(parts)


# --------------------------------------------------------------------------- the check


def _g0_fail(actual: np.ndarray, detail: str, spec: OpSpec, recipe: PrecisionRecipe, shape: tuple[int, ...],
             family: str | None) -> Verdict:
    g = GateResult("G0", "fail", detail=detail)
    m = Metrics(n_elements=int(np.size(actual)))
    text = explain(status="fail", deciding=g, op=spec.name, recipe=recipe, shape=shape, input_family=family,
                   metrics=m, worst=[], findings=[], notes=[], statistical=False)
    return Verdict("fail", math.inf, "G0", (g,), (), recipe, spec.name, shape, family, m, (), (), text)


def check(
    actual: np.ndarray,
    inputs: Sequence[np.ndarray] | Mapping[str, np.ndarray] | np.ndarray,
    op: str | OpSpec | Callable[..., np.ndarray],
    recipe: PrecisionRecipe | Mapping[str, Any] | None = None,
    *,
    reference: np.ndarray | None = None,
    input_family: str | None = None,
    worst_k: int = 10,
    block_elems: int = 1 << 18,
    diagnose: bool = True,
    **op_params: Any,
) -> Verdict:
    """Judge a kernel output against the numerics standard (docs/numerics.md).

    Args:
        actual: the kernel's output, in any dtype able to hold the declared output format.
        inputs: the arrays the kernel consumed, in op order or by operand name.
        op: registered op name, :class:`OpSpec`, or a float64 reference function (generic
            path; needs ``k=`` or ``recipe.k``).
        recipe: the declared recipe (or its TOML/dict form); None reads one off the dtypes.
        reference: optional same-precision reference output for the ratio gate G4.
        input_family: input family name; a random family enables gates G3 and G5.
        worst_k: how many worst elements to keep.
        block_elems: output elements processed per block (bounds peak memory).
        diagnose: name likely causes when the verdict fails.
        **op_params: op parameters (``axis``, ``mask``, ``eps``, ``scale_a``, ``divide`` ...).

    Returns:
        A :class:`Verdict`; malformed *kernel output* (shape, dtype) is a G0 failure, not an
        exception.

    Raises:
        UnknownOpError, RecipeError, UnknownDtypeError, ValueError: malformed *requests*
            (unknown op, bad recipe, wrong number or names of inputs, mismatched operand
            shapes), which are the caller's bug, not the kernel's.

    ``check(actual, inputs, op, recipe, ...)`` is ``PreparedCheck(inputs, op, recipe,
    keep_blocks=False, ...).check(actual, ...)``: to judge many outputs of the same inputs,
    build one :class:`PreparedCheck` and call its ``check`` for each.
    """
    params = dict(op_params)
    spec = _resolve_op(op, params)
    if recipe is None:
        arrays = _normalise_inputs(inputs, spec, dict(params))
        recipe = default_recipe([a for a in arrays if a is not None], np.asarray(actual))
    pc = PreparedCheck(inputs, spec, recipe, input_family=input_family, block_elems=block_elems,
                       keep_blocks=False, **params)
    return pc.check(actual, reference=reference, worst_k=worst_k, diagnose=diagnose)


class PreparedCheck:
    """The part of a check that depends only on the inputs, the op and the recipe.

    The float64 oracle, the per-element bounds and every statistic derived from them alone
    (rounded oracle, special-value masks, ULP keys, bound masks, grid membership, the G7
    witness) are computed once; :meth:`check` then judges any number of outputs of the
    same computation against them, with exactly the gates and results of :func:`check`.
    A review harness uses it to judge many candidate kernels on the same inputs.

    ``keep_blocks=True`` keeps every block in memory (:meth:`nbytes` says how much, about
    100 bytes per output element); ``False`` streams blocks as :func:`check` does
    (bounded memory, the oracle is evaluated again on each call). The generic path's
    provisional blocks are always kept (its oracle is held whole anyway). Thread-safe:
    blocks are built under a lock; :meth:`check` never changes what is kept except by
    building it.
    """

    def __init__(self, inputs: Sequence[np.ndarray] | Mapping[str, np.ndarray] | np.ndarray,
                 op: str | OpSpec | Callable[..., np.ndarray], recipe: PrecisionRecipe | Mapping[str, Any], *,
                 input_family: str | None = None, block_elems: int = 1 << 18, keep_blocks: bool = True,
                 **op_params: Any) -> None:
        params = dict(op_params)
        spec = _resolve_op(op, params)
        arrays = _normalise_inputs(inputs, spec, params)
        if isinstance(recipe, Mapping):
            recipe = PrecisionRecipe.from_dict(recipe)
        notes: list[str] = []
        arrays, rnotes = round_inputs(arrays, spec, recipe)
        notes += rnotes
        prep = spec.prepare(arrays, {**spec.defaults, **params}, recipe)
        statistical = bool(input_family) and is_random_family(input_family)
        if input_family and not statistical:
            notes.append(f"input family '{input_family}' is structured, so only the hard bound (G2) and exactness "
                         "gate decide; the probabilistic and z-score gates are reported, not enforced")
        elif not input_family:
            notes.append("no input family declared: the probabilistic bound and z-score gates were reported, "
                         "not enforced")
        # context for the bound rules
        op_fmts: list[Format | None] = []
        eps_in = 0.0
        all_exact = True
        comp = recipe.compute_format
        for i, a in enumerate(arrays):
            if a is None:
                continue
            try:
                f = format_of(a)
            except ValueError:
                f = None
            op_fmts.append(f)
            if comp is not None and i < max(spec.n_data, 1) and f is not None and f.kind == "float" and comp.kind == "float":
                if f.p > comp.p and not exact_in(comp, a):
                    eps_in += comp.u
                    all_exact = False
        self.spec, self.arrays, self.params, self.recipe, self.prep = spec, arrays, params, recipe, prep
        self.shape: tuple[int, ...] = tuple(prep.out_shape)
        self.input_family, self.statistical = input_family, statistical
        self.ctx = RuleContext(recipe=recipe, facts=prep.facts, operand_formats=tuple(op_fmts), eps_in=eps_in,
                               operands_exact_in_compute=all_exact, activation=spec.name if spec.kind == "unary" else None)
        self.rule = RULES[spec.kind]
        self.rows_per_block = max(1, block_elems // max(prep.row_len, prep.work_per_row, 1))
        self.keep_blocks = keep_blocks
        self._notes = tuple(notes)
        #: generic path: magnitudes are provisional until ``prep.refine()`` (see gates docs)
        self.refinable = prep.refine is not None
        self._kept: list[list[_Block] | None] = [None, None]
        self._lock = threading.RLock()
        self._memo: OrderedDict[tuple[Any, ...], Any] = OrderedDict()  # output key -> verdict (check)
        # variant id -> its formula on the whole inputs (float64; None: it raised), built by the first
        # diagnosis that needs it when blocks are kept: it depends on the inputs only
        self._variant_outputs: dict[str, np.ndarray | None] = {}

    # ------------------------------------------------------------------ blocks

    def _generate(self, phase: int) -> Iterator[_Block]:
        prep = self.prep
        witness = phase == 0 and self.refinable
        for r0 in range(0, prep.n_rows, self.rows_per_block):
            r1 = min(prep.n_rows, r0 + self.rows_per_block)
            with self._lock, np.errstate(all="ignore"):  # NaN/Inf elements are masked by the gates
                ob = prep.evaluate(r0, r1)
                bb = self.rule(ob, self.ctx)
                wb = None
                if witness and prep.witness_scale is not None:
                    wob = OracleBlock(y=ob.y, scale=prep.witness_scale(r0, r1), sumsq=ob.sumsq, k=ob.k, aux=ob.aux,
                                      subnormal_scale=ob.subnormal_scale)
                    wb = self.rule(wob, self.ctx)
            yield _make_block(r0 * prep.row_len, ob, bb, self.recipe, self.statistical, wb)

    def _blocks(self, phase: int) -> Sequence[_Block] | Iterator[_Block]:
        """Phase 0: the magnitudes as prepared (provisional on the generic path); phase 1: refined."""
        with self._lock:
            if phase == 1 and self.prep.refine is not None:
                self._blocks(0)  # keep the provisional blocks: refine() replaces the magnitudes
                self.prep.refine()
            if self.keep_blocks or (phase == 0 and self.refinable):
                if self._kept[phase] is None:
                    self._kept[phase] = list(self._generate(phase))
                return self._kept[phase]  # type: ignore[return-value]
        return self._generate(phase)

    def materialise(self, refined: bool = False) -> PreparedCheck:
        """Build every kept block now (the first :meth:`check` would otherwise). ``refined=True``
        also completes the generic path's magnitude estimate and keeps the refined blocks, which
        the first check of an output that does not pass early would otherwise build; checks
        return the same verdicts either way."""
        self._blocks(0)
        if refined and self.refinable and self.keep_blocks:
            self._blocks(1)
        return self

    def nbytes(self) -> int:
        """Bytes held by the kept blocks and the variants' outputs (the prepared inputs not counted)."""
        with self._lock:
            return (sum(b.nbytes() for kept in self._kept if kept for b in kept)
                    + sum(v.nbytes for v in self._variant_outputs.values() if v is not None))

    # ------------------------------------------------------------------ judging

    def check(self, actual: np.ndarray, *, reference: np.ndarray | None = None, worst_k: int = 10,
              diagnose: bool = True) -> Verdict:
        """Judge one output (see :func:`check`, whose arguments these are).

        A verdict is a function of the output's bytes: the verdicts of the last few distinct
        outputs are kept, keyed by a SHA-256 of the bytes (with dtype and shape), and an output
        seen again gets its verdict back without being judged again. Candidates that compute the
        same thing produce the same bits — every correctly rounded result of an exactly rounded
        op, every kernel with the same accumulation order — so an RL loop meets them often.
        Hashing costs about 0.6 ms per MB on a miss."""
        key = None if reference is not None else self._output_key(actual, ("check", worst_k, diagnose))
        if key is not None:
            with self._lock:
                hit = self._memo.get(key)
                if hit is not None:
                    self._memo.move_to_end(key)
                    return hit
        verdict = self._check(actual, reference=reference, worst_k=worst_k, diagnose=diagnose)
        if key is not None:
            self._remember(key, verdict)
        return verdict

    _MEMO_SIZE = 8

    @staticmethod
    def _output_key(actual: Any, what: tuple[Any, ...]) -> tuple[Any, ...] | None:
        import hashlib

        a = np.asarray(actual)
        if a.dtype.hasobject:
            return None
        a = np.ascontiguousarray(a)
        raw = a.reshape(-1).view(np.uint8)  # (ml_dtypes arrays export no buffer of their own type)
        return (*what, a.dtype.name, a.dtype.str, a.shape, hashlib.sha256(raw.data).digest())

    def _remember(self, key: tuple[Any, ...], value: Any) -> None:
        with self._lock:
            self._memo[key] = value
            self._memo.move_to_end(key)
            while len(self._memo) > self._MEMO_SIZE:
                self._memo.popitem(last=False)

    def _check(self, actual: np.ndarray, *, reference: np.ndarray | None = None, worst_k: int = 10,
               diagnose: bool = True) -> Verdict:
        spec, recipe, prep, shape = self.spec, self.recipe, self.prep, self.shape
        input_family, statistical = self.input_family, self.statistical
        notes = list(self._notes)
        actual = np.asarray(actual)
        # G0: shape and dtype
        if actual.shape != shape:
            if actual.size == int(np.prod(shape)) and tuple(d for d in actual.shape if d != 1) == tuple(d for d in shape if d != 1):
                actual = actual.reshape(shape)
            else:
                return _g0_fail(actual, f"output shape {actual.shape} differs from the expected {shape}", spec, recipe,
                                shape, input_family)
        out = recipe.out_format
        try:
            have = format_of(actual)
        except ValueError:
            return _g0_fail(actual, f"output dtype {actual.dtype} is not a numeric format", spec, recipe, shape,
                            input_family)
        if out.kind == "float" and have.kind == "float" and (have.p < out.p or have.max < out.max):
            return _g0_fail(actual, f"output is stored as {have.name} but the recipe declares {out.name}: the storage "
                            "dtype cannot hold the declared precision", spec, recipe, shape, input_family)
        if out.kind == "float" and have.kind == "int":
            return _g0_fail(actual, f"output is an integer array ({have.name}) but the recipe declares {out.name}",
                            spec, recipe, shape, input_family)
        if recipe.k is not None and spec.kind in ("contraction", "scan") and prep.k is not None and recipe.k != prep.k:
            return _g0_fail(actual, f"the recipe declares K = {recipe.k} but the inputs contract over K = {prep.k}",
                            spec, recipe, shape, input_family)

        actual_flat = actual.reshape(-1)
        # the output already in out's storage type (a float kernel output, e.g. fp32 for an fp32
        # recipe): ULP keys and grid tests read it without converting
        same_storage = out.kind == "float" and out.name not in ("tf32", "fp64") and actual.dtype == np.dtype(out.storage)
        ref_flat = None
        if reference is not None:
            reference = np.asarray(reference)
            if reference.size != actual.size:
                raise ValueError(f"reference has {reference.size} elements, the output has {actual.size}")
            ref_flat = reference.reshape(-1)

        def run_stream(phase: int) -> _Stream:
            stream = _Stream(recipe=recipe, statistical=statistical, out_shape=shape, worst_k=worst_k,
                             has_ref=reference is not None)
            for blk in self._blocks(phase):
                e1 = blk.e0 + blk.y.size
                raw = actual_flat[blk.e0:e1]
                got = raw.astype(np.float64)
                ref = None if ref_flat is None else ref_flat[blk.e0:e1].astype(np.float64)
                with np.errstate(all="ignore"):
                    stream.update(blk, got, ref, out, raw if same_storage else None)
            return stream

        stream = run_stream(0)
        if self.refinable:
            # Provisional magnitudes (generic path): they are lower bounds of the final ones, so a
            # pass under them is a pass under the final bounds (G2/G3 are monotone in S). Accept it
            # when G7 is settled too; anything else is judged again with the complete estimate.
            early = (_decide(stream, spec, recipe, prep, shape, input_family, statistical, list(notes)).status == "pass"
                     and self._g7_witness(actual_flat, stream))
            if early:
                notes.append("generic path: every element passes with the first "
                             f"{prep.facts.get('early_draws', 'few')} perturbation draws' lower bound of S, so the "
                             "remaining draws were skipped; the margin is an upper bound of the full estimate's")
            else:
                stream = run_stream(1)

        verdict = _decide(stream, spec, recipe, prep, shape, input_family, statistical, notes)
        if diagnose and verdict.status == "fail":
            verdict = self._diagnosed(verdict, actual)
        return verdict

    def diagnose(self, actual: np.ndarray, verdict: Verdict, *, hint: str | None = None) -> Verdict:
        """What ``check(actual, diagnose=True)`` returns, given ``verdict = check(actual,
        diagnose=False)``: the likely causes of a failure added (the costly part), as a separate
        step, so a caller can judge many outputs first and name causes for some of them only.

        ``hint``, a finding id (the cause named for another failing output of the same kernel), is
        tried first: when that defect model, output grid or variant reproduces this output decisively
        (the score a full search also treats as decisive), it is the finding and the other models are
        not tried; otherwise the search is the full one."""
        if verdict.status != "fail" or verdict.deciding_gate == "G0":  # check never diagnoses a G0 failure
            return verdict
        actual = np.asarray(actual)
        if actual.shape != self.shape:
            actual = actual.reshape(self.shape)  # check accepted it, so only unit axes differ
        # kept like check's verdicts (the diagnosis is a function of the output, the verdict and the hint)
        key = self._output_key(actual, ("diagnose", hint, id(verdict)))
        if key is not None:
            with self._lock:
                hit = self._memo.get(key)
                if hit is not None and hit[0] is verdict:
                    self._memo.move_to_end(key)
                    return hit[1]
        out = self._diagnosed(verdict, actual, hint)
        if key is not None:
            self._remember(key, (verdict, out))
        return out

    def _diagnosed(self, verdict: Verdict, actual: np.ndarray, hint: str | None = None) -> Verdict:
        spec = self.spec
        with self._lock:  # diagnosis evaluates the oracle on a sample of rows
            findings = _diagnose(verdict=verdict, spec=spec, arrays=self.arrays,
                                 params={**spec.defaults, **self.params}, recipe=self.recipe, prep=self.prep,
                                 actual=actual, ctx=self.ctx, stream_where=verdict.metrics.mismatch_where,
                                 hint=hint, variant_outputs=self._variant_outputs if self.keep_blocks else None)
        if findings:
            verdict = _rebuild(verdict, findings=tuple(findings), statistical=self.statistical)
        return verdict

    def _g7_witness(self, actual_flat: np.ndarray, stream: _Stream) -> bool:
        """Whether G7 ("an all-zeros output would pass") is certainly not triggered under the
        complete magnitude estimate: some compared element has ``|y|`` above its bound computed
        with ``prep.witness_scale`` (an inflated magnitude, see :func:`~.oracle.generic_op`), or
        G7 cannot trigger for reasons independent of ``S``."""
        if stream.zeros_fail or stream.n_compared == 0 or not self.refinable:
            return True
        for blk in self._blocks(0):
            if blk.witness is None:
                return True
            got = actual_flat[blk.e0:blk.e0 + blk.y.size].astype(np.float64)
            if (blk.witness & np.isfinite(got)).any():
                return True
        return False


def _rebuild(v: Verdict, *, findings: tuple[Finding, ...], statistical: bool) -> Verdict:
    deciding = v.gate(v.deciding_gate)
    text = explain(status=v.status, deciding=deciding, op=v.op, recipe=v.recipe, shape=v.shape,
                   input_family=v.input_family, metrics=v.metrics, worst=v.worst, findings=findings,
                   notes=v.notes, statistical=statistical)
    return Verdict(v.status, v.margin, v.deciding_gate, v.gates, v.worst, v.recipe, v.op, v.shape,
                   v.input_family, v.metrics, findings, v.notes, text)


def _decide(s: _Stream, spec: OpSpec, recipe: PrecisionRecipe, prep: Prepared, shape: tuple[int, ...],
            family: str | None, statistical: bool, notes: list[str]) -> Verdict:
    gates: list[GateResult] = [GateResult("G0", "pass")]
    out = recipe.out_format

    def flat_idx(i: int) -> tuple[int, ...]:
        return tuple(int(v) for v in np.unravel_index(i, shape)) if shape and i >= 0 else ()

    # G1 special values
    n_sp = s.nan_produced + s.nan_swallowed + s.inf_mismatch
    if n_sp:
        bits = []
        if s.nan_produced:
            bits.append(f"NaN produced at {s.nan_produced} elements where the oracle is finite")
        if s.nan_swallowed:
            bits.append(f"NaN swallowed at {s.nan_swallowed} elements where IEEE propagation gives NaN")
        if s.inf_mismatch:
            bits.append(f"{s.inf_mismatch} infinity mismatches (sign, or inf vs finite)")
        gates.append(GateResult("G1", "fail", float(n_sp), 0.0,
                                "; ".join(bits) + f" (first at index {flat_idx(s.first_special)})."))
    elif s.explained:
        rules = {r.id: r for r in SPECIAL_VALUE_TABLE}
        why = "; ".join(f"{n} × {rules[i].situation} ({rules[i].behaviours})" for i, n in s.explained_by.items())
        gates.append(GateResult("G1", "warn", float(s.explained), 0.0,
                                f"{s.explained} special values differ only by documented platform semantics: {why}."))
        notes.append(f"{s.explained} special values differ by documented platform semantics "
                     f"({', '.join(s.explained_by)}; research note §2.4)")
    else:
        gates.append(GateResult("G1", "pass", 0.0, 0.0))
    # GE exactness
    if s.n_exact or s.exact_bad:
        if s.exact_bad:
            gates.append(GateResult("GE", "fail", float(s.exact_bad), 0.0,
                                    f"{s.exact_bad} of {s.n_exact} elements that every correct summation order "
                                    f"computes exactly differ from the correctly rounded result (up to "
                                    f"{s.exact_bad_maxulp} ulp in {out.name})."))
        else:
            gates.append(GateResult("GE", "pass", 0.0, 0.0, f"{s.n_exact} exact elements match bitwise."))
    # G2 hard bound
    if s.exceed_det > 0:
        orders = " in any summation order" if spec.kind in ("contraction", "scan", "generic") else ""
        gates.append(GateResult("G2", "fail", s.margin_det, 1.0,
                                f"max error/bound = {s.margin_det:.3g} against the worst-case bound: impossible under "
                                f"the declared recipe{orders}."))
    else:
        gates.append(GateResult("G2", "pass", s.margin_det if math.isfinite(s.margin_det) else 0.0, 1.0))
    # G3 probabilistic bound
    lam = recipe.lam
    if s.exceed_prb > 0:
        det = (f"{s.exceed_prb} elements exceed the probabilistic bound λ√K·u·S (λ = {lam:g}; max ratio "
               f"{s.margin_prb:.3g}); a correct kernel exceeds it with probability ~1e-10 per element on random inputs.")
        gates.append(GateResult("G3", "fail" if statistical else "warn", s.margin_prb, 1.0, det))
        if not statistical:
            notes.append(f"{s.exceed_prb} elements exceed the probabilistic bound (not enforced on these inputs)")
    else:
        gates.append(GateResult("G3", "pass" if statistical else "skip", s.margin_prb, 1.0))
    # G5 z-score
    z99 = s.z_quantile(0.99)
    if s.z_n >= 8:
        if z99 > Z_P99_LIMIT:
            det = (f"errors are far larger than a correct kernel under the declared recipe makes: 99th percentile "
                   f"z = {z99:.3g} (limit {Z_P99_LIMIT:g}), max z = {s.z_max:.3g}; the kernel computes with less "
                   "precision than declared.")
            gates.append(GateResult("G5", "fail" if statistical else "warn", z99, Z_P99_LIMIT, det))
            if not statistical:
                notes.append(f"z-score 99th percentile {z99:.3g} > {Z_P99_LIMIT:g} (not enforced on these inputs)")
        else:
            gates.append(GateResult("G5", "pass" if statistical else "skip", z99, Z_P99_LIMIT))
    # G4 ratio to a same-precision reference
    ratio_rms = ratio_max = sig_ratio = bc = math.nan
    if s.ref_n:
        rms_e = math.sqrt(s.ref_e_sum2 / s.ref_n)
        rms_ref = math.sqrt(s.ref_sum2 / s.ref_n)
        rms_sig = math.sqrt(s.sig_sum2 / max(s.z_n, 1)) if s.z_n else 0.0
        floor = 1e-3 * out.u * math.sqrt(s.sum_y2 / max(s.n_compared, 1)) if out.kind == "float" else 0.0
        den_rms = max(rms_ref, rms_sig, floor, 1e-300)
        den_max = max(s.ref_max, 6.0 * s.sig_max, floor, 1e-300)
        ratio_rms, ratio_max = rms_e / den_rms, s.ref_e_max / den_max
        sig_ratio = rms_e / rms_ref if rms_ref > 0 else math.inf
        bc = _bhattacharyya(s.s_hist, s.s_hist_ref)
        fail = ratio_rms > RATIO_RMS_LIMIT or ratio_max > RATIO_MAX_LIMIT
        gates.append(GateResult("G4", "fail" if fail else "pass", ratio_rms, RATIO_RMS_LIMIT,
                                f"RMS error {ratio_rms:.3g}× and max error {ratio_max:.3g}× the same-precision "
                                f"reference's (limits {RATIO_RMS_LIMIT:g}×, {RATIO_MAX_LIMIT:g}×)."))
    # GC contract, G7 discrimination
    zeros_pass = (not s.zeros_fail) and s.zeros_ratio <= 1.0 and s.n_compared > 0
    if s.n_contract:
        gates.append(GateResult("GC", "inconclusive", float(s.n_contract), 0.0,
                                f"{s.n_contract} elements are outside the recipe's contract: "
                                + "; ".join(sorted(s.contract_reasons)) + "."))
    if zeros_pass:
        gates.append(GateResult("G7", "inconclusive", s.zeros_ratio, 1.0,
                                "an all-zeros output would pass these inputs (every |y| is inside its bound), so the "
                                "test cannot discriminate; use inputs with larger outputs."))
    elif s.n_compared == 0 and s.n_exact == 0 and not n_sp and s.nan_expected == 0 and s.inf_expected == 0:
        gates.append(GateResult("G7", "inconclusive", None, None, "no element could be compared."))

    fails = [g for g in gates if g.status == "fail"]
    inconc = [g for g in gates if g.status == "inconclusive"]
    if fails:
        status = "fail"
        deciding = fails[0]
    elif inconc:
        status = "inconclusive"
        deciding = inconc[0]
    else:
        status = "pass"
        cands = [g for g in gates if g.status == "pass" and g.value is not None and g.threshold]
        if s.n_exact and s.n_exact == s.n_compared:
            deciding = next(g for g in gates if g.id == "GE")
        else:
            deciding = max(cands, key=lambda g: g.value / g.threshold) if cands else gates[0]
    margin = s.margin_prb if statistical else s.margin_det
    if n_sp:
        margin = math.inf
    total = s.n
    where = _where(s.mismatch_idx, s.mismatch_n, shape, total)
    n_dims_ok = prep.k if spec.kind in ("contraction", "scan", "generic") else None
    metrics = Metrics(
        n_elements=total, n_compared=s.n_compared, n_exact_required=s.n_exact, n_out_of_contract=s.n_contract,
        max_abs_err=s.max_abs, max_abs_err_index=flat_idx(s.max_abs_idx) if s.max_abs_idx >= 0 else None,
        max_abs_err_allowed=s.max_abs_allowed,
        max_rel_err=s.max_rel, max_rel_err_index=flat_idx(s.max_rel_idx) if s.max_rel_idx >= 0 else None,
        max_ulp=s.max_ulp, ulp_histogram=_ulp_hist_dict(s.ulp_hist),
        rel_l2=math.sqrt(s.sum_e2 / s.sum_y2) if s.sum_y2 > 0 else (0.0 if s.sum_e2 == 0 else math.inf),
        mismatch_count=s.mismatch_n, mismatch_percent=100.0 * s.mismatch_n / max(total, 1), mismatch_where=where,
        margin_det=s.margin_det, margin_prb=s.margin_prb, exceed_det=s.exceed_det, exceed_prb=s.exceed_prb,
        exact_mismatches=s.exact_bad, nan_expected=s.nan_expected, nan_got=s.nan_got,
        inf_expected=s.inf_expected, inf_got=s.inf_got, nan_produced=s.nan_produced,
        nan_swallowed=s.nan_swallowed, inf_mismatch=s.inf_mismatch, special_explained=s.explained,
        z_max=s.z_max if s.z_n else math.nan, z_p99=z99, z_over=s.z_over, z_rms=math.sqrt(s.z_sum2 / s.z_n) if s.z_n else math.nan,
        bias_t=(s.s_sum / math.sqrt(s.s_sum2)) if s.s_sum2 > 0 else math.nan,
        ratio_rms=ratio_rms, ratio_max=ratio_max, sigma_ratio=sig_ratio, bhattacharyya=bc,
        cr_rate=s.cr / s.n_compared if s.n_compared else math.nan,
        cr_rate_ref=s.cr_ref / s.ref_n if s.ref_n else math.nan,
        zeros_would_pass=zeros_pass, output_grid=s.grid_fingerprint(), k=n_dims_ok,
    )
    if status != "fail" and s.n_compared >= 1000 and s.z_n and abs(metrics.bias_t) > 6 and statistical:
        notes.append(f"errors are biased (t = {metrics.bias_t:.3g}): truncation or one-sided rounding is likely")
    worst = s.worst()
    text = explain(status=status, deciding=deciding, op=spec.name, recipe=recipe, shape=shape, input_family=family,
                   metrics=metrics, worst=worst, findings=[], notes=notes, statistical=statistical)
    return Verdict(status, margin, deciding.id, tuple(gates), tuple(worst), recipe, spec.name, shape, family,
                   metrics, (), tuple(notes), text)


# --------------------------------------------------------------------------- extra tests


def check_stochastic_rounding(runs: np.ndarray, exact: np.ndarray, fmt: str | Format, *,
                              z_limit: float = 6.0) -> GateResult:
    """Stochastic-rounding conformance (research note §4.6).

    ``runs`` has shape ``(R, ...)``: R outputs of the same SR rounding with different seeds;
    ``exact`` the pre-rounding values. Checks (i) every output is one of the two neighbours
    of the exact value and (ii) unbiasedness: the mean signed error, pooled over runs and
    elements, has |z| ≤ ``z_limit``. SR cannot be matched bitwise without the hardware RNG.
    """
    f = get_format(fmt)
    runs = np.asarray(runs, dtype=np.float64)
    x = np.broadcast_to(np.asarray(exact, dtype=np.float64), runs.shape[1:])
    r = round_to(x, f)
    below = r <= x
    lo = np.where(below, r, _next(r, f, -1))
    hi = np.where(below, _next(r, f, +1), r)
    ok = (runs == lo) | (runs == hi)
    if not ok.all():
        n = int((~ok).sum())
        return GateResult("SR", "fail", float(n), 0.0, f"{n} outputs are not a neighbour of the exact value.")
    gap = np.where(hi > lo, hi - lo, 1.0)
    err = (runs - x) / gap  # in units of the local gap; mean 0 under SR
    n = err.size
    sd = float(err.std())
    z = float(err.mean() / (sd / math.sqrt(n))) if sd > 0 else 0.0
    status = "pass" if abs(z) <= z_limit else "fail"
    return GateResult("SR", status, abs(z), z_limit,
                      f"mean signed error {err.mean():.3g} gaps over {n} roundings (z = {z:.3g}).")


def _next(r: np.ndarray, f: Format, d: int) -> np.ndarray:
    from .formats import next_toward

    return next_toward(r, f, float(d))


def k_scaling_slope(ks: Sequence[int], rms_rel_errors: Sequence[float]) -> float:
    """Slope of log(RMS((ŷ−y)/S)) against log K (research note §4.7): ≈0–0.1 for unbiased
    round-to-nearest accumulation, ≈0.5 for a biased/truncating accumulator; ≥ 0.3 is a red
    flag even when the bounds pass."""
    lk = np.log(np.asarray(ks, dtype=np.float64))
    le = np.log(np.maximum(np.asarray(rms_rel_errors, dtype=np.float64), 1e-300))
    return float(np.polyfit(lk, le, 1)[0])

