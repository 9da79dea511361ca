"""The built-in suite runner: every expert, baseline and flawed candidate through the review.

Why a runner and not a test: the suite is how nkieval measures itself. One run answers four
questions an expert reviewer of *nkieval* would ask, task by task and target by target:

* does every expert solution pass the review (Correctness and Numerical standard on every
  public and hidden shape and input family)?
* is every baseline correct and *slower than the expert* in the performance model on every
  target the task declares (otherwise the baseline is no speed reference, or the expert is
  not expert)?
* does every expert reach the fraction of the performance model's roofline its task states
  (``[perf] expert_roofline_fraction``) on every target? A stated fraction is a claim about
  the expert; the suite checks it like the others, so a slower expert or a changed model shows
  up as a miss instead of a stale number in ``task.toml``.
* is every flawed candidate caught in the rubric criterion its task metadata names, for the
  reason its metadata names (the review's detection rate)? Caught means: that criterion scores
  below the expert's level on it, *and* one of that criterion's feedback lines contains one of
  the flaw's ``evidence`` words (:func:`names_flaw`), so a candidate marked down for some other
  reason is not counted.

Each (task, candidate, target) review is an *entry*; a run appends one JSON line per entry to
a results file and skips entries already there with the same fingerprint (hash of the task
files and the candidate), so an interrupted run resumes and an edited task is re-run. The
matrix is computed from the records alone, so ``nkieval suite report`` can reprint it.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import click

from nkieval.tasks.loader import BUILTIN_ROOT, TASK_SETS, builtin_ids, load_task
from nkieval.tasks.schema import Task, TaskError

ROLES = ("expert", "baseline", "flawed")
#: 2: ``feedback`` holds only the findings (severity above info) of the flaw's criterion and ``also``.
#: 3: expert records carry the task's ``expert_roofline_fraction`` (the judge checks it).
#: 4: verdicts are the report-v2 set (nkieval.review.verdict: ``harness-error`` for a judge failure, was
#: ``infra-error``), with ``verdict_reason`` and ``verdict_message``.
RECORD_VERSION = 4
#: Results live in the user's cache (stable across runs, so they resume; never inside a checkout).
DEFAULT_RESULTS = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nkieval" / "suite-results.jsonl"


@dataclass(frozen=True)
class SuiteEntry:
    """One review to run: a candidate of a task on one target, and what the suite expects of it."""

    task: str
    level: int
    role: str  # "expert" | "baseline" | "flawed"
    candidate: str  # "solution", "baseline" or "flawed:<stem>"
    path: str
    target: str
    task_dir: str
    criterion: str | None = None  # flawed only: the criterion that must catch it
    flaw: str | None = None
    also: tuple[str, ...] = ()  # flawed only: other criteria that may also mark it down
    evidence: tuple[str, ...] = ()  # flawed only: words the feedback must contain (any one)
    families: tuple[str, ...] = ()  # flawed only: the input families that expose the flaw (empty: all)
    expert_roofline_fraction: float | None = None  # expert only: the fraction of roofline the task states

    @property
    def key(self) -> str:
        return f"{self.task}/{self.candidate}@{self.target}"

    def fingerprint(self) -> str:
        """Hash of everything the verdict depends on: the task's files and the candidate."""
        h = hashlib.sha256()
        d = Path(self.task_dir)
        for name in ("task.toml", "reference.py", "solution_nki.py", "baseline_nki.py", "kernel.cu"):
            p = d / name
            if p.is_file():
                h.update(name.encode() + b"\0" + p.read_bytes())
        h.update(b"candidate\0" + Path(self.path).read_bytes())
        return h.hexdigest()[:16]


