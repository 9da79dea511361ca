"""Scaling of ``score_many`` from 1 to 2 workers, on review processes (``local``) and on a local Ray instance.

The workload is every candidate (expert, baseline, flawed) of a few small built-in tasks, wrapped as model
responses; each round uses one fresh seed for every item (an RL step: one seed per step, so candidates of a
task share their cases' inputs and references inside a worker). Before the timed rounds, one round at the
largest worker count warms every worker (zygote, tracer pool, imports). Efficiency = (T1 / Tn) / n for the
same round of work: 100 % is linear.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/reward_scaling.py [--tasks vector_add,row_softmax]
        [--executors local,ray] [--rounds 2] [--brief]

On a machine shared with other work the figure is a lower bound: the two workers compete with it for cores.
So each round also prints CPU-normalised figures: the CPU time (user + system) of this process and every process
under it (the review workers, their sandbox zygotes, tracers and executor children; Ray's processes), read from
/proc before and after the round. Per review, that CPU is the work itself: a second worker that only waits for a
core busy with someone else's job adds wall time, not CPU, while contention between the two workers (shared
caches, memory bandwidth, a core's two hyper-threads) shows as CPU growth per review. "cores busy" is that CPU
over the round's wall time (how many cores the reviews actually had), and "CPU-normalised efficiency" is
(CPU per review with 1 worker) / (CPU per review with n workers): the efficiency the round would reach if the n
workers had n free cores to themselves. On an idle machine with at least n cores (load average near 0; see
docs/reward.md, "Measuring scaling") the wall-time efficiency is the figure to quote.

``--pin`` gives each review worker one core of its own: after the warm-up round, worker i's whole process tree
(every thread of the worker, its sandbox zygote, tracers and replay worker; what they start later inherits it)
is bound to core i. A review keeps more than one core busy at times (the sandboxed tracer, the judge's replays
and its executor overlap), so unpinned, one worker alone already takes about 1.5 cores of an idle 2-core
machine and the 1 -> 2 figure there measures the machine's spare core, not the workers. Pinned, "n workers on
n cores" is the figure: the scaling of the workers themselves, what a cluster node with a core per worker gets.
With Ray the workers are the review actors (``nkieval.reward.ray_executor``; n of them for the n-worker rounds,
each warmed by its own round first): actor i's process tree is bound to core i (Ray's own services, its raylet
and object store, stay unbound).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

from nkieval.tasks.audit.clock import tree_cpu_s


def workload(tasks: list[str], seed: int) -> list[Any]:
    from nkieval.reward import ScoreItem
    from nkieval.tasks import load_task

    items = []
    for tid in tasks:
        t = load_task(tid)
        files = [f for f in (t.solution_file, t.baseline_file) if f] + [t.directory / fl.file for fl in t.flawed]
        # (a line naming the round makes every round's candidates new sources, as an RL step's fresh samples are:
        # the programs a worker's reviews keep per source, ``review.cache.TRACES``, would otherwise spare the
        # single worker every trace after the warm-up and two workers, which take jobs from one queue, about
        # half of theirs, and the figure would measure that hit rate instead of the workers)
        items += [ScoreItem(tid, f"```python\n{f.read_text()}\n# round {seed}\n```", seed) for f in files]
    return items


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as fh:
                    kids.setdefault(int(fh.read().rsplit(")", 1)[1].split()[1]), []).append(int(d))
            except OSError:  # gone meanwhile
                continue
    return kids


def _tree(kids: dict[int, list[int]], root: int) -> list[int]:
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo += kids.get(pid, [])
    return tree


def _local_workers(kids: dict[int, list[int]]) -> list[int]:
    """This process's ``multiprocessing`` children that are review workers."""
    workers = []
    for pid in sorted(kids.get(os.getpid(), [])):
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            if b"spawn_main" in fh.read():
                workers.append(pid)
    return workers


def _bind(tree: list[int], core: int) -> None:
    for pid in tree:
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                os.sched_setaffinity(int(tid), {core})
        except OSError:  # gone meanwhile
            continue


def pin_workers(n: int, workers: list[int] | None = None) -> list[list[int]]:
    """Bind the process tree of each review worker, every thread, to one of ``n`` cores (worker i to core i mod
    n); returns the pids bound per worker. ``workers``: the review actors' processes (``ActorSlot.pid``); by
    default this process's ``n`` local workers."""
    kids = _children()
    local = workers is None
    workers = _local_workers(kids) if workers is None else workers
    if len(workers) < n or (local and len(workers) != n):
        raise SystemExit(f"--pin: expected {n} review workers, found {len(workers)}")
    bound = []
    for i, root in enumerate(workers):
        tree = _tree(kids, root)
        _bind(tree, i % n)
        bound.append(tree)
    return bound


def timed_round(run: Any) -> tuple[float, float, Any]:
    """(wall seconds, CPU seconds of this process tree, the round's result) of ``run()``."""
    c0, t0 = tree_cpu_s(), time.perf_counter()
    out = run()
    return time.perf_counter() - t0, tree_cpu_s() - c0, out


