"""Reviews per minute over the built-in tasks, and the pipeline's own overhead share, cold and warm.

Definitions (the same as docs/review.md, "Overhead measurement"):

* **simulation** (``simulation_s``): the sandboxed child's time inside ``run_kernel``, from
  the case's inputs loaded to the outputs returned, summed over the review's cases. Nothing
  else counts as simulation: not the child's start, not reading its inputs, not checking,
  masking and writing its outputs or the trace (those are ``child_setup_s``, ``child_load_s``
  and ``child_post_s``, and they are overhead).
* **overhead**: everything else, as a share of each review's wall time (``total_s``):
  ``1 - simulation / total``, summed over reviews. It includes the sandbox (job directory,
  input files, fork, collecting results), the child's own work around ``run_kernel``, input
  generation, reference outputs, correctness, numerics, diagnosis, evidence, performance
  estimate, static analysis and scoring.

Judging, diagnosis, evidence parsing and static analysis run in a harness worker thread while
the sandboxed child simulates, so the wall-time share hides work that overlaps; the harness
CPU time per review (this process, all threads) is printed next to it, since an RL loop
running one review per core pays that CPU in full.

* cold: the first candidate of a task, nothing cached: the case cache (inputs, reference
  outputs, the numerics oracle and bounds), the task's reference code and the baseline's and
  expert solution's trace evidence are cleared before it, so it pays for all of them;
* warm: every later candidate of the task with the same seed, the steady state of an RL loop
  that reviews many candidates of one task (``review(..., seed=S)`` caches per case).

``--repeat 1`` reviews each candidate once: its warm reviews are distinct candidates, the figure
to quote for an RL loop. With ``--repeat 2`` the second round meets outputs already judged, whose
verdicts the numerics keep (``PreparedCheck`` keeps the last few per case, keyed by the output's
bytes), so it measures repeated candidates.

A review with ``seed=None`` (a fresh secret seed each time) is always cold. The first review
of the run also pays for the sandbox zygote's start; it is a warm-up, reported separately.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/review_throughput.py [--tasks a,b] [--repeat 2]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from nkieval.review import review
from nkieval.review.cache import CASE_CACHE
from nkieval.review.stages import clear_caches, mutation_causes
from nkieval.tasks import builtin_tasks

# "where the time goes": the review's wall time, split into what happens one after the other
# (the critical path), then the worker thread's items, which overlap the child
_PATH = [
    ("before the sandbox", ["inputs_s", "setup_s"]),
    ("sandbox, harness side", ["sandbox_trace_s", "sandbox_prepare_s", "sandbox_fork_s", "sandbox_collect_s",
                               "sandbox_exit_s", "sandbox_cleanup_s"]),
    ("sandboxed child", ["child_setup_s", "child_load_s", "simulation_s", "child_post_s"]),
    ("after the child", ["reference_kernels_s", "worker_wait_s", "judge_after_sandbox_s", "differential_s",
                         "scoring_s"]),
]
#: (``sandbox_trace_s`` is the executor's wait for programs; the tracer's own time, most of it overlapping the
#: executor, is ``sandbox_trace_total_s``)
_WORKER = ["analysis_s", "prefetch_s", "numerics_s", "diagnosis_s", "reference_and_compare_s", "trace_parse_s",
           "sandbox_trace_total_s"]


def _summary(name: str, rows: list[tuple], wall: float) -> None:
    if not rows:
        return
    tot = sum(r[3] for r in rows)
    sim = sum(r[4] for r in rows)
    cpu = sum(r[5] for r in rows)
    n = len(rows)
    print(f"{name:<5} {n:4d} reviews  {60 * n / wall:7.1f} reviews/minute  overhead {1 - sim / tot:6.1%}  "
          f"mean review {tot / n:6.3f} s  simulation {sim / n:6.3f} s  harness CPU {cpu / n:6.3f} s "
          f"({cpu / sim:5.2f}x simulation)")


def _stages(kind: str, st: dict[str, float], n: int) -> None:
    tot = st.get("total_s", 0.0)
    if not tot:
        return
    print(f"where the time goes, {kind} ({n} reviews; sums, and share of the reviews' wall time):")
    print(f"  {'total_s':<26} {tot:8.3f} s  {1:6.1%}")
    path = 0.0
    for group, keys in _PATH:
        g = sum(st.get(k, 0.0) for k in keys)
        path += g
        print(f"  {group}: {g:.3f} s ({g / tot:.1%})")
        for k in keys:
            v = st.get(k, 0.0)
            print(f"    {k:<24} {v:8.3f} s  {v / tot:6.1%}")
    rest = tot - path
    print(f"  the rest (sandbox wait loop and wake-ups, thread hand-offs; collecting overlaps the child's next case, "
          f"so this can be below zero): {rest:.3f} s ({rest / tot:.1%})")
    print("  harness worker (overlaps the child; wall time in the worker and, after the child, the main thread):")
    for k in _WORKER:
        v = st.get(k, 0.0)
        print(f"    {k:<24} {v:8.3f} s  {v / tot:6.1%}")


def _run(tasks: list, repeat: int, modes: tuple[bool, ...], verbose: bool = True
         ) -> dict[bool, tuple[list[tuple], dict, dict]]:
    """Review every candidate; with two modes (trusted, untrusted) each candidate is reviewed in both, one right
    after the other, so the machine's load falls on both alike."""
    out: dict[bool, tuple[list[tuple], dict, dict]] = {
        m: ([], {"cold": 0.0, "warm": 0.0}, {"cold": {}, "warm": {}}) for m in modes}
    for t in tasks:
        files: list[Path] = [f for f in [t.solution_file, t.baseline_file, *[t.directory / fl.file for fl in t.flawed]]
                             if f is not None]
        first = dict.fromkeys(modes, True)
        for _ in range(repeat):
            for f in files:
                # the judge's cause search keeps mutated CUDA kernels' runs across reviews (candidate-independent
                # work): each mode's review of this candidate starts from the same kept runs, so neither pays
                # for the other's search
                kept = dict(mutation_causes._MUTANT_RUNS)
                for trusted in modes:
                    mutation_causes._MUTANT_RUNS.clear()
                    mutation_causes._MUTANT_RUNS.update(kept)
                    rows, walls, stages = out[trusted]
                    kind = "cold" if first[trusted] else "warm"
                    if first[trusted]:
                        clear_caches()
                    first[trusted] = False
                    c0, w0 = time.process_time(), time.perf_counter()
                    r = review(t, f, seed=1, trusted=trusted)
                    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
                    walls[kind] += wall
                    tm = r.timings
                    tot, sim = tm["total_s"], tm["simulation_s"]
                    rows.append((kind, t.id, f.name, tot, sim, cpu, r.verdict))
                    for k, v in tm.items():
                        stages[kind][k] = stages[kind].get(k, 0.0) + v
                    child = tm.get("child_setup_s", 0.0) + tm.get("child_load_s", 0.0) + tm.get("child_post_s", 0.0)
                    if verbose and trusted:
                        print(f"{kind} {t.id:<16} {f.name:<24} {r.verdict:<10} {tot:6.3f} s  simulation {sim:6.3f} s "
                              f" overhead {1 - sim / tot:6.1%}  harness CPU {cpu:6.3f} s  child around sim "
                              f"{child:6.3f} s  trace wait {tm.get('sandbox_trace_s', 0.0):6.3f} s (tracer "
                              f"{tm.get('sandbox_trace_total_s', 0.0):6.3f} s)  "
                              f"tail {tm.get('worker_wait_s', 0.0):6.3f} s")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", default="")
    ap.add_argument("--repeat", type=int, default=1, help="rounds over each task's candidates (all but the first "
                    "review of a task are warm)")
    ap.add_argument("--compare-untrusted", action="store_true",
                    help="also run the pipeline before trace-then-execute (review(..., trusted=False)) in the same "
                         "run and print the throughput ratio")
    args = ap.parse_args()
    want = set(filter(None, args.tasks.split(",")))
    tasks = [t for t in builtin_tasks() if not want or t.id in want]
    t0 = time.perf_counter()
    warm = review(tasks[0], tasks[0].solution_file, seed=12345)
    review(tasks[0], tasks[0].solution_file, seed=12345, trusted=False)
    print(f"warm-up (zygote and sandbox start + first reviews): {time.perf_counter() - t0:.2f} s ({warm.task})")
    modes = (True, False) if args.compare_untrusted else (True,)
    res = _run(tasks, args.repeat, modes)
    rows, walls, stages = res[True]
    print()
    _summary("cold", [r for r in rows if r[0] == "cold"], walls["cold"])
    _summary("warm", [r for r in rows if r[0] == "warm"], walls["warm"])
    _summary("all", rows, walls["cold"] + walls["warm"])
    print("(target: overhead <= 20% of review time)")
    for kind in ("cold", "warm"):
        _stages(kind, stages[kind], sum(1 for r in rows if r[0] == kind))
    print(f"case cache: {CASE_CACHE.stats()}")
    if args.compare_untrusted:
        old_rows, old_walls, _ = res[False]
        print()
        _summary("before", old_rows, old_walls["cold"] + old_walls["warm"])
        for kind in ("cold", "warm", "all"):
            new_w = walls["cold"] + walls["warm"] if kind == "all" else walls[kind]
            old_w = old_walls["cold"] + old_walls["warm"] if kind == "all" else old_walls[kind]
            if new_w and old_w:
                print(f"throughput ratio {kind}: trace-then-execute / before = {old_w / new_w:.2f}x "
                      f"(reviews per minute; {new_w:.1f} s vs {old_w:.1f} s)")
        same = sum(1 for a, b in zip(rows, old_rows) if a[6] == b[6])
        print(f"verdicts equal in both pipelines: {same} of {len(rows)}")


if __name__ == "__main__":
    main()