def plan(level: int | None = None, tasks: str | None = None, *, roles: Sequence[str] = ROLES,
         all_targets: bool = True, root: Path | None = None,
         errors: list[str] | None = None) -> list[SuiteEntry]:
    """The entries of a suite run, in a stable order (task id, then role, then target).

    ``tasks`` is a comma-separated list of fnmatch patterns over task ids (``"gemm*,rope"``).
    Experts and baselines run on every declared target (``all_targets``), flawed candidates on
    the task's first (default) target, where the task author judged the flaw. A task that does
    not load is reported in ``errors`` (when given) and skipped, so one broken task cannot stop
    the suite; without ``errors`` its TaskError propagates.
    """
    ids = sorted(p.name for p in root.iterdir() if (p / "task.toml").is_file()) if root else builtin_ids()
    pats = [p.strip() for p in (tasks or "").split(",") if p.strip()]
    out: list[SuiteEntry] = []
    for tid in ids:
        if pats and not any(fnmatch.fnmatch(tid, p) for p in pats):
            continue
        try:
            task = load_task((root or BUILTIN_ROOT) / tid)
        except TaskError as e:
            if errors is None:
                raise
            errors.append(f"{tid}: {e}")
            continue
        if level is not None and task.level != level:
            continue
        out.extend(_task_entries(task, roles, all_targets))
    return out


def _task_entries(task: Task, roles: Sequence[str], all_targets: bool) -> list[SuiteEntry]:
    targets = task.targets if all_targets else task.targets[:1]
    base = dict(task=task.id, level=task.level, task_dir=str(task.directory))
    out: list[SuiteEntry] = []
    if "expert" in roles and task.solution_file:
        out += [SuiteEntry(role="expert", candidate="solution", path=str(task.solution_file), target=t,
                           expert_roofline_fraction=task.perf.expert_roofline_fraction, **base)
                for t in targets]
    if "baseline" in roles and task.baseline_file:
        out += [SuiteEntry(role="baseline", candidate="baseline", path=str(task.baseline_file), target=t, **base)
                for t in targets]
    if "flawed" in roles:
        for fl in task.flawed:
            out.append(SuiteEntry(role="flawed", candidate=f"flawed:{Path(fl.file).stem}",
                                  path=str((task.directory / fl.file).resolve()), target=task.default_target,
                                  criterion=fl.criterion, flaw=fl.flaw, also=tuple(fl.also),
                                  evidence=tuple(fl.evidence), families=tuple(fl.families), **base))
    return out


# ----------------------------------------------------------------------------------- running
def run_entry(entry: SuiteEntry, seed: int = 0) -> dict[str, Any]:
    """Review one entry and return its JSON-safe record. Harness failures become a record too."""
    from nkieval.review.pipeline import review
    from nkieval.tasks.inputs import derive_seed

    t0 = time.perf_counter()
    rec: dict[str, Any] = {"v": RECORD_VERSION, "key": entry.key, "fingerprint": entry.fingerprint(),
                           **{k: v for k, v in asdict(entry).items() if k not in ("path", "task_dir")}}
    kw: dict[str, Any] = {"families": tuple(entry.families)} if entry.families else {}
    try:
        r = review(entry.task_dir, Path(entry.path), target=entry.target, seed=derive_seed(seed, entry.key), **kw)
    except Exception as e:  # a harness bug must not stop the suite; it is a miss with its reason
        rec.update(verdict="harness-error", error=f"{type(e).__name__}: {e}", elapsed_s=time.perf_counter() - t0)
        return rec
    perf = r.performance if "candidate" in r.performance else {}

    def total(which: str) -> float | None:
        d = perf.get(which) or {}
        v = d.get("_total_time")
        return float(v) if isinstance(v, int | float) else None

    summ = (perf.get("candidate") or {}).get("summary") or {}
    failing = [c.case for c in r.cases if not c.correct]
    rec.update(
        verdict=r.verdict, verdict_reason=r.verdict_reason, verdict_message=r.verdict_message[:500],
        score=round(r.score, 2),
        levels={c.id: c.level for c in r.criteria},
        summaries={c.id: c.summary for c in r.criteria},
        time_s=total("candidate"), baseline_time_s=total("baseline"), solution_time_s=total("solution"),
        percent_of_roofline=summ.get("percent_of_roofline"),
        cases=len(r.cases), failing_cases=failing[:8], seed=r.seed,
        elapsed_s=round(time.perf_counter() - t0, 3),
    )
    if entry.role == "flawed":  # the findings that must name the flaw (its criterion), and the `also` ones
        rec["feedback"] = {c.id: [feedback_text(f) for f in c.feedback if f.severity != "info"]
                           for c in r.criteria if c.id in (entry.criterion, *entry.also)}
    return rec


def feedback_text(f: Any) -> str:
    """The text of one review feedback line that evidence words are matched against."""
    return f"{f.observed} | {f.expected} | {f.suggestion}"


