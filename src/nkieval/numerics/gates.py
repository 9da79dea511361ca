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

import dataclasses
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from .bounds import RULES, RuleContext
from .diagnose import diagnose as _diagnose
from .formats import FORMATS, Format, format_of
from .inputs import is_random_family
from .locate import _where
from .oracle import OpSpec, OracleBlock, Prepared, _normalise_inputs, _resolve_op, exact_in, round_inputs
from .recipe import PrecisionRecipe
from .special_values import SPECIAL_VALUE_TABLE, SpecialValueRule
from .stochastic import check_stochastic_rounding, k_scaling_slope
from .stream import RATIO_MAX_LIMIT, RATIO_RMS_LIMIT, Z_P99_LIMIT, _Block, _make_block, _Stream, compact_block
from .ulp_hist import _bhattacharyya, _ulp_hist_dict
from .verdict import Finding, GateResult, Metrics, Verdict, explain

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

    ``keep_blocks=True`` keeps every block in memory, compacted by :func:`~.stream.compact_block`
    (:meth:`nbytes` says how much: about 50 bytes per output element); ``False`` streams blocks as
    :func:`check` does (bounded memory, the oracle is evaluated again on each call). The generic path's
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
        #: :meth:`nbytes` and the state it was counted in
        self._nbytes_at: tuple[tuple[int, ...], int] | None = None

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
                    self._kept[phase] = [compact_block(b) for b in self._generate(phase)]
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
        """Bytes held by the kept blocks and the variants' outputs (the prepared inputs not counted).

        The case cache asks after every judged case (walking every block's arrays: about 1 ms on a
        large output), but the answer changes only when a phase's blocks are first kept or a variant's output
        is added (neither is ever replaced or changed): it is kept with that state."""
        with self._lock:
            state = (*(-1 if kept is None else len(kept) for kept in self._kept), len(self._variant_outputs))
            if self._nbytes_at is not None and self._nbytes_at[0] == state:
                return self._nbytes_at[1]
            n = (sum(b.nbytes() for kept in self._kept if kept for b in kept)
                 + sum(v.nbytes for v in self._variant_outputs.values() if v is not None))
            self._nbytes_at = (state, n)
            return n

    # ------------------------------------------------------------------ judging

    def check(self, actual: np.ndarray, *, reference: np.ndarray | None = None, worst_k: int = 10,
              diagnose: bool = True, lean: bool = False) -> Verdict:
        """Judge one output (see :func:`check`, whose arguments these are).

        A verdict is a function of the output's bytes: the verdicts of the last few distinct
        outputs are kept, keyed by a SHA-256 of the bytes (with dtype and shape), and an output
        seen again gets its verdict back without being judged again. Candidates that compute the
        same thing produce the same bits — every correctly rounded result of an exactly rounded
        op, every kernel with the same accumulation order — so an RL loop meets them often.
        Hashing costs about 0.6 ms per MB on a miss.

        ``lean`` (a reward that reads the outcome only: the brief review): a passing output's verdict with only
        what the gates read gathered (:func:`_lean_pass`); any other output gets the full verdict, as does one
        whose full verdict is kept."""
        lean = lean and reference is None
        if reference is not None:
            key = None
        else:
            key = self._output_key(actual, ("check", worst_k, diagnose))
            hit = self._recall(key)
            if hit is not None:
                return hit
        lean_key = None if key is None or not lean else ("lean", *key)
        if lean_key is not None:
            hit = self._recall(lean_key)
            if hit is not None:
                return hit
            lean_verdict = self._check(actual, worst_k=worst_k, diagnose=diagnose, lean=True)
            if lean_verdict is not None and lean_verdict.status == "pass":
                self._remember(lean_key, lean_verdict)
                return lean_verdict
        verdict = self._check(actual, reference=reference, worst_k=worst_k, diagnose=diagnose)
        assert verdict is not None  # (only a lean check gives up)
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

    def _recall(self, key: tuple[Any, ...] | None) -> Any:
        """The kept value of ``key`` (now the most recently used), or None."""
        if key is None:
            return None
        with self._lock:
            hit = self._memo.get(key)
            if hit is not None:
                self._memo.move_to_end(key)
            return hit

    def _remember(self, key: tuple[Any, ...], value: Any) -> None:
        with self._lock:
            self._memo[key] = value
            self._memo.move_to_end(key)
            while len(self._memo) > self._MEMO_SIZE:
                self._memo.popitem(last=False)

    def _check(self, actual: np.ndarray, *, reference: np.ndarray | None = None, worst_k: int = 10,
               diagnose: bool = True, lean: bool = False) -> Verdict | None:
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

        # a lean stream whose output cannot pass stops at the block that shows it (None): the output is judged
        # in full; not under the generic path's provisional magnitudes (phase 0), which may fail what passes
        give_up = lean and not self.refinable

        def run_stream(phase: int) -> _Stream | None:
            stream = _Stream(recipe=recipe, statistical=statistical, out_shape=shape, worst_k=worst_k,
                             has_ref=reference is not None, lean=lean)
            for blk in self._blocks(phase):
                e1 = blk.e0 + blk.y.size
                raw = actual_flat[blk.e0:e1]
                got = raw.astype(np.float64)
                ref = None if ref_flat is None else ref_flat[blk.e0:e1].astype(np.float64)
                with np.errstate(all="ignore"):
                    stream.update(blk, got, ref, out, raw if same_storage else None)
                if (give_up or phase == 1) and lean and not stream.may_pass():
                    return None
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
        if stream is None:
            return None

        verdict = _decide(stream, spec, recipe, prep, shape, input_family, statistical, notes)
        if lean:
            return _lean_pass(verdict, statistical) if verdict.status == "pass" else verdict
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


