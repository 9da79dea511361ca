"""Streaming the output block by block: what the gates derive from the oracle and the bounds per block
(:class:`_Block`, kept by a prepared check to judge many outputs), and the statistics gathered over the
blocks of one output (:class:`_Stream`)."""

from __future__ import annotations

import functools
import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .bounds import BoundsBlock, _fl_out_neighbours
from .formats import FORMATS, Format, round_to, ulp_key
from .grids import _GRID_CANDIDATES, _grid_counts, _grid_held
from .oracle import OracleBlock
from .recipe import PrecisionRecipe
from .special_values import SPECIAL_VALUE_TABLE
from .ulp_hist import _ULP_BUCKET, _ULP_TABLE_N, _ulp_buckets, _ulp_hist, _ulp_key32
from .verdict import WorstElement

Z_P99_LIMIT = 10.0  # research note §4.4 G5: 99th percentile of z above 10 fails
RATIO_RMS_LIMIT = 1.5  # G4, FlashAttention/AWS-style ratio to a same-precision reference
RATIO_MAX_LIMIT = 3.0
_MISMATCH_CAP = 1 << 16
_GRID_SAMPLE = 1 << 20  # elements enough to fingerprint the output grid
_Z_EDGES = np.concatenate([[0.0], 10.0 ** np.linspace(-4, 7, 221)])
_S_EDGES = np.linspace(-20.0, 20.0, 81)


def _z_bins_log10(z: np.ndarray, overwrite: bool = False) -> np.ndarray:
    """Index into _Z_EDGES (0, then 10^-4 … 10^7 in 220 log steps) without a search: the definition,
    ``floor(20 (log10 z + 4))`` clipped to [-1, 220], plus 1, in float64.

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


#: bits of a float64 below its lookup key (sign, exponent and the mantissa's top 4 bits: 16 bits)
_Z_KEY_SHIFT = np.uint64(48)
#: the keys (:data:`_Z_KEY_SHIFT`): a stream's histogram of its z values' keys has this many counts
_Z_KEYS = 1 << 16
#: z values a stream keeps unbinned for :meth:`_Stream.z_quantile` (8 bytes each, for the length of one check);
#: past this many it bins them all and every later value as it comes (the table lookup, as before)
_Z_KEEP_MAX = 1 << 21
#: a stream whose first block has fewer z values bins them at once (a few thousand lookups cost about what the
#: quantile's sample and counts would)
_Z_KEY_MIN = 1 << 12
#: about this many kept z values are sampled to guess where the quantile lies (:meth:`_Stream._kept_quantile_bin`)
_Z_SAMPLE = 1 << 12
#: the widest guess (in bins) that :meth:`_Stream._kept_quantile_bin` searches by counting; a wider one bins every value
_Z_GUESS_BINS = 64


@dataclass(frozen=True)
class _ZTable:
    """:func:`_z_bins_log10` as a table lookup: per 16-bit key, the bin of the key's smallest value (``low``)
    and the one threshold inside the key's range where the bin steps up by one (``step``; NaN: none)."""

    low: np.ndarray
    step: np.ndarray
    #: :func:`_z_thresholds` (the smallest value of each bin 1..221), which the table was checked against
    edges: np.ndarray


def _z_thresholds() -> np.ndarray:
    """The smallest float64 of each bin 1..221 under :func:`_z_bins_log10`, by bisection over the bit patterns
    of the non-negative floats (which order as the values do)."""
    k = np.arange(1, len(_Z_EDGES), dtype=np.int64)
    lo = np.zeros(k.size, np.int64)  # 0.0: bin 0
    hi = np.full(k.size, np.float64(np.inf).view(np.int64), np.int64)  # inf: the last bin
    while np.any(hi - lo > 1):
        mid = lo + (hi - lo) // 2
        up = _z_bins_log10(mid.view(np.float64).copy()) >= k
        hi, lo = np.where(up, mid, hi), np.where(up, lo, mid)
    return hi.view(np.float64)