def names_flaw(evidence: Iterable[str], lines: Iterable[str]) -> bool:
    """Whether a feedback line names the flaw: contains one of its ``evidence`` words (case-insensitive).

    The one test of "the review said why" used by the suite's judge and tests/suite; no
    evidence words never match (a flaw that declares none cannot be shown to be named).
    """
    words = [w.lower() for w in evidence if w.strip()]
    return any(w in t.lower() for t in lines for w in words)


def load_records(path: Path) -> dict[str, dict[str, Any]]:
    """Records of a results file by key (the last line of a key wins); unreadable lines are skipped."""
    out: dict[str, dict[str, Any]] = {}
    if not path.is_file():
        return out
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut by an interrupted run
        if isinstance(rec, dict) and rec.get("v") == RECORD_VERSION and "key" in rec:
            out[rec["key"]] = rec
    return out


def run_suite(entries: Sequence[SuiteEntry], results: Path, *, workers: int = 1, seed: int = 0,
              rerun: bool = False, progress: bool = True,
              on_record: Callable[[dict[str, Any]], None] | None = None, executor: str = "local",
              ray_address: str | None = None) -> list[dict[str, Any]]:
    """Run every entry not already in ``results`` (same key and fingerprint); return all their records.

    Records are appended to ``results`` as each review finishes, so a killed run loses at most
    the reviews in flight. ``workers`` > 1 reviews in that many processes; ``executor="ray"`` runs
    one Ray task per task's entries instead, ``workers`` at a time, on the cluster at ``ray_address``
    (None: a running one this process joined, else a local instance; docs/reward.md, "Ray").
    """
    if executor not in ("local", "ray"):
        raise ValueError(f"unknown executor {executor!r}; one of local, ray")
    from tqdm import tqdm

    results.parent.mkdir(parents=True, exist_ok=True)
    done = {} if rerun else load_records(results)
    todo: list[SuiteEntry] = []
    have: dict[str, dict[str, Any]] = {}
    for e in entries:
        rec = done.get(e.key)
        if rec is not None and rec.get("fingerprint") == e.fingerprint() and rec.get("verdict") != "harness-error":
            have[e.key] = rec
        else:
            todo.append(e)
    bar = tqdm(total=len(todo), desc="suite", unit="review", disable=not progress or None, file=sys.stderr)
    with open(results, "a") as fh:
        def record(rec: dict[str, Any]) -> None:
            fh.write(json.dumps(rec, allow_nan=False, default=str) + "\n")
            fh.flush()
            have[rec["key"]] = rec
            bar.set_postfix_str(rec["key"][-40:])
            bar.update(1)
            if on_record:
                on_record(rec)

        if executor == "ray":
            _run_ray(todo, seed, workers, record, ray_address)
        elif workers <= 1:
            for e in todo:
                record(run_entry(e, seed))
        else:
            _run_parallel(todo, seed, workers, record)
    bar.close()
    return [have[e.key] for e in entries if e.key in have]


def run_entries(entries: Sequence[SuiteEntry], seed: int = 0) -> list[dict[str, Any]]:
    """Review several entries in this process, in order (one task's entries share cached evidence)."""
    return [run_entry(e, seed) for e in entries]


def _run_parallel(todo: Sequence[SuiteEntry], seed: int, workers: int,
                  record: Callable[[dict[str, Any]], None]) -> None:
    """One job per task: a task's reviews run in one worker so the pipeline's per-process cache of
    the expert's and baseline's trace evidence is reused across its candidates and targets."""
    import multiprocessing as mp

    order = _task_groups(todo)
    with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as pool:
        pending: dict[Future[list[dict[str, Any]]], list[SuiteEntry]] = {
            pool.submit(run_entries, g, seed): g for g in order}
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for f in finished:
                group = pending.pop(f)
                try:
                    recs = f.result()
                except Exception as ex:  # the worker died: record every entry of its task, keep going
                    recs = _worker_died(group, f"worker: {type(ex).__name__}: {ex}")
                for rec in recs:
                    record(rec)


def _task_groups(todo: Sequence[SuiteEntry]) -> list[list[SuiteEntry]]:
    """The entries by task, longest first (levels 3 before 1, big groups first)."""
    groups: dict[str, list[SuiteEntry]] = {}
    for e in todo:
        groups.setdefault(e.task, []).append(e)
    return sorted(groups.values(), key=lambda g: (-g[0].level, -len(g)))


