"""Scaling of ``score_many`` from 1 to 2 workers, on review processes (``local``) and on a local Ray instance.

The workload is every candidate (expert, baseline, flawed) of a few small built-in tasks, wrapped as model
responses; each round uses one fresh seed for every item (an RL step: one seed per step, so candidates of a
task share their cases' inputs and references inside a worker). Before the timed rounds, one round at the
largest worker count warms every worker (zygote, tracer pool, imports). Efficiency = (T1 / Tn) / n for the
same round of work: 100 % is linear.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/reward_scaling.py [--tasks vector_add,row_softmax]
        [--executors local,ray] [--rounds 2]

On a machine shared with other work the figure is a lower bound: the two workers compete with it for cores.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any


def workload(tasks: list[str], seed: int) -> list[Any]:
    from nkieval.reward import ScoreItem
    from nkieval.tasks import load_task

    items = []
    for tid in tasks:
        t = load_task(tid)
        files = [f for f in (t.solution_file, t.baseline_file) if f] + [t.directory / fl.file for fl in t.flawed]
        items += [ScoreItem(tid, f"```python\n{f.read_text()}```", seed) for f in files]
    return items


def run_local(items: list[Any], pool: Any) -> tuple[float, list[dict[str, Any]]]:
    from nkieval.reward.batch import plan_jobs

    _, jobs, _ = plan_jobs(items, seed=None, target=None, full_report=False, shaping="tiered")
    t0 = time.perf_counter()
    out = [f.result() for f in [pool.submit(j) for j in jobs]]
    return time.perf_counter() - t0, out


def run_ray(items: list[Any], workers: int) -> tuple[float, list[dict[str, Any]]]:
    from nkieval.reward.batch import plan_jobs
    from nkieval.reward.ray_executor import run_jobs

    _, jobs, _ = plan_jobs(items, seed=None, target=None, full_report=False, shaping="tiered")
    t0 = time.perf_counter()
    out = run_jobs(jobs, workers=workers)
    return time.perf_counter() - t0, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", default="vector_add,row_softmax,rmsnorm")
    ap.add_argument("--executors", default="local,ray")
    ap.add_argument("--rounds", type=int, default=2, help="timed rounds per worker count (median reported)")
    ap.add_argument("--max-workers", type=int, default=2)
    args = ap.parse_args()
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    ns = list(range(1, args.max_workers + 1))
    print(f"cpus {os.cpu_count()}; tasks {tasks}; {len(workload(tasks, 0))} reviews per round")
    for ex in [e.strip() for e in args.executors.split(",") if e.strip()]:
        times: dict[int, float] = {}
        seed = 1000
        if ex == "local":
            from nkieval.reward.workers import WorkerPool

            for n in ns:
                with WorkerPool(n) as pool:
                    run_local(workload(tasks, seed), pool)  # warm every worker
                    seed += 1
                    ts = []
                    for _ in range(args.rounds):
                        dt, out = run_local(workload(tasks, seed), pool)
                        seed += 1
                        bad = [o for o in out if o.get("status") != "scored"]
                        assert not bad, bad[:2]
                        ts.append(dt)
                    times[n] = statistics.median(ts)
        else:
            import ray

            ray.init(num_cpus=max(ns), include_dashboard=False, log_to_driver=False, configure_logging=False)
            run_ray(workload(tasks, seed), max(ns))  # warm (starts the workers)
            seed += 1
            for n in ns:
                ts = []
                for _ in range(args.rounds):
                    dt, out = run_ray(workload(tasks, seed), n)
                    seed += 1
                    bad = [o for o in out if o.get("status") != "scored"]
                    assert not bad, bad[:2]
                    ts.append(dt)
                times[n] = statistics.median(ts)
            ray.shutdown()
        for n in ns:
            eff = times[1] / times[n] / n
            print(f"{ex:<6} workers {n}: {times[n]:7.2f} s per round (median of {args.rounds}); "
                  f"speed-up {times[1] / times[n]:.2f}x; efficiency {100 * eff:.0f}%")


if __name__ == "__main__":
    main()
