"""Reviews per minute over the built-in tasks, and the pipeline's own overhead share, cold and warm.

Overhead = everything but simulation (sandbox start and transfer, input generation, reference,
numerics, evidence, static analysis, scoring) as a share of each review's wall time. Judging and
static analysis run in harness threads while the sandboxed child simulates, so the wall-time
share hides work that overlaps; the harness CPU time per review (this process, all threads) is
printed next to it, since an RL loop running one review per core pays that CPU in full.

* cold: the first candidate of a task, nothing cached: the case cache (inputs, reference
  outputs, the numerics oracle and bounds) and the baseline's and expert solution's trace
  evidence are cleared before it, so it pays for all of them;
* warm: every later candidate of the task with the same seed, the steady state of an RL loop
  that reviews many candidates of one task (``review(..., seed=S)`` caches per case).

A review with ``seed=None`` (a fresh secret seed each time) is always cold. The first review
of the run also pays for the sandbox zygote's start; it is a warm-up, reported separately.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/review_throughput.py [--tasks a,b] [--repeat 2]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from nkieval.review import pipeline as _pipeline
from nkieval.review import review
from nkieval.review.cache import CASE_CACHE
from nkieval.tasks import builtin_tasks


def _clear_caches() -> None:
    CASE_CACHE.clear()
    with _pipeline._REF_LOCK:
        _pipeline._REF_CACHE.clear()


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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", default="")
    ap.add_argument("--repeat", type=int, default=1, help="rounds over each task's candidates (all but the first "
                    "review of a task are warm)")
    args = ap.parse_args()
    want = set(filter(None, args.tasks.split(",")))
    tasks = [t for t in builtin_tasks() if not want or t.id in want]
    t0 = time.perf_counter()
    warm = review(tasks[0], tasks[0].solution_file, seed=12345)
    print(f"warm-up (zygote start + first review): {time.perf_counter() - t0:.2f} s ({warm.task})")
    rows: list[tuple] = []
    walls = {"cold": 0.0, "warm": 0.0}
    stages: dict[str, dict[str, float]] = {"cold": {}, "warm": {}}
    for t in tasks:
        files: list[Path] = [f for f in [t.solution_file, t.baseline_file, *[t.directory / fl.file for fl in t.flawed]]
                             if f is not None]
        _clear_caches()
        first = True
        for _ in range(args.repeat):
            for f in files:
                kind = "cold" if first else "warm"
                first = False
                c0, w0 = time.process_time(), time.perf_counter()
                r = review(t, f, seed=1)
                cpu, wall = time.process_time() - c0, time.perf_counter() - w0
                walls[kind] += wall
                tot, sim = r.timings["total_s"], r.timings["simulation_s"]
                rows.append((kind, t.id, f.name, tot, sim, cpu, r.verdict))
                for k, v in r.timings.items():
                    stages[kind][k] = stages[kind].get(k, 0.0) + v
                print(f"{kind} {t.id:<16} {f.name:<24} {r.verdict:<10} {tot:6.3f} s  simulation {sim:6.3f} s  "
                      f"overhead {1 - sim / tot:6.1%}  harness CPU {cpu:6.3f} s")
    print()
    _summary("cold", [r for r in rows if r[0] == "cold"], walls["cold"])
    _summary("warm", [r for r in rows if r[0] == "warm"], walls["warm"])
    _summary("all", rows, walls["cold"] + walls["warm"])
    print("(target: overhead <= 20% of review time)")
    for kind in ("cold", "warm"):
        tot = stages[kind].get("total_s", 0.0)
        if not tot:
            continue
        print(f"where the time goes, {kind} (sums over reviews; judging and analysis overlap the sandbox run):")
        for k, v in sorted(stages[kind].items(), key=lambda kv: -kv[1]):
            print(f"  {k:<26} {v:8.3f} s  {v / tot:6.1%}")
    print(f"case cache: {CASE_CACHE.stats()}")


if __name__ == "__main__":
    main()
