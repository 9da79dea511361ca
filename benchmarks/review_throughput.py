"""Reviews per minute over the built-in tasks, and the pipeline's own overhead share.

Overhead = everything but simulation (sandbox start, input generation, reference, numerics,
trace transfer and evidence, scoring) as a share of each review's wall time. The first review
also pays for the sandbox zygote's start; it is reported separately.

    .venv/bin/python benchmarks/review_throughput.py [--tasks vector_add,...] [--repeat 2]
"""

from __future__ import annotations

import argparse
import time

from nkieval.review import review
from nkieval.tasks import builtin_tasks


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", default="")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    want = set(filter(None, args.tasks.split(",")))
    tasks = [t for t in builtin_tasks() if not want or t.id in want]
    t0 = time.perf_counter()
    warm = review(tasks[0], tasks[0].solution_file, seed=0)
    print(f"warm-up (zygote start + first review): {time.perf_counter() - t0:.2f} s ({warm.task})")
    rows = []
    stages: dict[str, float] = {}
    t_all = time.perf_counter()
    for _ in range(args.repeat):
        for t in tasks:
            for f in [t.solution_file, t.baseline_file, *[t.directory / fl.file for fl in t.flawed]]:
                if f is None:
                    continue
                r = review(t, f, seed=1)
                tot, sim = r.timings["total_s"], r.timings["simulation_s"]
                rows.append((t.id, f.name, r.verdict, tot, sim))
                for k, v in r.timings.items():
                    stages[k] = stages.get(k, 0.0) + v
                print(f"{t.id:<16} {f.name:<22} {r.verdict:<15} {tot:6.2f} s  simulation {sim:6.2f} s  "
                      f"overhead {1 - sim / tot:5.1%}")
    wall = time.perf_counter() - t_all
    tot = sum(r[3] for r in rows)
    sim = sum(r[4] for r in rows)
    print(f"\n{len(rows)} reviews in {wall:.1f} s = {60 * len(rows) / wall:.1f} reviews/minute")
    print(f"pipeline overhead (everything but simulation): {1 - sim / tot:.1%} of review time (target <= 20%)")
    print("where the time goes (sums over reviews; judging overlaps the sandbox run):")
    for k, v in sorted(stages.items(), key=lambda kv: -kv[1]):
        print(f"  {k:<26} {v:8.2f} s  {v / tot:6.1%}")


if __name__ == "__main__":
    main()