def _worker_died(group: Sequence[SuiteEntry], why: str) -> list[dict[str, Any]]:
    return [{"v": RECORD_VERSION, "key": e.key, "fingerprint": e.fingerprint(), "task": e.task, "level": e.level,
             "role": e.role, "candidate": e.candidate, "target": e.target, "criterion": e.criterion, "flaw": e.flaw,
             "verdict": "harness-error", "error": why} for e in group]


def _run_ray(todo: Sequence[SuiteEntry], seed: int, workers: int, record: Callable[[dict[str, Any]], None],
             address: str | None) -> None:
    """One Ray task per task's entries (as :func:`_run_parallel`), at most ``workers`` in flight."""
    try:
        import ray
    except ImportError as e:
        raise click.UsageError("--executor ray needs Ray: pip install 'nkieval[ray]'") from e
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False)
    remote = ray.remote(num_cpus=1, max_retries=0)(run_entries)
    order = _task_groups(todo)
    pending: dict[Any, list[SuiteEntry]] = {}
    while order or pending:
        while order and len(pending) < max(1, workers):
            g = order.pop(0)
            pending[remote.remote(g, seed)] = g
        ready, _ = ray.wait(list(pending), num_returns=1)
        for ref in ready:
            group = pending.pop(ref)
            try:
                recs = ray.get(ref)
            except Exception as ex:  # the Ray worker died: record every entry of its task, keep going
                recs = _worker_died(group, f"ray worker: {type(ex).__name__}: {str(ex)[:300]}")
            for rec in recs:
                record(rec)


# ----------------------------------------------------------------------------------- judging
@dataclass
class Outcome:
    """What the suite concluded about one record: ``ok`` and, when not, why (one line)."""

    key: str
    task: str
    level: int
    role: str
    target: str
    ok: bool
    detail: str
    #: experts only: whether the stated roofline fraction is met (None: the task states none).
    roofline_ok: bool | None = None


@dataclass
class SuiteMatrix:
    """Outcomes of a suite run, by task, with the headline rates and the misses."""

    outcomes: list[Outcome] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)

    def _rate(self, role: str) -> tuple[int, int]:
        xs = [o for o in self.outcomes if o.role == role]
        return sum(o.ok for o in xs), len(xs)

    @property
    def misses(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.ok]

    @property
    def ok(self) -> bool:
        return not self.misses

    def summary(self) -> dict[str, Any]:
        ex = sum(_passes(r)[0] for r in self.records if r.get("role") == "expert")
        nex = sum(o.role == "expert" for o in self.outcomes)
        stated = [o for o in self.outcomes if o.role == "expert" and o.roofline_ok is not None]
        ba, nba = self._rate("baseline")
        fl, nfl = self._rate("flawed")
        roof = sorted(float(r["percent_of_roofline"]) for r in self.records
                      if r.get("role") == "expert" and isinstance(r.get("percent_of_roofline"), int | float))
        tasks = sorted({o.task for o in self.outcomes})
        levels: dict[int, int] = {}
        for t in tasks:
            lv = next(o.level for o in self.outcomes if o.task == t)
            levels[lv] = levels.get(lv, 0) + 1
        return {
            "tasks": len(tasks), "tasks_per_level": dict(sorted(levels.items())),
            "expert_pass": [ex, nex], "expert_roofline_met": [sum(bool(o.roofline_ok) for o in stated), len(stated)],
            "baseline_ok": [ba, nba], "flawed_caught": [fl, nfl],
            "flawed_caught_rate": fl / nfl if nfl else None,
            "expert_percent_of_roofline": _quantiles(roof),
            "review_seconds": round(sum(float(r.get("elapsed_s") or 0) for r in self.records), 1),
            "misses": [f"{o.key}: {o.detail}" for o in self.misses],
        }


def _quantiles(xs: list[float]) -> dict[str, float] | None:
    if not xs:
        return None
    def q(f: float) -> float:
        return round(xs[min(len(xs) - 1, int(f * (len(xs) - 1) + 0.5))], 1)
    return {"min": round(xs[0], 1), "p25": q(0.25), "median": q(0.5), "p75": q(0.75), "max": round(xs[-1], 1),
            "n": len(xs), "below_30": sum(x < 30 for x in xs)}