@functools.lru_cache(maxsize=1)
def _z_table() -> _ZTable | None:
    """The lookup of :func:`_z_bins`, checked against :func:`_z_bins_log10` at every key's ends and within 64
    ulps of every threshold; None (the log10 path) if any value differs.

    Why a table is exact: the definition is a non-decreasing step function of z (log10, the float additions
    and products, floor and clip are each non-decreasing), so it is fixed by its 221 thresholds. A key's range
    spans a factor of at most 1 + 2^-4 and consecutive thresholds a factor of 10^(1/20) = 1.12, so a key's range
    holds at most one. The check covers where a log10 that is not monotone within an ulp or two could break
    that (next to a threshold), on this machine's log10 itself."""
    edges = _z_thresholds()
    if np.any(np.diff(edges) <= 0):
        return None
    keys = np.arange(1 << 16, dtype=np.uint64)
    first = (keys << _Z_KEY_SHIFT).view(np.float64)  # each key's smallest value (key 0x7FF0: inf; above: NaN)
    with np.errstate(invalid="ignore"):  # (the keys of NaNs have NaN ends)
        last = np.nextafter((np.minimum(keys + np.uint64(1), np.uint64(0xFFFF)) << _Z_KEY_SHIFT).view(np.float64),
                            -np.inf)
    positive = keys < 0x8000
    low = np.zeros(keys.size, np.int64)  # negative values: bin 0, as max(z, 1e-300) makes them
    low[positive] = _z_bins_log10(np.where(np.isnan(first[positive]), np.inf, first[positive]))
    nxt = np.searchsorted(edges, first[positive], side="right")  # the first threshold above the key's start
    inside = np.where(nxt < edges.size, edges[np.minimum(nxt, edges.size - 1)], np.nan)
    inside[~(inside <= np.where(np.isnan(last[positive]), np.inf, last[positive]))] = np.nan
    step = np.full(keys.size, np.nan)
    step[positive] = inside
    table = _ZTable(low, step, edges)
    near = (edges.view(np.int64)[:, None] + np.arange(-64, 65, dtype=np.int64)[None, :]).reshape(-1)
    probe = np.concatenate([near.view(np.float64), first[positive], last[positive]])
    probe = probe[np.isfinite(probe) | np.isposinf(probe)]
    return table if np.array_equal(_lookup(table, probe), _z_bins_log10(probe.copy())) else None


def _lookup(table: _ZTable, z: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    key = np.right_shift(z.view(np.uint64), _Z_KEY_SHIFT).view(np.int64)
    up = z >= table.step.take(key)
    b = table.low.take(key, out=out)
    b += up
    return b


def _z_bins(z: np.ndarray, overwrite: bool = False) -> np.ndarray:
    """:func:`_z_bins_log10`, bit for bit on every value but NaN (which the log10 path cannot bin), by a table
    lookup (:func:`_z_table`): two reads of small tables and a comparison per element instead of a log10.

    ``overwrite``: the bins come back in ``z``'s memory (it is not needed after this)."""
    table = _z_table()
    if table is None or z.dtype != np.float64 or not z.flags.c_contiguous:
        return _z_bins_log10(z, overwrite)
    return _lookup(table, z, out=z.view(np.int64) if overwrite else None)


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
    #: the probabilistic bound is the worst-case one, element for element (every elementwise op's: no sum whose
    #: error could cancel): both ratios are then the same array, computed once
    prb_is_det: bool
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
    #: a kept block's (:func:`compact_block`): per element, the index in ``term_names`` of the error term a
    #: worst-element record names as dominant (``bb.terms`` is then empty); None: read ``bb.terms``
    dominant: np.ndarray | None = None
    term_names: tuple[str, ...] = ()

    def nbytes(self) -> int:
        seen: set[int] = set()
        total = 0

        def add(a: Any) -> None:
            nonlocal total
            if isinstance(a, np.ndarray) and id(a) not in seen:
                seen.add(id(a))
                if a.size < 2 or 0 not in a.strides:  # (a broadcast value holds one element)
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
        prb_is_det = bb.tau_prb is bb.tau_det or bool(np.array_equal(bb.tau_prb, bb.tau_det, equal_nan=True))
        prb_bad = det_bad if prb_is_det else ~(bb.tau_prb > 0)
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
            prb_is_det=prb_is_det,
            exact_any=bool(bb.exact is not None and bb.exact.any()), exact_nz=exact_nz,
            exact_nz_any=bool(exact_nz is not None and exact_nz.any()), sig_fin=sig_fin, sig_fin_all=sig_fin_all,
            sg_all=sg_all, sig_sum2=float(np.sum(sg_all * sg_all)) if sg_all is not None else 0.0,
            sig_max=float(sg_all.max()) if sg_all is not None and n else 0.0, zeros_ratio=zeros_ratio,
            grid_y=grid_y, grid_y_n={c: int(np.count_nonzero(v)) for c, v in grid_y.items()}, witness=witness)