#: the note a lean verdict carries (:func:`_lean_pass`)
LEAN_NOTE = ("brief review: only what the gates read was gathered (the error maxima, ULP histogram, relative L2 "
             "error, correctly rounded rate, z moments, output grid and worst elements were not)")


#: the metrics a lean stream does not gather: None in a lean verdict
_NOT_GATHERED = ("max_abs_err", "max_abs_err_index", "max_abs_err_allowed", "max_rel_err", "max_rel_err_index",
                 "max_ulp", "ulp_histogram", "rel_l2", "z_rms", "bias_t", "cr_rate", "output_grid")


def _lean_pass(v: Verdict, statistical: bool) -> Verdict:
    """A verdict of a lean stream (``_Stream.lean``), its not-gathered metrics None and said so.

    Why a lean stream's passing verdict has the full one's status, margin, deciding gate and gates (all that
    ``review.scoring`` reads of a passing case besides its findings, which a pass has none of): those come
    from the special-value counts, the exact elements, both bounds' largest ratios and exceedances, the z
    statistic's maximum, count over the limit and 99th percentile, the contract and the all-zeros test, which a
    lean stream folds exactly as a full one (the same code; it skips only :meth:`_Stream._fold_plain`, the
    grid, the worst elements and the z moments, which only the metrics, the worst list and the bias note
    read). A pass also has no mismatch (each mismatch fails G1, GE, G2 or, counted only when statistical,
    G3), so its mismatch count and places are the full ones too. A lean verdict that is not a pass is never
    returned (:meth:`PreparedCheck.check` judges that output in full)."""
    m = dataclasses.replace(v.metrics, **dict.fromkeys(_NOT_GATHERED))
    notes = (*(n for n in v.notes if not n.startswith("errors are biased")), LEAN_NOTE)
    text = explain(status=v.status, deciding=v.gate(v.deciding_gate), op=v.op, recipe=v.recipe, shape=v.shape,
                   input_family=v.input_family, metrics=m, worst=[], findings=[], notes=list(notes),
                   statistical=statistical)
    return Verdict(v.status, v.margin, v.deciding_gate, v.gates, (), v.recipe, v.op, v.shape, v.input_family, m,
                   v.findings, notes, text)


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