def judge(records: Iterable[dict[str, Any]]) -> SuiteMatrix:
    """Apply the suite's expectations to review records (see the module docstring)."""
    recs = list(records)
    experts = {(r["task"], r["target"]): r for r in recs if r.get("role") == "expert"}
    m = SuiteMatrix(records=recs)
    for r in recs:
        ok, detail = _judge_one(r, experts)
        roof_ok = None
        if r["role"] == "expert":
            roof_ok, why = _meets_roofline(r)
            if roof_ok is not None:
                detail += f"; {why}"
                ok = ok and roof_ok
        m.outcomes.append(Outcome(r["key"], r["task"], int(r.get("level") or 0), r["role"], r["target"], ok, detail,
                                  roofline_ok=roof_ok))
    return m


def _passes(r: dict[str, Any]) -> tuple[bool, str]:
    lv = r.get("levels") or {}
    if r.get("verdict") != "pass":
        why = r.get("error") or r.get("verdict_message") or ", ".join(f"{k}={v}" for k, v in lv.items() if v is not None and v < 4)
        fails = f"; failing cases {r['failing_cases']}" if r.get("failing_cases") else ""
        return False, f"verdict {r.get('verdict')} ({why}){fails}"
    if lv.get("correctness") != 4:
        return False, f"correctness level {lv.get('correctness')}: {(r.get('summaries') or {}).get('correctness')}"
    if lv.get("numerics") is not None and lv["numerics"] < 3:
        return False, f"numerics level {lv['numerics']}: {(r.get('summaries') or {}).get('numerics')}"
    return True, f"score {r.get('score')}"


def _meets_roofline(r: dict[str, Any]) -> tuple[bool | None, str]:
    """Whether an expert record reaches its task's stated roofline fraction (None: none stated)."""
    want = r.get("expert_roofline_fraction")
    if not isinstance(want, int | float):
        return None, ""
    roof = r.get("percent_of_roofline")
    if not isinstance(roof, int | float):
        return False, f"no roofline estimate; the task states expert_roofline_fraction {want:g}"
    if roof < 100.0 * want:
        return False, (f"{roof:.1f}% of roofline is below the stated expert_roofline_fraction {want:g} "
                       f"({100.0 * want:.0f}%)")
    return True, f"stated fraction {want:g} met"


def _judge_one(r: dict[str, Any], experts: dict[tuple[str, str], dict[str, Any]]) -> tuple[bool, str]:
    role = r["role"]
    if role == "expert":
        ok, why = _passes(r)
        if ok:
            lv = r.get("levels") or {}
            weak = [f"{k}={v}" for k, v in lv.items() if v is not None and v < 4]
            roof = r.get("percent_of_roofline")
            why = (f"score {r.get('score')}" + (f"; below 4: {', '.join(weak)}" if weak else "")
                   + (f"; {roof:.0f}% of roofline" if isinstance(roof, int | float) else ""))
        return ok, why
    if role == "baseline":
        ok, why = _passes(r)
        if not ok:
            return False, why
        b, s = r.get("time_s"), r.get("solution_time_s")
        if not isinstance(b, int | float) or not isinstance(s, int | float):
            return False, "no performance estimate for the baseline or the expert solution"
        if b <= s:
            return False, f"baseline {b * 1e6:.2f} us is not slower than the expert {s * 1e6:.2f} us"
        return True, f"expert {b / s:.2f}x faster ({s * 1e6:.2f} us vs {b * 1e6:.2f} us)"
    crit = r.get("criterion")
    lv = (r.get("levels") or {}).get(crit)
    if r.get("verdict") == "harness-error":
        return False, f"harness-error: {r.get('error')}"
    ref = 4
    ex = experts.get((r["task"], r["target"]))
    if ex is not None and isinstance((ex.get("levels") or {}).get(crit), int):
        ref = min(4, ex["levels"][crit])
    if lv is None:
        return False, f"{crit} not assessed: {(r.get('summaries') or {}).get(crit)}"
    if lv >= ref:
        return False, f"not caught: {crit} level {lv} (expert {ref}); flaw: {r.get('flaw')}"
    words = list(r.get("evidence") or [])
    if not words:
        return False, f"{crit} {lv} < {ref} but the task declares no evidence words for the flaw; flaw: {r.get('flaw')}"
    if not names_flaw(words, (r.get("feedback") or {}).get(crit) or []):
        return False, (f"{crit} {lv} < {ref} but no {crit} feedback line names the flaw (none of {words}); "
                       f"flaw: {r.get('flaw')}")
    return True, f"{crit} {lv} < {ref}: {(r.get('summaries') or {}).get(crit)}"