_TINY = np.finfo(np.float64).tiny


def _constant_mask(value: bool, n: int) -> np.ndarray:
    """A read-only mask of ``n`` equal values that holds one element."""
    return np.broadcast_to(np.bool_(value), (n,))


def _dominant_index(terms: dict[str, Any], n: int) -> np.ndarray:
    """Per element, the index of the term ``max(vals, key=vals.get)`` picks over ``vals = {name: float(term at
    the element)}``: the first of the largest, a later term replacing the one so far only where strictly greater
    (so a NaN is never picked over an earlier term, and a first-place NaN stays), as the worst-element record
    reads it."""
    vals = [np.broadcast_to(np.asarray(v, dtype=np.float64), (n,)) for v in terms.values()]
    idx = np.zeros(n, dtype=np.uint8)
    best = vals[0].copy()
    for i, v in enumerate(vals[1:], start=1):
        upd = v > best
        idx[upd] = i
        np.copyto(best, v, where=upd)
    return idx


def compact_block(blk: _Block) -> _Block:
    """The block as a prepared check keeps it for every later output: the same values in about half the memory,
    which is what lets a reward worker's case cache hold the prepared checks of twice as many cases.

    * the error terms (8 bytes per element each) become the index of the dominant one (one byte), which is all
      a worst-element record reads of them;
    * masks that are constant (no special value expected, every element valid, every sigma finite) hold one
      element;
    * ``sg_all``, ``max(sigma, tiny)``, is ``sigma`` itself where no sigma is below ``tiny``;
    * the rounded oracle ``y_out`` is kept in float32 where every value survives the round trip bit for bit
      (outputs of fp32 or a narrower format; every comparison with it promotes it back exactly), and the ULP
      keys in int32 where they fit (read only to be subtracted from int64 keys)."""
    n = blk.y.size
    bb, changes = blk.bb, {}
    if blk.prb_is_det and bb.tau_prb is not bb.tau_det:
        bb = changes["bb"] = replace(bb, tau_prb=bb.tau_det)
    if bb.terms and len(bb.terms) < 256:
        changes["term_names"] = tuple(bb.terms)
        changes["dominant"] = _dominant_index(bb.terms, n) if len(bb.terms) > 1 else np.zeros(1, np.uint8)
        bb = changes["bb"] = replace(bb, terms={})
    if not blk.exp_special:
        changes["exp_nan"] = changes["exp_inf"] = changes["exp_sp"] = _constant_mask(False, n)
    if blk.all_valid:
        changes["valid"] = _constant_mask(True, n)
    if blk.sig_fin_all:
        changes["sig_fin"] = _constant_mask(True, n)
        if blk.sg_all is not None and bb.sigma is not None and (not n or float(bb.sigma.min()) >= _TINY):
            changes["sg_all"] = bb.sigma
    if blk.y_out.dtype == np.float64:
        y32 = blk.y_out.astype(np.float32)
        if np.array_equal(y32.astype(np.float64).view(np.int64), blk.y_out.view(np.int64)):
            changes["y_out"] = y32
    if blk.ulp_y.dtype == np.int64 and n:
        lo, hi = int(blk.ulp_y.min()), int(blk.ulp_y.max())
        if -(1 << 31) <= lo and hi < (1 << 31):
            changes["ulp_y"] = blk.ulp_y.astype(np.int32)
    return replace(blk, **changes) if changes else blk


# --------------------------------------------------------------------------- streaming stats


