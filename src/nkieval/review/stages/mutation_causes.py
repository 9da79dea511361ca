"""Causes beyond constants for a port that disagrees with its CUDA source: formula, order of operations,
indexing, precision. Each hypothesis is a mutation of the CUDA source (:mod:`nkieval.cuda.mutate`); it is
stated as the cause only when the mutated CUDA kernel reproduces the port's outputs:

* on the run where the hypotheses are tried (the smallest run that disagrees), every output of the mutated
  kernel is within the task's tolerance of the port's, and every disagreeing output's difference shrinks
  at least tenfold; for a bf16-rounding hypothesis, up to 0.1% of an output's elements may sit one bf16 step
  from the port's (double rounding: a fused and an unfused multiply-add round to neighbouring bf16 values),
  and the share of disagreeing elements must shrink at least tenfold;
* on a second, different run (another case or edge input), every output of the mutated kernel is again
  within tolerance of the port's (a mutation that matches by coincidence on one input rarely does on two).

The first mutation that passes both is stated (mutations are tried in the order formula, precision, order,
indexing, each in source order, within a time budget); when none does, the disagreement keeps "cause not
identified". A mutation that faults (an index off by one running out of bounds) is not a hypothesis.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable
from itertools import combinations
from typing import Any

import numpy as np

#: seconds spent re-running mutated CUDA kernels per review: CPU time of the reviewing thread (the executor
#: runs in it: :func:`nkieval.cuda.executor_seconds`), so a loaded machine tries the same hypotheses as an idle
#: one, only later
MUTATION_BUDGET_S = 10.0
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
                    budget_s: float = MUTATION_BUDGET_S, locate: Callable[[Any], Any] | None = None
                    ) -> list[dict[str, Any]]:
    """At most one cause (a dict as the differential record's ``causes``) for the ``disagreeing`` outputs.

    ``runs``: ``(label, dims, inputs, gpu outputs, port outputs)`` for every case both ran on. ``locate``:
    the port's side of a stated mutation (:func:`.port_lines.find_port_line` on the port's trace), or None."""
    from nkieval.cuda.mutate import combine, mutations
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
    search = _Search(task, preprocess(cuda_src), first, base, confirm, names, disagreeing, budget_s)
    helpful: list[tuple[float, Any]] = []
    for m in mutations(cuda_src):
        if search.spent >= budget_s:
            break
        found = search.attempt(m)
        if found is not None:
            return [_cause(task, cuda_src, m, found, search, locate)]
        if m.kind == "precision" and search.last_closer is not None:
            helpful.append((search.last_closer, m))
    # bf16 in two places at once: pairs of the precision mutations that each bring the mutated kernel closer
    # to the port (the smallest remaining mean difference first)
    helpful.sort(key=lambda x: x[0])
    top = [m for _, m in helpful[:PAIR_CANDIDATES]]
    for a, b in combinations(top, 2):
        if search.spent >= budget_s:
            break
        pair = combine(a, b, search.text)
        if pair is None:
            continue
        found = search.attempt(pair)
        if found is not None:
            return [_cause(task, cuda_src, pair, found, search, locate, (a, b))]
    return []


#: precision mutations paired when no single mutation reproduces the port (at most C(6, 2) = 15 pairs)
PAIR_CANDIDATES = 6
#: a precision mutation is a pair candidate when it leaves less than this fraction of the mean difference
#: or of the share of disagreeing elements
CLOSER = 0.9


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
                 confirm: tuple[Any, ...] | None, names: list[str], disagreeing: list[str], budget_s: float):
        self.task, self.text, self.first, self.base, self.confirm = task, text, first, base, confirm
        self.names, self.disagreeing, self.budget_s = names, disagreeing, budget_s
        self.idx = {o: k for k, o in enumerate(names)}
        self.spent = 0.0
        self.digest = _digest(first[2])
        self.confirm_digest = _digest(confirm[2]) if confirm is not None else ""
        gpu, port = first[3], first[4]
        self.before = {o: _off(task, gpu[self.idx[o]], port[self.idx[o]])[0] for o in names}
        self.distance = {o: _mean_diff(gpu[self.idx[o]], port[self.idx[o]]) for o in disagreeing}
        #: for the last precision hypothesis that ran and failed: how much closer to the port it came
        #: (:meth:`_closer`; a rounding the port makes, among others), or None
        self.last_closer: float | None = None

    def _closer(self, g2: list[np.ndarray]) -> float | None:
        """How much closer to the port the mutated kernel's disagreeing outputs come, by the mean difference
        or by the share of elements outside tolerance (the smaller of the two, worst output); None unless
        one of the two falls below :data:`CLOSER` for every disagreeing output."""
        port, idx, out = self.first[4], self.idx, []
        for how in ("mean", "share"):
            got = []
            for o in self.disagreeing:
                g, p = g2[idx[o]], port[idx[o]]
                now, was = (_mean_diff(g, p), self.distance[o]) if how == "mean" else \
                    (_off(self.task, g, p)[0], self.before[o])
                got.append(now / was if was > 0 else 1.0)
            if got and max(got) < CLOSER:
                out.append(max(got))
        return min(out) if out else None

    def attempt(self, m: Any) -> tuple[dict[str, float], list[str]] | None:
        """(max ratio per output, the runs' labels) when the mutation reproduces the port on both runs."""
        task, idx, names = self.task, self.idx, self.names
        self.last_closer = None
        label, dims, inputs, _gpu, port = self.first
        mutated = m.apply(self.text)
        g2, took = _run_mutant(task, inputs, self.digest, dims, mutated, min(self.budget_s - self.spent, 2.0))
        self.spent += took
        if g2 is None:
            return None
        precision = m.kind == "precision"
        after = _reproduces(task, g2, port, idx, names, self.before, precision)
        if after is None or (not precision and any(after[o] > 0.1 * self.base[o] for o in self.disagreeing
                                                   if self.base[o] > MIN_RATIO)):
            if precision and after is None:
                self.last_closer = self._closer(g2)
            return None
        labels = [label]
        if self.confirm is not None:
            g3, took = _run_mutant(task, self.confirm[2], self.confirm_digest, self.confirm[1], mutated,
                                   max(0.5, self.budget_s - self.spent))
            self.spent += took
            if g3 is None or _reproduces(task, g3, self.confirm[4], idx, names, None, precision) is None:
                return None
            labels.append(self.confirm[0])
        return after, labels


def _cause(task: Any, cuda_src: str, m: Any, found: tuple[dict[str, float], list[str]], search: _Search,
           locate: Callable[[Any], Any] | None, pair: tuple[Any, Any] | None = None) -> dict[str, Any]:
    after, labels = found
    names, base = search.names, search.base
    outs = [o for o in search.disagreeing if base[o] > MIN_RATIO]
    line_text = _line(cuda_src, m.line)
    lines = sorted({m.line} if pair is None else {pair[0].line, pair[1].line})
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


#: mutated kernels' outputs kept across reviews (a mutant's outputs on given inputs do not depend on the
#: candidate: an RL loop's flawed candidates of one task try the same mutants on the same cases)
_MUTANT_RUNS: OrderedDict[tuple[Any, ...], tuple[list[np.ndarray] | None, float]] = OrderedDict()
MUTANT_RUNS_KEPT = 2048
_MUTANT_LOCK = threading.Lock()


def _digest(inputs: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for k, a in inputs.items():
        a = np.ascontiguousarray(a)
        h.update(f"{k}:{a.dtype.str}:{a.shape};".encode())
        h.update(a.reshape(-1).view(np.uint8))  # (bytes of any dtype: ml_dtypes' bf16 has no buffer format)
    return h.hexdigest()


def _run_mutant(task: Any, inputs: dict[str, np.ndarray], digest: str, dims: dict[str, int], source: str,
                limit: float) -> tuple[list[np.ndarray] | None, float]:
    """(the mutated kernel's outputs, or None where it faults; the executor's CPU seconds, the first time): a
    kept run counts its first seconds against the budget, so a warm review tries the same mutants as a cold one.
    A run stopped by its time limit is not kept (a longer limit may finish it)."""
    from nkieval.cuda import ExecutorTimeout, executor_seconds, run_task_cuda

    key = (task.id, hashlib.sha256(source.encode()).hexdigest(), digest, tuple(sorted(dims.items())),
           repr(sorted(task.params.items())))
    with _MUTANT_LOCK:
        hit = _MUTANT_RUNS.get(key)
        if hit is not None:
            _MUTANT_RUNS.move_to_end(key)
            return hit
    t0 = executor_seconds()
    try:
        out: list[np.ndarray] | None = list(run_task_cuda(task, inputs, dims, source=source, time_limit_s=limit)[0])
    except ExecutorTimeout:
        return None, executor_seconds() - t0
    except Exception:  # (a hypothesis the executor cannot run is not a hypothesis)
        out = None
    value = (out, executor_seconds() - t0)
    with _MUTANT_LOCK:
        _MUTANT_RUNS[key] = value
        while len(_MUTANT_RUNS) > MUTANT_RUNS_KEPT:
            _MUTANT_RUNS.popitem(last=False)
    return value


def _line(text: str, line: int) -> str:
    lines = text.splitlines()
    return lines[line - 1].strip()[:160] if 0 < line <= len(lines) else ""