def format_matrix(m: SuiteMatrix) -> str:
    """One line per task: expert per target, baseline per target, flawed caught; then totals and misses."""
    by_task: dict[str, list[Outcome]] = {}
    for o in m.outcomes:
        by_task.setdefault(o.task, []).append(o)
    recs = {r["key"]: r for r in m.records}
    lines = [f"{'task':<28} {'L':>1}  {'expert':<16} {'baseline (expert speedup)':<28} {'flawed caught':<14} "
             "roofline (lowest target)"]
    for tid in sorted(by_task, key=lambda t: (by_task[t][0].level, t)):
        os_ = by_task[tid]
        lv = os_[0].level

        def cell(role: str, os_: list[Outcome] = os_) -> str:
            xs = [o for o in os_ if o.role == role]
            if not xs:
                return "-"
            parts = []
            for o in xs:
                mark = "ok" if o.ok else "MISS"
                if role == "baseline":
                    r = recs.get(o.key, {})
                    b, s = r.get("time_s"), r.get("solution_time_s")
                    sp = f"{b / s:.1f}x" if isinstance(b, int | float) and isinstance(s, int | float) and s else "?"
                    parts.append(f"{o.target}:{sp}" + ("" if o.ok else "!"))
                else:
                    if o.role == "expert" and o.roofline_ok is False and _passes(recs.get(o.key, {}))[0]:
                        mark = "ROOF"  # passes the review but misses its stated roofline fraction
                    parts.append(f"{o.target}:{mark}")
            return " ".join(parts)

        fl = [o for o in os_ if o.role == "flawed"]
        ex_recs = [recs[o.key] for o in os_ if o.role == "expert"]
        roofs = [x for x in (r.get("percent_of_roofline") for r in ex_recs) if isinstance(x, int | float)]
        stated = next((x for x in (r.get("expert_roofline_fraction") for r in ex_recs)
                       if isinstance(x, int | float)), None)
        roof = (f"{min(roofs):.0f}%" if roofs else "-") + (f" (stated {100 * stated:.0f}%)" if stated is not None
                                                           else "")
        ex_ok = all(o.ok for o in os_ if o.role == "expert")
        ex_cell = "ok" if ex_ok and any(o.role == "expert" for o in os_) else cell("expert")
        lines.append(f"{tid:<28} {lv:>1}  {ex_cell:<16} {cell('baseline'):<28} "
                     f"{sum(o.ok for o in fl)}/{len(fl):<12} {roof}")
    s = m.summary()
    lines.append("")
    lines.append(f"tasks {s['tasks']} (per level {s['tasks_per_level']}); expert pass {s['expert_pass'][0]}/"
                 f"{s['expert_pass'][1]}; expert at stated roofline fraction {s['expert_roofline_met'][0]}/"
                 f"{s['expert_roofline_met'][1]}; baseline correct and slower {s['baseline_ok'][0]}/{s['baseline_ok'][1]}; "
                 f"flawed caught {s['flawed_caught'][0]}/{s['flawed_caught'][1]}"
                 + (f" ({100 * s['flawed_caught_rate']:.1f}%)" if s["flawed_caught_rate"] is not None else ""))
    if s["expert_percent_of_roofline"]:
        q = s["expert_percent_of_roofline"]
        lines.append(f"expert % of roofline: min {q['min']} p25 {q['p25']} median {q['median']} p75 {q['p75']} "
                     f"max {q['max']} ({q['below_30']} of {q['n']} below 30%)")
    lines.append(f"review time (sum over reviews): {s['review_seconds']} s")
    if m.misses:
        lines.append("misses:")
        lines += [f"  {x}" for x in s["misses"]]
    return "\n".join(lines)