@dataclass
class _Stream:
    recipe: PrecisionRecipe
    statistical: bool
    out_shape: tuple[int, ...]
    worst_k: int
    has_ref: bool
    #: gather only what the gates read (:meth:`PreparedCheck.check`'s ``lean``): no error maxima, ULP histogram,
    #: sums of squares, correctly rounded count, output grid, worst elements or z moments
    lean: bool = False
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
    #: counts of the z values binned so far per bin of _Z_EDGES (see :meth:`_fold_z_bins` for the ones not binned)
    z_hist: np.ndarray = field(default_factory=lambda: np.zeros(len(_Z_EDGES), dtype=np.int64))
    #: whether any z value went into ``z_hist`` (then every later one does too)
    z_binned: bool = False
    #: the z values kept unbinned (each block's own array) and their number
    z_kept: list[np.ndarray] = field(default_factory=list)
    z_kept_n: int = 0
    #: the largest kept value (the guess of a quantile on the last sampled rank)
    z_kept_top: float = -math.inf
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
        bb = blk.bb
        nblk = blk.y.size
        self.n += nblk
        if bb.contract is not None:
            self.n_contract += blk.n_contract
            if bb.contract_reason:
                self.contract_reasons.add(bb.contract_reason)
        self.nan_expected += blk.nan_expected
        self.inf_expected += blk.inf_expected
        unexplained: np.ndarray | None = None
        fin: np.ndarray | None = None  # None: every element finite on both sides
        if blk.exp_special or not np.isfinite(got).all():
            unexplained, fin = self._fold_specials(blk, got, out)
        if fin is None:
            cmp_ = blk.valid
            all_cmp = blk.all_valid
        else:
            cmp_ = fin & blk.valid
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
        diff = got - blk.y
        e = np.abs(diff)
        # the compared elements as indices (gathering with them is several times faster than
        # indexing with the mask each time); None: all of them
        ci = None if all_cmp else np.flatnonzero(cmp_)
        if not all_cmp:
            np.putmask(e, ~cmp_, 0.0)
        exact_bad = self._fold_exact(blk, got, out, ex) if ex_any else None
        n_exact_bad = 0 if exact_bad is None else int(np.count_nonzero(exact_bad))
        r_det = _ratio_pre(e, bb.tau_det, blk.det_bad, None if all_ne else ne)
        r_prb = r_det if blk.prb_is_det else _ratio_pre(e, bb.tau_prb, blk.prb_bad, None if all_ne else ne)
        if exact_bad is not None:
            r_det[exact_bad] = np.inf
            r_prb[exact_bad] = np.inf
        # the elements over their bound; None: none is, the block's largest ratio being within it (then no element
        # is exact_bad either: those ratios are inf), which spares a comparison and a count per bound (a NaN
        # largest ratio is not "within": counted as before)
        over_det = over_prb = None
        if nblk:
            m_det = float(r_det.max())
            m_prb = m_det if r_prb is r_det else float(r_prb.max())
            self.margin_det = max(self.margin_det, m_det)
            self.margin_prb = max(self.margin_prb, m_prb)
            n_det = 0
            if not m_det <= 1:
                over_det = r_det > 1
                n_det = int(np.count_nonzero(over_det)) - n_exact_bad
                self.exceed_det += n_det
            if not m_prb <= 1:
                if r_prb is r_det:
                    over_prb = over_det
                    self.exceed_prb += n_det
                else:
                    over_prb = r_prb > 1
                    self.exceed_prb += int(np.count_nonzero(over_prb)) - n_exact_bad
        tau_gate = bb.tau_prb if self.statistical else bb.tau_det
        if nblk and not self.lean and (all_cmp or cmp_.any()):
            self._fold_plain(blk, got, out, raw, e, ci, ex, tau_gate)
        if bb.sigma is not None and nblk:
            self._fold_z(blk, diff, ne, all_ne)
        if ref is not None:
            self._fold_reference(blk, ref, e, fin)
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
        if out.kind == "float" and out.p > 8 and self.grid_total < _GRID_SAMPLE and not self.lean:
            self._fold_grid(blk, got if raw is None else raw, out, None if all_cmp else cmp_)
        # mismatches (for counts and location patterns)
        parts = [m for m in (over_det, over_prb if self.statistical else None, unexplained, exact_bad)
                 if m is not None]
        mism = parts[0] if parts else None
        if len(parts) > 1:
            mism = np.logical_or(parts[0], parts[1])  # (a fresh array: ``unexplained`` is read below)
            for m in parts[2:]:
                mism |= m
        n_mism = 0 if mism is None else int(np.count_nonzero(mism))
        if n_mism:
            self.mismatch_n += n_mism
            if sum(len(a) for a in self.mismatch_idx) < _MISMATCH_CAP:
                self.mismatch_idx.append(np.flatnonzero(mism)[:_MISMATCH_CAP] + blk.e0)
        if self.lean:
            return
        r_gate = r_prb if self.statistical else r_det
        score = r_gate if unexplained is None else np.where(unexplained, np.inf, r_gate)
        self._fold_worst(blk, got, e, score, tau_gate, ex, fin, ne)

    def may_pass(self) -> bool:
        """False where the blocks folded so far already fail or make inconclusive the output (G1, GE, G2, G3 on
        random inputs, GC), or, on random inputs, have a z value over the G5 limit (which a pass may have: there
        False is a cautious answer); a lean stream's caller then judges the output in full."""
        return not (self.nan_produced or self.nan_swallowed or self.inf_mismatch or self.exact_bad
                    or self.exceed_det or self.n_contract or (self.statistical and (self.exceed_prb or self.z_over)))

    def _fold_specials(self, blk: _Block, got: np.ndarray, out: Format) -> tuple[np.ndarray | None, np.ndarray]:
        """NaN/inf on either side: count them, explain the mismatched ones by the special-value table.
        Returns the unexplained mismatches (None: none) and the elements finite on both sides."""
        y, valid = blk.y, blk.valid
        exp_nan, exp_inf = blk.exp_nan, blk.exp_inf
        got_nan, got_inf = np.isnan(got), np.isinf(got)
        fin = ~(blk.exp_sp | got_nan | got_inf)
        sp_match = (exp_nan & got_nan) | (exp_inf & got_inf & (blk.y_out == got))
        sp_bad = ~fin & ~sp_match & valid
        self.nan_got += int((got_nan & valid).sum())
        self.inf_got += int((got_inf & valid).sum())
        if not sp_bad.any():
            return None, fin
        # the rules are elementwise: test the offending elements only
        bi = np.flatnonzero(sp_bad)
        y_b, got_b = y.take(bi), got.take(bi)
        expl = np.zeros(bi.size, dtype=bool)
        for rule in SPECIAL_VALUE_TABLE:
            if rule.applies is None or (rule.platforms and self.recipe.platform not in rule.platforms):
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
            self.first_special = blk.e0 + int(bi[np.argmax(un_b)])
        return unexplained, fin

    def _fold_exact(self, blk: _Block, got: np.ndarray, out: Format, ex: np.ndarray) -> np.ndarray | None:
        """Elements exact in every order must equal fl_out(y) bitwise (or either neighbour where allowed);
        returns the ones that do not (None: all do)."""
        bb = blk.bb
        ok = got == blk.y_out
        if out.kind == "float":  # flush-to-zero equivalence for subnormal results
            ok |= (blk.ay < out.tiny) & (got == 0)
        if bb.allowed_lo is not None:
            ok |= (got == bb.allowed_lo) | (got == bb.allowed_hi)
        if self.recipe.rounding == "sr" and out.kind == "float":
            lo, hi = _fl_out_neighbours(np.where(ex, blk.y, 0.0), self.recipe)
            ok |= (got == lo) | (got == hi)
        exact_bad = ex & ~ok
        n_exact_bad = int(np.count_nonzero(exact_bad))
        if not n_exact_bad:
            return None
        self.exact_bad += n_exact_bad
        d = np.abs(ulp_key(got[exact_bad], out) - ulp_key(blk.y_out[exact_bad].astype(np.float64), out))
        self.exact_bad_maxulp = max(self.exact_bad_maxulp, int(d.max()))
        return exact_bad

    def _fold_plain(self, blk: _Block, got: np.ndarray, out: Format, raw: np.ndarray | None, e: np.ndarray,
                    ci: np.ndarray | None, ex: np.ndarray | None, tau_gate: np.ndarray) -> None:
        """The plain metrics over the compared elements (``ci``; None: all): largest absolute and relative
        error, ULP distances, sums of squares, the correctly-rounded count."""
        j = int(np.argmax(e))
        if e[j] > self.max_abs or self.max_abs_idx < 0:
            self.max_abs, self.max_abs_idx = float(e[j]), blk.e0 + j
            self.max_abs_allowed = 0.0 if (ex is not None and ex[j]) else float(tau_gate[j])
        # e/|y| on compared elements (inf where y = 0 < e), 0 elsewhere: outside cmp_ e is
        # 0 and 0/|y| is 0 or NaN, as is 0/0 inside, so NaN -> 0 is exactly the old where-chain
        rel = e / blk.ay
        if blk.y_zero or ci is not None:  # 0/0 only where y = 0 (or e was zeroed outside cmp_)
            rel[np.isnan(rel)] = 0.0
        j = int(np.argmax(rel))
        if rel[j] > self.max_rel or self.max_rel_idx < 0:
            self.max_rel, self.max_rel_idx = float(rel[j]), blk.e0 + j
        y_out = blk.y_out
        gc, yoc = (got, y_out) if ci is None else (got.take(ci), y_out.take(ci))
        if raw is not None and raw.dtype == np.float32 and out.name == "fp32":
            d = _ulp_key32(raw if ci is None else raw.take(ci))
        elif raw is not None:
            d = ulp_key(raw if ci is None else raw.take(ci), out)
        else:
            d = ulp_key(gc, out)
        d -= blk.ulp_y if ci is None else blk.ulp_y.take(ci)
        np.abs(d, out=d)
        zero_ulps = int(self.ulp_hist[0])
        if d.size:
            self._fold_ulp_distances(d)
        # the squares in memory no longer needed (rel's, as large as e; or the gathered copies): the same values
        ec = e if ci is None else e.take(ci)
        self.sum_e2 += float(np.sum(np.multiply(ec, ec, out=rel if ci is None else ec)))
        if ci is None:
            self.sum_y2 += blk.sum_y2
        else:
            yc = blk.y.take(ci)
            self.sum_y2 += float(np.sum(np.multiply(yc, yc, out=yc)))
        if raw is not None:
            # keys of values in the output format's own storage (``raw``) are its bit patterns in sign-magnitude
            # order: on finite values equal keys are equal values (+0 and -0 alike, as for ==), so the correctly
            # rounded count is the distances of 0 just counted (bucket 0 holds exactly those; two passes spared)
            self.cr += int(self.ulp_hist[0]) - zero_ulps
        else:  # (keys of float64 values cast to the format: a value off its grid can share fl_out(y)'s key)
            self.cr += int(np.count_nonzero(gc == yoc))

    def _fold_ulp_distances(self, d: np.ndarray) -> None:
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

    def _fold_z(self, blk: _Block, diff: np.ndarray, ne: np.ndarray, all_ne: bool) -> None:
        """The z-score statistics: the error in units of the expected error of a correct kernel under the
        declared recipe, on the elements not required to be exact. ``diff`` is the caller's scratch (not read
        after this): its memory may hold the scores."""
        sig = blk.bb.sigma
        all_z = all_ne and blk.sig_fin_all
        zm = None if all_z else (ne if blk.sig_fin_all else ne & blk.sig_fin)
        if not (all_z or zm.any()):  # type: ignore[union-attr]
            return
        if all_z:
            sg = blk.sg_all
            s = np.divide(diff, sg, out=diff)  # (the same quotients, without a fresh array)
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
        z_top = float(z.max())
        self.z_max = max(self.z_max, z_top)
        if not z_top <= Z_P99_LIMIT:  # (none over the limit where the largest is within it; NaN: counted)
            self.z_over += int(np.count_nonzero(z > Z_P99_LIMIT))
        self.z_n += int(z.size)
        self._fold_z_bins(z, z_top)  # (z is not needed after this)
        if self.lean:
            return
        self.s_sum += float(s.sum())
        if self.has_ref:
            self.s_hist += np.bincount(np.searchsorted(_S_EDGES, s), minlength=len(_S_EDGES) + 1)
        # the squares, bit for bit z * z, in s's memory (s is not needed after this)
        s2 = float(np.sum(np.multiply(s, s, out=s)))
        self.z_sum2 += s2
        self.s_sum2 += s2

    def _fold_z_bins(self, z: np.ndarray, top: float | None = None) -> None:
        """Fold a block's z values (float64; the caller's no longer; ``top``: their maximum, if known) into what
        :meth:`z_quantile` reads.

        The only statistic read off the z histogram is one quantile, so binning every value is not needed: the
        stream keeps the values themselves, and :meth:`z_quantile` counts them against the one or two bin
        thresholds around the quantile (:meth:`_kept_quantile_bin`). A stream binned as before (``z_hist``, the
        table lookup) is one whose first block is small, whose values pass :data:`_Z_KEEP_MAX`, that meets a NaN,
        or where the table does not hold (:func:`_z_table`): then every value is binned, the kept ones first."""
        keyed = (not self.z_binned and (self.z_kept_n > 0 or z.size >= _Z_KEY_MIN)
                 and self.z_kept_n + z.size <= _Z_KEEP_MAX and z.dtype == np.float64 and z.flags.c_contiguous
                 and _z_table() is not None)
        if keyed and z.size:
            if top is None:
                top = float(z.max())
            keyed = not math.isnan(top)  # (a NaN's place among the thresholds' counts is not its bin's)
            if keyed:
                self.z_kept_top = max(self.z_kept_top, top)
        if not keyed:
            self._bin_kept()
            if z.size:
                self.z_binned = True
            # z's memory holds the bins
            self.z_hist += np.bincount(_z_bins(z, overwrite=True), minlength=len(_Z_EDGES))[: len(_Z_EDGES)]
            return
        self.z_kept.append(z)
        self.z_kept_n += int(z.size)

    def _bin_kept(self) -> None:
        """The kept z values into ``z_hist`` by the lookup (exactly as if each had been binned as it came)."""
        for z in self.z_kept:
            self.z_hist += np.bincount(_z_bins(z, overwrite=True), minlength=len(_Z_EDGES))[: len(_Z_EDGES)]
            self.z_binned = True
        self.z_kept, self.z_kept_n, self.z_kept_top = [], 0, -math.inf

    def _below(self, t: float) -> int:
        """How many kept values are below ``t``."""
        return sum(int(np.count_nonzero(z < t)) for z in self.z_kept)

    def _kept_quantile_bin(self, x: float) -> int | None:
        """The bin ``z_quantile`` reads, the smallest ``i`` whose binned count up to ``i`` is at least ``x``, from
        the kept values by counting them against a few bin thresholds; None where a guess of where it lies was
        wrong (the caller bins every value, as before).

        Why counting is the binned answer: the bin of a value is a non-decreasing step function of it (the
        lookup is the log10 definition's, :func:`_z_table`), whose steps are the thresholds ``t[j]``
        (:func:`_z_thresholds`: the smallest value of bin ``j + 1``), so the values binned up to ``j`` are exactly
        those below ``t[j]`` (negative values and zeros are below every threshold and binned 0; NaN, which a
        keyed stream never holds, would be below none). With ``m = ceil(x)`` (a count reaches ``x`` when it
        reaches ``m``) the answer is the first ``j`` with ``#(z < t[j]) >= m`` (``m <= 0``: bin 0; no threshold
        past bin 220: bin 221 holds the rest). A sample's quantile only guesses the range of bins to count at
        (its low end's count must be under ``m``, its high end's at least ``m``); every answer is counted.
        The bins in the guess are searched by bisection: at the 99th percentile of typical errors the guess spans
        one to three bins, so two to four counting passes replace a 65,536-key histogram of every block."""
        table = _z_table()
        n = self.z_kept_n
        if table is None or n == 0:
            return None
        m = math.ceil(x)
        if m <= 0:
            return 0
        if m > n:
            return None
        t = table.edges
        top = t.size  # the last bin (221): every value at or above the last threshold
        step = max(1, n // _Z_SAMPLE)
        smp = np.concatenate([z[::step] for z in self.z_kept])
        r = min(smp.size - 1, max(0, int(m / n * smp.size) - 1))
        d = 2 + int(3 * math.sqrt(smp.size * (m / n) * (1 - m / n)))
        r_lo, r_hi = max(0, r - d), min(smp.size - 1, r + d)
        guess = np.partition(smp, [r_lo, r_hi])[[r_lo, r_hi]]
        if r_hi == smp.size - 1:
            guess[1] = self.z_kept_top  # (the sample's largest may be below the largest)
        lo, hi = (int(b) for b in _z_bins(guess.astype(np.float64)))
        if r_lo == 0:
            lo = 0  # (the sample's smallest may be above the smallest)
        if hi - lo > _Z_GUESS_BINS:
            return None
        if lo > 0 and self._below(t[lo - 1]) >= m:  # (bins below lo already hold m values: the guess was high)
            return None
        if hi < top and self._below(t[hi]) < m:  # (bins up to hi hold fewer: the guess was low)
            return None
        while lo < hi:  # the first bin in [lo, hi] whose count up to it reaches m (the counts grow with the bin)
            j = (lo + hi) // 2
            if self._below(t[j]) >= m:
                hi = j
            else:
                lo = j + 1
        return lo

    def _fold_reference(self, blk: _Block, ref: np.ndarray, e: np.ndarray, fin: np.ndarray | None) -> None:
        """The reference implementation in the same recipe, against the oracle."""
        y, sig = blk.y, blk.bb.sigma
        fin_m = np.ones(y.size, dtype=bool) if fin is None else fin
        rf = fin_m & blk.valid & np.isfinite(ref) & (blk.sig_fin if sig is not None else True)
        if not rf.any():
            return
        er = np.abs(ref[rf] - y[rf])
        self.ref_n += int(rf.sum())
        self.ref_sum2 += float(np.sum(er * er))
        self.ref_max = max(self.ref_max, float(er.max()))
        self.ref_e_sum2 += float(np.sum(e[rf] ** 2))
        self.ref_e_max = max(self.ref_e_max, float(e[rf].max()))
        self.cr_ref += int(np.sum(ref[rf] == blk.y_out[rf]))
        if sig is not None:
            sgr = np.maximum(sig[rf], np.finfo(np.float64).tiny)
            self.s_hist_ref += np.bincount(np.searchsorted(_S_EDGES, (ref[rf] - y[rf]) / sgr),
                                           minlength=len(_S_EDGES) + 1)

    def _fold_grid(self, blk: _Block, gv: np.ndarray, out: Format, cmp_: np.ndarray | None) -> None:
        """Which coarser grids the nonzero compared outputs (``cmp_``; None: all) lie on, and the oracle's."""
        nz = gv != 0
        if cmp_ is not None:
            nz &= cmp_
        n_nz = int(np.count_nonzero(nz))
        if not n_nz:
            return
        self.grid_total += n_nz
        all_nz = n_nz == blk.y.size
        for c, n in _grid_counts(gv if all_nz else gv.take(np.flatnonzero(nz)), out).items():
            self.grid_got[c] = self.grid_got.get(c, 0) + n
        for c, held in blk.grid_y.items():
            n = blk.grid_y_n[c] if all_nz else int(np.count_nonzero(held & nz))
            self.grid_exp[c] = self.grid_exp.get(c, 0) + n

    def _fold_worst(self, blk: _Block, got: np.ndarray, e: np.ndarray, score: np.ndarray, tau_gate: np.ndarray,
                    ex: np.ndarray | None, fin: np.ndarray | None, ne: np.ndarray) -> None:
        """Offer the block's highest-scoring elements to the worst-element heap."""
        bb, y, scale = blk.bb, blk.y, blk.scale
        terms, sig = bb.terms, bb.sigma

        def rec(j: int) -> dict[str, Any]:
            dom = ""
            if blk.dominant is not None:
                dom = blk.term_names[int(blk.dominant[j if blk.dominant.size > 1 else 0])]
            elif terms:
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

        self._push_worst(score, blk.e0, rec)

    # ------------------------------------------------------------------ summaries

    def z_quantile(self, q: float) -> float:
        if self.z_n == 0:
            return math.nan
        if self.z_kept:
            i = self._kept_quantile_bin(q * self.z_n)
            if i is not None:
                i = min(i, len(_Z_EDGES) - 1)
                return float(_Z_EDGES[min(i + 1, len(_Z_EDGES) - 1)])
            self._bin_kept()
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
