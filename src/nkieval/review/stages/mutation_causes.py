"""Causes beyond constants for a port that disagrees with its CUDA source: formula, order of operations,
indexing, precision. Each hypothesis is a mutation of the CUDA source (:mod:`nkieval.cuda.mutate`); it is
stated as the cause only when the mutated CUDA kernel reproduces the port's outputs:

* on the run where the hypotheses are tried (the smallest run that disagrees), every output of the mutated
  kernel is within the task's tolerance of the port's, and every disagreeing output's difference shrinks
  at least tenfold; for a bf16-rounding hypothesis, up to 0.1% of an output's elements may sit one bf16 step
  from the port's (double rounding: a fused and an unfused multiply-add round to neighbouring bf16 values),
  and the share of disagreeing elements must shrink at least tenfold;
* on a second, different run (another case or edge input), every output of the mutated kernel is again
  within tolerance of the port's (a mutation that matches by coincidence on one input rarely does on two);
* and on every run of ``also`` (the edge inputs where the port disagrees: made to show what normal inputs
  hide, such as a rounding of a row's reduction that an epsilon drowns on rows of N(0, 1)).

The first mutation that passes both is stated (mutations are tried in the order formula, precision, order,
indexing, each in source order, within a work budget: :func:`nkieval.cuda.executor_work`). When no single mutation does, bf16 roundings in
several places at once are tried: every pair of the six roundings that each brought the kernel closest to
the port, then a beam of the three closest combinations grown by one rounding at a time, up to four
(:func:`_rounding_search`: 36 combinations at most). When none does, the disagreement keeps "cause not
identified". A mutation that faults (an index off by one running out of bounds) is not a hypothesis.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from nkieval.review.cache import task_fingerprint
from nkieval.review.stages.endless_loops import never_ends
from nkieval.review.stages.kept_runs import KeptRuns, kept_cuda_run, store_for
from nkieval.review.stages.kept_runs import inputs_digest as _digest

if TYPE_CHECKING:
    from nkieval.cuda.resume import ResumableRun

#: executor work re-running mutated CUDA kernels per review, in seconds of CPU at the calibration (the search
#: decides in work units, :func:`nkieval.cuda.work_units` of it, counted by the interpreter: the same hypotheses
#: are tried, and the same cause stated, on any machine under any load)
MUTATION_BUDGET_S = 10.0
#: a mutant runs at most this many times the unmutated kernel's work on the same run, and at least
#: MUTANT_MIN_S (no mutation of a loop bound or an index makes a kernel 20 times slower unless it never ends),
#: at most MUTANT_MAX_S (calibrated seconds)
MUTANT_SLOWDOWN = 20.0
MUTANT_MIN_S = 0.25
MUTANT_MAX_S = 2.0
#: the least work a confirming run is given however little of the budget is left (calibrated seconds)
CONFIRM_MIN_S = 0.5
#: a disagreement below this many tolerances is not attributed to a mutation (one is a real disagreement)
MIN_RATIO = 1.0


def _ratio(task: Any, g: np.ndarray, p: np.ndarray) -> float:
    g64 = np.asarray(g, np.float64)
    if np.size(p) != g64.size:
        return float("inf")
    p64 = np.asarray(p, np.float64).reshape(g64.shape)
    with np.errstate(all="ignore"):
        d = np.where((np.isnan(g64) & np.isnan(p64)) | (np.isinf(g64) & (g64 == p64)), 0.0, np.abs(p64 - g64))
        d = np.where(np.isnan(d), np.inf, d)
        r = d / (task.atol + task.rtol * np.abs(np.where(np.isfinite(g64), g64, 0.0)))
    return float(r.max()) if r.size else 0.0


def _off(task: Any, g: np.ndarray, p: np.ndarray) -> tuple[float, bool]:
    """(fraction of elements outside the task's tolerance, whether every one of them is within one bf16 step,
    2^-7 relative, of the port's value) for the mutated kernel's ``g`` against the port's ``p``. A bf16
    hypothesis may leave a few such elements: the port and the mutated kernel round nearly equal fp32 values
    (after a fused vs an unfused multiply-add) and may land on neighbouring bf16 values."""
    g64 = np.asarray(g, np.float64)
    if np.size(p) != g64.size:
        return 1.0, False
    p64 = np.asarray(p, np.float64).reshape(g64.shape)
    with np.errstate(all="ignore"):
        d = np.where((np.isnan(g64) & np.isnan(p64)) | (np.isinf(g64) & (g64 == p64)), 0.0, np.abs(p64 - g64))
        d = np.where(np.isnan(d), np.inf, d)
        bad = d > task.atol + task.rtol * np.abs(np.where(np.isfinite(g64), g64, 0.0))
        near = bool(np.all(d[bad] <= 2.0**-7 * np.abs(p64[bad])))
    return (float(bad.mean()) if bad.size else 0.0), near


#: a bf16 hypothesis may leave this fraction of an output's elements on a neighbouring bf16 value
MAX_TIES = 1e-3


def _reproduces(task: Any, outs: list[np.ndarray], port: list[np.ndarray], idx: dict[str, int], names: list[str],
                before: dict[str, float] | None, precision: bool) -> dict[str, float] | None:
    """The mutated kernel's max ratio per output when it reproduces the port's outputs, else None. Without
    ``precision`` every element must be within tolerance; with it, up to :data:`MAX_TIES` of them may sit one
    bf16 step away, and then the disagreeing outputs' share of such elements must shrink at least tenfold."""
    after = {o: _ratio(task, outs[idx[o]], port[idx[o]]) for o in names}
    if all(after[o] <= 1.0 for o in names):
        return after
    if not precision:
        return None
    for o in names:
        frac, near = _off(task, outs[idx[o]], port[idx[o]])
        if frac > MAX_TIES or not near or (before is not None and frac > 0.1 * before[o]):
            return None
    return after


def _size(run: tuple[Any, ...]) -> int:
    return sum(int(np.size(a)) for a in run[2].values())


def mutation_causes(task: Any, cuda_src: str, runs: list[tuple[Any, ...]], disagreeing: list[str],
                    budget_s: float = MUTATION_BUDGET_S, locate: Callable[[Any], Any] | None = None,
                    keep: bool = True, also: Sequence[tuple[Any, ...]] = ()) -> list[dict[str, Any]]:
    """At most one cause (a dict as the differential record's ``causes``) for the ``disagreeing`` outputs.

    ``runs``: ``(label, dims, inputs, gpu outputs, port outputs)`` for every case both ran on. ``locate``:
    the port's side of a stated mutation (:func:`.port_lines.find_port_line` on the port's trace), or None.
    ``keep``: the mutants' runs are kept across reviews (:mod:`.kept_runs`); False keeps them within this search
    only (a review without the cross-review cache). ``also``: runs of ``runs`` a hypothesis must reproduce as well
    (checked only for one that passed the first two). ``budget_s``: calibrated seconds of executor work
    (:func:`nkieval.cuda.work_units`)."""
    from nkieval.cuda import work_units
    from nkieval.cuda.program import preprocess

    names = [s.name for s in task.outputs]
    idx = {o: k for k, o in enumerate(names)}
    scored = []
    for r in runs:
        if len(r[4]) < len(names):
            continue
        e = {o: _ratio(task, r[3][idx[o]], r[4][idx[o]]) for o in names}
        if any(e[o] > MIN_RATIO and np.isfinite(e[o]) for o in disagreeing):
            scored.append((r, e))
    if not scored:
        return []
    scored.sort(key=lambda x: _size(x[0]))
    (first, base), rest = scored[0], scored[1:]
    # the confirming run: another disagreeing run when there is one (the largest disagreement), else any other
    confirm = max(rest, key=lambda x: max(x[1][o] for o in disagreeing))[0] if rest else \
        next((r for r in runs if r[0] != first[0] and len(r[4]) >= len(names)), None)
    budget = work_units(budget_s)
    search = _Search(task, preprocess(cuda_src), first, base, confirm, names, disagreeing, budget, keep,
                     [r for r in also if r[0] not in (first[0], confirm and confirm[0])])
    ran: list[Any] = []  # (the precision mutations that ran without faulting)
    for m in _mutations_of(cuda_src):
        if search.spent >= budget:
            break
        found = search.attempt(m)
        if found is not None:
            return [_cause(task, cuda_src, m, found, search, locate)]
        if m.kind == "precision" and search.last_ran:
            ran.append(m)
    # bf16 in several places at once: combinations of the precision mutations that each bring the mutated
    # kernel closer to the port, the closest first
    helpful: list[tuple[float, Any]] = []
    for m in ran:
        if search.spent >= budget:
            break
        closer = search.closeness(m)
        if closer is not None:
            helpful.append((closer, m))
    helpful.sort(key=lambda x: x[0])
    found_set = _rounding_search(helpful[:ROUNDING_CANDIDATES], search, budget, ran)
    if found_set is not None:
        combined, found, parts = found_set
        return [_cause(task, cuda_src, combined, found, search, locate, parts)]
    # a mutation of a device function called from several sites, made at one call only
    for m in _call_site_hypotheses(cuda_src, search):
        if search.spent >= budget:
            break
        found = search.attempt(m)
        if found is not None:
            return [_cause(task, cuda_src, m, found, search, locate)]
    return []


#: one-call hypotheses (:func:`_call_site_hypotheses`) tried at most: each one run of the smallest disagreeing case
#: (two more for one that reproduces the port there). Sixteen covers the eight mutations that came closest to
#: the port at every call of a helper called twice (a block reduction for the max and for the sum), within the
#: search's CPU budget; only a port that no mutation of every call explains pays for it
MAX_CALL_SITE_HYPOTHESES = 16


def _call_site_hypotheses(cuda_src: str, search: _Search) -> list[Any]:
    """The mutations that ran, in a ``__device__`` function called from several sites, each made at one call only
    (:func:`nkieval.cuda.mutate.call_site_variants`), those that brought the kernel closest to the port first
    (made at every call), at most :data:`MAX_CALL_SITE_HYPOTHESES`."""
    from nkieval.cuda.mutate import call_site_variants

    out: list[Any] = []
    for m, _closer in sorted(search.scores.items(), key=lambda x: x[1]):
        if len(out) >= MAX_CALL_SITE_HYPOTHESES:
            break
        out += call_site_variants(cuda_src, m)
    return out[:MAX_CALL_SITE_HYPOTHESES]


#: CUDA sources whose mutation list is kept (a task's kernel.cu: the list does not depend on the candidate)
MUTATION_LISTS_KEPT = 16


@functools.lru_cache(maxsize=MUTATION_LISTS_KEPT)
def _mutations_of(cuda_src: str) -> tuple[Any, ...]:
    """:func:`nkieval.cuda.mutate.mutations` of ``cuda_src`` (immutable ``Mutation`` records), once per source."""
    from nkieval.cuda.mutate import mutations

    return tuple(mutations(cuda_src))


#: precision mutations combined when no single mutation reproduces the port: the ones closest to it
ROUNDING_CANDIDATES = 6
#: combinations of three or more roundings extend only the closest combinations one size smaller
ROUNDING_BEAM = 3
#: roundings in one combination at most. With the two above this bounds the hypotheses at C(6, 2) = 15
#: pairs, 3 x 4 = 12 triples and 3 x 3 = 9 quadruples (36), all within the search's CPU budget
MAX_ROUNDINGS = 4
#: a precision mutation is a combination candidate when it leaves less than this fraction of the mean
#: difference, of the share of elements outside tolerance or of the share not bitwise equal
CLOSER = 0.9


def _nested(m: Any, parts: tuple[Any, ...]) -> bool:
    """Does rounding ``m``'s span contain, or lie inside, the span of one of ``parts`` (another of them)?"""
    return any(m is not p and (m.start, m.end) != (p.start, p.end)
               and ((m.start <= p.start and p.end <= m.end) or (p.start <= m.start and m.end <= p.end)) for p in parts)


def _rounding_search(scored: list[tuple[float, Any]], search: _Search, budget: int, ran: list[Any] = ()
                     ) -> tuple[Any, tuple[dict[str, float], list[str]], tuple[Any, ...]] | None:
    """(the combined mutation, what :meth:`_Search.attempt` found, its roundings) for the first combination
    of ``scored``'s roundings (each with its :meth:`_Search.closeness`) that reproduces the port, or None.
    Every pair is tried, in ``scored``'s order; a combination of k > 2 roundings extends one of the
    :data:`ROUNDING_BEAM` closest combinations of k - 1 that came closer to the port than the combination
    it extends (a greedy beam: a rounding the port makes brings the kernel closer), up to
    :data:`MAX_ROUNDINGS` roundings, by one of ``scored``'s roundings or by a rounding of ``ran`` (every
    precision mutation that ran) nested with one of the combination's. Why the nested ones: a port that
    rounds a tile and then an expression of it (``bf16(bf16(mean) + eps)``) rounds twice where the kernel's
    expression ``mean + eps`` has one rounding point; the outer rounding alone (``bf16(mean + eps)``)
    double-rounds differently from the port and may come no closer to it (rmsnorm_warp's bf16_square_sum
    on rows of mean square ~1e-6, where eps is not lost in the sum), so the beam would never try it."""
    from nkieval.cuda.mutate import combine_all

    top = [m for _, m in scored]
    beam: list[tuple[float, tuple[Any, ...]]] = [(c, (m,)) for c, m in scored]
    for _size in range(2, MAX_ROUNDINGS + 1):
        seen: set[frozenset[int]] = set()
        grown: list[tuple[float, tuple[Any, ...]]] = []
        for parent_closer, parts in beam:
            extra = [m for m in ran if m not in top and _nested(m, parts)] if _size > 2 else []
            for m in [*top, *extra]:
                key = frozenset(id(x) for x in (*parts, m))
                if m in parts or key in seen:
                    continue
                seen.add(key)
                if search.spent >= budget:
                    return None
                combined = combine_all((*parts, m), search.text)
                if combined is None:
                    continue
                found = search.attempt(combined)
                if found is not None:
                    return combined, found, (*parts, m)
                closer = search.closeness(combined) if search.last_ran and _size < MAX_ROUNDINGS else None
                if closer is not None and closer < parent_closer:
                    grown.append((closer, (*parts, m)))
        grown.sort(key=lambda x: x[0])
        beam = grown[:ROUNDING_BEAM]
        if not beam:
            return None
    return None


def _inexact(g: np.ndarray, p: np.ndarray) -> float:
    """The share of elements of ``g`` not bitwise equal (as float64) to the port's ``p`` (NaN equals NaN)."""
    g64 = np.asarray(g, np.float64).reshape(-1)
    if np.size(p) != g64.size:
        return 1.0
    p64 = np.asarray(p, np.float64).reshape(-1)
    same = (g64 == p64) | (np.isnan(g64) & np.isnan(p64))
    return float(1.0 - same.mean()) if same.size else 0.0


def _mean_diff(g: np.ndarray, p: np.ndarray) -> float:
    g64 = np.asarray(g, np.float64).reshape(-1)
    if np.size(p) != g64.size:
        return float("inf")
    with np.errstate(all="ignore"):
        d = np.abs(np.asarray(p, np.float64).reshape(-1) - g64)
    d = d[np.isfinite(d)]
    return float(d.mean()) if d.size else 0.0


class _Search:
    """Runs one hypothesis after another against the smallest disagreeing run and confirms it on a second."""

    def __init__(self, task: Any, text: str, first: tuple[Any, ...], base: dict[str, float],
                 confirm: tuple[Any, ...] | None, names: list[str], disagreeing: list[str], budget: int,
                 keep: bool = True, also: Sequence[tuple[Any, ...]] = ()):
        self.task, self.text, self.first, self.base, self.confirm = task, text, first, base, confirm
        self.names, self.disagreeing, self.budget = names, disagreeing, budget  # (work units)
        self.idx = {o: k for k, o in enumerate(names)}
        self.spent = 0
        self.store, self.fingerprint = store_for(keep), task_fingerprint(task)
        self.digest = _digest(first[2])
        self.confirm_digest = _digest(confirm[2]) if confirm is not None else ""
        self.also = [(r, _digest(r[2])) for r in also]
        gpu, port = first[3], first[4]
        self.before = {o: _off(task, gpu[self.idx[o]], port[self.idx[o]])[0] for o in names}
        self._base: dict[str, dict[str, tuple[float, float, float]]] = {}
        #: whether the last hypothesis ran on the first run (did not fault or time out)
        self.last_ran = False
        #: per single mutation that ran on the first run, its largest tolerance ratio to the port there as a
        #: fraction of the unmutated kernel's (the disagreeing outputs): how close it came
        self.scores: dict[Any, float] = {}
        self._kernel_work: int | None = None  # (the unmutated kernel's work units on the first run)
        #: the unmutated kernel on the first run, its states kept for mutants to resume from (captured when a
        #: mutant first runs there), and on the confirming run (captured when a second mutant runs there: most
        #: searches run one there, for the hypothesis they state)
        from nkieval.cuda.resume import ResumableRun

        self.resumable = ResumableRun(task, text, first[2], first[1], task.params)
        self.resumable_confirm = None if confirm is None else ResumableRun(task, text, confirm[2], confirm[1],
                                                                            task.params, fresh_runs=1)

    def _distances(self, g: list[np.ndarray], p: list[np.ndarray]) -> dict[str, tuple[float, float, float]]:
        """Per disagreeing output, how far ``g`` is from the port's ``p``: the mean difference, the share of
        elements outside tolerance and the share of elements not bitwise equal (a rounding the port makes
        puts the kernel's values on the port's bf16 grid, exactly, even where it moves others away)."""
        idx = self.idx
        return {o: (_mean_diff(g[idx[o]], p[idx[o]]), _off(self.task, g[idx[o]], p[idx[o]])[0],
                    _inexact(g[idx[o]], p[idx[o]])) for o in self.disagreeing}

    def _closer(self, g2: list[np.ndarray], run: tuple[Any, ...]) -> float | None:
        """How much closer to the port the mutated kernel's disagreeing outputs come on ``run`` than the CUDA
        kernel's, by each of :meth:`_distances` (the smallest of the three ratios, worst output); None unless
        one of them falls below :data:`CLOSER` for every disagreeing output."""
        if run[0] not in self._base:
            self._base[run[0]] = self._distances(run[3], run[4])
        was, now = self._base[run[0]], self._distances(g2, run[4])
        out = []
        for k in range(3):
            got = [now[o][k] / was[o][k] if was[o][k] > 0 else 1.0 for o in self.disagreeing]
            if got and max(got) < CLOSER:
                out.append(max(got))
        return min(out) if out else None

    def attempt(self, m: Any) -> tuple[dict[str, float], list[str]] | None:
        """(max ratio per output, the runs' labels) when the mutation reproduces the port on both runs."""
        task, idx, names = self.task, self.idx, self.names
        label, dims, inputs, _gpu, port = self.first
        if never_ends(self.text, m):  # (what its run gives: a timeout charged its limit, or a rejection)
            self.spent += self._limit()
            self.last_ran = False
            return None
        mutated = m.apply(self.text)
        g2, took = _run_mutant(task, self.store, self.fingerprint, inputs, self.digest, dims, mutated,
                               self._limit(), self.resumable)
        self.spent += took
        self.last_ran = g2 is not None
        if g2 is None:
            return None
        precision = m.kind == "precision"
        worse = [_ratio(task, g2[idx[o]], port[idx[o]]) / self.base[o] for o in self.disagreeing
                 if self.base[o] > MIN_RATIO]
        self.scores.setdefault(m, max(worse, default=1.0))
        after = _reproduces(task, g2, port, idx, names, self.before, precision)
        if after is None or (not precision and any(after[o] > 0.1 * self.base[o] for o in self.disagreeing
                                                   if self.base[o] > MIN_RATIO)):
            return None
        labels = [label]
        if self.confirm is not None:
            g3, took = _run_mutant(task, self.store, self.fingerprint, self.confirm[2], self.confirm_digest,
                                   self.confirm[1], mutated, self._left(),
                                   self.resumable_confirm)
            self.spent += took
            if g3 is None or _reproduces(task, g3, self.confirm[4], idx, names, None, precision) is None:
                return None
            labels.append(self.confirm[0])
        for run, digest in self.also:
            g4, took = _run_mutant(task, self.store, self.fingerprint, run[2], digest, run[1], mutated,
                                   self._left())
            self.spent += took
            if g4 is None or _reproduces(task, g4, run[4], idx, names, None, precision) is None:
                return None
            labels.append(run[0])
        return after, labels


    def _limit(self) -> int:
        """Work units one mutant may run on the first run: :data:`MUTANT_SLOWDOWN` times the unmutated
        kernel's (a mutated loop bound that never ends, ``s > 0 - 1`` of ``s >>= 1``, stops there instead of
        taking the budget), at least :data:`MUTANT_MIN_S`, at most :data:`MUTANT_MAX_S` and what the budget
        leaves."""
        from nkieval.cuda import work_units

        if self._kernel_work is None:
            _out, self._kernel_work = _run_mutant(self.task, self.store, self.fingerprint, self.first[2],
                                                  self.digest, self.first[1], self.text, work_units(MUTANT_MAX_S))
        return min(self.budget - self.spent, work_units(MUTANT_MAX_S),
                   max(work_units(MUTANT_MIN_S), int(MUTANT_SLOWDOWN * self._kernel_work)))

    def _left(self) -> int:
        """Work units a confirming or closeness run may take: what the budget leaves, at least
        :data:`CONFIRM_MIN_S`."""
        from nkieval.cuda import work_units

        return max(work_units(CONFIRM_MIN_S), self.budget - self.spent)

    def closeness(self, m: Any) -> float | None:
        """:meth:`_closer` of mutation ``m`` on the confirming run, the larger one (a small first run may not
        show a rounding's effect: a row mean rounded where the row is near-constant), else on the first."""
        run = self.confirm if self.confirm is not None else self.first
        digest = self.confirm_digest if self.confirm is not None else self.digest
        g, took = _run_mutant(self.task, self.store, self.fingerprint, run[2], digest, run[1], m.apply(self.text),
                              self._left(),
                              self.resumable_confirm if self.confirm is not None else self.resumable)
        self.spent += took
        return None if g is None else self._closer(g, run)


def _cause(task: Any, cuda_src: str, m: Any, found: tuple[dict[str, float], list[str]], search: _Search,
           locate: Callable[[Any], Any] | None, parts: tuple[Any, ...] = ()) -> dict[str, Any]:
    after, labels = found
    names, base = search.names, search.base
    outs = [o for o in search.disagreeing if base[o] > MIN_RATIO]
    line_text = _line(cuda_src, m.line)
    lines = sorted({m.line} | {p.line for p in parts})
    where = " and ".join(f"kernel.cu:{ln}" for ln in lines)
    port = None
    if locate is not None:
        try:
            port = locate(m)
        except Exception:  # (the trace does not establish the port's side: the cause stands without it)
            port = None
    port_side = ("; port line not established" if port is None else
                 f"; in the port: {port.evidence}")
    summary = (f"{m.kind} at {where} (`{line_text}`): re-running the CUDA kernel with {m.what} "
               f"reproduces the port's {', '.join(names)} on {' and '.join(labels)} (difference of "
               + ", ".join(f"{o} {base[o]:.3g}x -> {after[o]:.3g}x the tolerance" for o in outs) + ")"
               + port_side)
    first_line = port.lines[0] if port is not None and port.lines else None
    return {"kind": m.kind, "outputs": outs, "cuda_line": m.line, "cuda_text": line_text, "mutation": m.what,
            "port_line": first_line, "port_lines": list(port.lines) if port is not None else [],
            "port_text": port.evidence if port is not None else None, "case": search.first[0],
            "summary": summary, "reproduced": [{"output": o, "before": base[o], "after": after[o]} for o in outs]}


def _run_mutant(task: Any, store: KeptRuns, fingerprint: str, inputs: dict[str, np.ndarray], digest: str,
                dims: dict[str, int], source: str, limit: int, resumable: ResumableRun | None = None
                ) -> tuple[list[np.ndarray] | None, int]:
    """(the mutated kernel's outputs, or None where it faults or times out; the executor work units charged),
    kept across reviews (:func:`.kept_runs.kept_cuda_run`). Any error of a mutant is a fault: a hypothesis the
    executor cannot run is not a hypothesis. ``resumable``: the unmutated kernel on these inputs, for the run
    to resume from where the mutant first differs (charged as a fresh run: the same hypotheses are tried)."""
    return kept_cuda_run(task, fingerprint, inputs, digest, dims, source, task.params, limit, faults=(Exception,),
                         store=store, resumable=resumable)


def _line(text: str, line: int) -> str:
    lines = text.splitlines()
    return lines[line - 1].strip()[:160] if 0 < line <= len(lines) else ""