def write_dashboard(m: SuiteMatrix, path: Path) -> None:
    """The suite dashboard (``review.render.suite_html``) written to ``path``."""
    from nkieval.review.render import suite_html

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(suite_html(m))


# ----------------------------------------------------------------------------------- CLI
@click.group("suite")
def suite_group() -> None:
    """Run the built-in task suite through the review and print the expectation matrix."""


@suite_group.command("run")
@click.option("--set", "task_set", type=click.Choice(sorted(TASK_SETS)), default="builtin", show_default=True,
              help="the task set: the built-in suite, or the CUDA port acceptance set (tasks/ports)")
@click.option("--level", type=click.IntRange(1, 3), default=None, help="only tasks of this level")
@click.option("--tasks", "pattern", default=None, help="comma-separated fnmatch patterns over task ids")
@click.option("--workers", type=click.IntRange(1, 64), default=1, show_default=True,
              help="review processes (with --executor ray: Ray tasks at once)")
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="local processes, or a Ray cluster (the 'ray' extra)")
@click.option("--ray-address", default=None, help="with --executor ray: the cluster's address (default: local)")
@click.option("--results", type=click.Path(dir_okay=False), default=str(DEFAULT_RESULTS), show_default=True,
              help="JSON-lines results file (entries already in it are skipped: the run is resumable)")
@click.option("--role", "roles", multiple=True, type=click.Choice(ROLES), help="only these candidate roles")
@click.option("--default-target-only", is_flag=True, help="experts and baselines on the first target only")
@click.option("--seed", type=int, default=0, show_default=True, help="base input seed (per-entry seeds derive from it)")
@click.option("--rerun", is_flag=True, help="ignore earlier results and review everything again")
@click.option("--no-progress", is_flag=True, help="no progress bar")
@click.option("--json", "as_json", is_flag=True, help="print the summary as JSON instead of the matrix")
@click.option("--html", "html_out", type=click.Path(dir_okay=False), default=None,
              help="also write the suite dashboard (one self-contained HTML page) to this file")
def run_cmd(task_set: str, level: int | None, pattern: str | None, workers: int, executor: str, ray_address: str | None,
            results: str, roles: tuple[str, ...],
            default_target_only: bool, seed: int, rerun: bool, no_progress: bool, as_json: bool,
            html_out: str | None) -> None:
    """Review every expert, baseline and flawed candidate; exit 1 if any expectation is missed."""
    broken: list[str] = []
    root = None if task_set == "builtin" else TASK_SETS[task_set]
    entries = plan(level, pattern, roles=roles or ROLES, all_targets=not default_target_only, root=root, errors=broken)
    for b in broken:
        click.echo(f"invalid task (not run): {b}", err=True)
    if not entries:
        click.echo("no tasks match", err=True)
        sys.exit(2)
    t0 = time.perf_counter()
    recs = run_suite(entries, Path(results), workers=workers, seed=seed, rerun=rerun, progress=not no_progress,
                     executor=executor, ray_address=ray_address)
    m = judge(recs)
    if html_out:
        write_dashboard(m, Path(html_out))
    if as_json:
        click.echo(json.dumps(m.summary(), indent=2))
    else:
        click.echo(format_matrix(m))
        click.echo(f"wall time {time.perf_counter() - t0:.1f} s with {workers} worker(s) ({executor}); "
                   f"results in {results}")
    sys.exit(0 if m.ok and not broken else 1)


@suite_group.command("report")
@click.option("--results", type=click.Path(dir_okay=False, exists=True), default=str(DEFAULT_RESULTS),
              show_default=True)
@click.option("--json", "as_json", is_flag=True)
@click.option("--html", "html_out", type=click.Path(dir_okay=False), default=None,
              help="also write the suite dashboard (one self-contained HTML page) to this file")
def report_cmd(results: str, as_json: bool, html_out: str | None) -> None:
    """Reprint the matrix of an earlier run from its results file."""
    m = judge(load_records(Path(results)).values())
    if html_out:
        write_dashboard(m, Path(html_out))
    click.echo(json.dumps(m.summary(), indent=2) if as_json else format_matrix(m))


__all__ = ["ROLES", "SuiteEntry", "SuiteMatrix", "feedback_text", "format_matrix", "judge", "load_records",
           "names_flaw", "plan", "run_entries", "run_entry", "run_suite", "suite_group", "write_dashboard"]