#: ``--brief``: the jobs ask for no feedback (brief reviews, as verl's compute_score and TRL's reward do)
FEEDBACK = [True]


def run_local(items: list[Any], pool: Any) -> tuple[float, list[dict[str, Any]]]:
    from nkieval.reward.batch import plan_jobs

    _, jobs, _ = plan_jobs(items, seed=None, target=None, full_report=False, shaping="tiered",
                           feedback=FEEDBACK[0])
    t0 = time.perf_counter()
    out = [f.result() for f in [pool.submit(j) for j in jobs]]
    return time.perf_counter() - t0, out


def run_ray(items: list[Any], workers: int) -> tuple[float, list[dict[str, Any]]]:
    from nkieval.reward.batch import plan_jobs
    from nkieval.reward.ray_executor import run_jobs

    _, jobs, _ = plan_jobs(items, seed=None, target=None, full_report=False, shaping="tiered",
                           feedback=FEEDBACK[0])
    t0 = time.perf_counter()
    out = run_jobs(jobs, workers=workers)
    return time.perf_counter() - t0, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", default="vector_add,row_softmax,rmsnorm")
    ap.add_argument("--executors", default="local,ray")
    ap.add_argument("--rounds", type=int, default=2, help="timed rounds per worker count (median reported)")
    ap.add_argument("--max-workers", type=int, default=2)
    ap.add_argument("--pin", action="store_true", help="give each review worker its own core (see above)")
    ap.add_argument("--brief", action="store_true", help="brief reviews (score_many(..., feedback=False)), what the "
                    "verl and TRL adapters run")
    args = ap.parse_args()
    FEEDBACK[0] = not args.brief
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    ns = list(range(1, args.max_workers + 1))
    print(f"cpus {os.cpu_count()}; tasks {tasks}; {len(workload(tasks, 0))} reviews per round; load average at the "
          f"start {os.getloadavg()[0]:.1f} (near 0 on an idle machine)")
    for ex in [e.strip() for e in args.executors.split(",") if e.strip()]:
        times: dict[int, float] = {}
        cpus: dict[int, float] = {}  # CPU seconds per review (median over rounds)
        seed = 1000
        if ex == "local":
            from nkieval.reward.workers import WorkerPool

            for n in ns:
                with WorkerPool(n) as pool:
                    run_local(workload(tasks, seed), pool)  # warm every worker
                    seed += 1
                    if args.pin:
                        trees = pin_workers(n)
                        print(f"local  workers {n}: pinned, worker i's process tree to core i "
                              f"({', '.join(str(len(t)) for t in trees)} processes)")
                    ts, cs = [], []
                    for _ in range(args.rounds):
                        items = workload(tasks, seed)
                        dt, cpu, (_, out) = timed_round(lambda items=items: run_local(items, pool))
                        seed += 1
                        bad = [o for o in out if o.get("status") != "scored"]
                        assert not bad, bad[:2]
                        ts.append(dt)
                        cs.append(cpu / len(items))
                    times[n] = statistics.median(ts)
                    cpus[n] = statistics.median(cs)
        else:
            import ray

            ray.init(num_cpus=max(ns), include_dashboard=False, log_to_driver=False, configure_logging=False)
            for n in ns:
                run_ray(workload(tasks, seed), n)  # warm (starts this count's review actors)
                seed += 1
                if args.pin:
                    from nkieval.reward.ray_executor import ray_pool

                    trees = pin_workers(n, [s.pid for s in ray_pool(n).slots if s is not None and s.pid])
                    print(f"ray    workers {n}: pinned, actor i's process tree to core i "
                          f"({', '.join(str(len(t)) for t in trees)} processes)")
                ts, cs = [], []
                for _ in range(args.rounds):
                    items = workload(tasks, seed)
                    dt, cpu, (_, out) = timed_round(lambda items=items, n=n: run_ray(items, n))
                    seed += 1
                    bad = [o for o in out if o.get("status") != "scored"]
                    assert not bad, bad[:2]
                    ts.append(dt)
                    cs.append(cpu / len(items))
                times[n] = statistics.median(ts)
                cpus[n] = statistics.median(cs)
            from nkieval.reward.batch import close_pools

            close_pools()
            ray.shutdown()
        per_round = len(workload(tasks, 0))
        for n in ns:
            eff = times[1] / times[n] / n
            print(f"{ex:<6} workers {n}: {times[n]:7.2f} s per round (median of {args.rounds}); "
                  f"speed-up {times[1] / times[n]:.2f}x; efficiency {100 * eff:.0f}%")
            print(f"{'':<6}   CPU per review {cpus[n]:6.3f} s ({cpus[n] / cpus[1]:.2f}x the 1-worker figure); cores busy "
                  f"{cpus[n] * per_round / times[n]:.2f}; CPU-normalised efficiency {100 * cpus[1] / cpus[n]:.0f}%; "
                  f"load average now {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
