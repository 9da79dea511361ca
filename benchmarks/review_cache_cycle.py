"""Warm reviews of several tasks met in turn, as a reward worker meets them, with the case cache at its bound.

An RL step scores candidates of many tasks with one seed, and a reward worker (``score_many``'s review processes,
the service's) keeps each task's cases in its case cache (``nkieval.review.cache``: inputs, reference outputs, the
CUDA kernel's outputs, the prepared numerics checks) for the next candidate of the task. When the tasks a worker
meets need more than the cache's bound, what it evicts is paid for again. This benchmark reviews every candidate
asked for of each task in turn (task A's, task B's, ..., then A's again), ``--rounds`` times, in a fresh process per
mode, and prints the CPU of a warm round (every round after the first; the process tree's CPU: the judge, its
sandbox zygote, tracers and replay worker) and its wall time, per review, with the cache's evictions and dropped
prepared checks and the process's peak RSS:

* ``this`` — this checkout at the cache's bound (``--cache-mb``, default the cache's own default);
* ``base`` — the checkout in ``--baseline-src`` (its ``src`` folder) at the same bound, when given;
* ``unbounded`` — this checkout with a bound that holds everything: the floor a bigger bound could reach.

Every mode reviews the same candidates with the same seed, and each review's report (timings and simulation times
left out) must be the same in every mode: the run says so or names the first that differs.

``--workers N`` scores the same candidates as one ``score_many`` batch per round instead (``N`` review processes;
the items grouped by task, as an RL trainer's batch repeats each prompt's samples; CPU of the whole process tree,
the workers included), which is where the pool's hand-out of jobs to workers shows (``nkieval.reward.affinity``);
``--fresh-seed`` gives every round its own seed (an RL step that draws new inputs: every task's cases start cold
in every round, and what counts is how many workers meet each task). The batch mode compares each item's status,
reward, verdict, score and levels across modes. ``--samples K`` makes each candidate K items of its own (its source
with a distinct trailing comment, so none is merged), as an RL step's K samples of one prompt; ``--executor ray``
scores the batches on a local Ray instance of ``N`` CPUs (``score_many(..., executor="ray")``; the CPU of the
process tree then includes Ray's own processes).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/review_cache_cycle.py \\
        [--tasks layernorm,rmsnorm,row_softmax,gemm_bf16] [--candidates solution] [--rounds 4] \\
        [--cache-mb MB] [--baseline-src OLD/src] [--brief] [--repeat 1]
        [--workers N [--fresh-seed] [--samples K] [--executor local|ray]]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TASKS = "layernorm,rmsnorm,row_softmax,gemm_bf16"


def child(args: argparse.Namespace) -> None:
    """One mode's run (in its own process): a JSON line per round, then the report hashes and peak RSS."""
    import resource
    import time

    from nkieval.review.cache import CASE_CACHE
    from nkieval.review.pipeline import review
    from nkieval.tasks.audit.clock import tree_cpu_s
    from nkieval.tasks.loader import builtin_tasks, candidate_files
    from review_throughput import report_outcome  # (the throughput benchmark's: the report less its timings)

    by_id = {t.id: t for t in builtin_tasks()}
    jobs = [(by_id[t], label, path) for t in args.tasks.split(",") for label, path in candidate_files(by_id[t]).items()
            if args.candidates == "all" or label in args.candidates.split(",")]
    hashes: dict[str, str] = {}

    def keep(name: str, what: Any) -> None:
        h = hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()
        if hashes.setdefault(name, h) != h:
            hashes[name] = "varies between rounds"

    if args.executor == "ray":  # (started before the first round is timed, as a trainer's cluster is up before it)
        import ray

        ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False, configure_logging=False)
    for r in range(args.rounds):
        c0, w0 = tree_cpu_s(), time.perf_counter()
        seed = args.seed + r if args.fresh_seed else args.seed
        if args.workers:
            from nkieval.reward import ScoreItem, score_many

            samples = [(task, f"{label}/{k}", path.read_text() + f"\n# sample {k}\n")
                       for task, label, path in jobs for k in range(args.samples)]
            items = [ScoreItem(task.id, src, seed, extract=False) for task, _, src in samples]
            for (task, label, _), res in zip(samples, score_many(items, workers=args.workers, executor=args.executor,
                                                                 feedback=not args.brief)):
                keep(f"{task.id}/{label}/{r if args.fresh_seed else 0}",
                     [res.status, res.reward, res.verdict, res.score, res.levels])
        for task, label, path in ([] if args.workers else jobs):
            keep(f"{task.id}/{label}/{r if args.fresh_seed else 0}",
                 report_outcome(review(task, path, seed=seed, brief=args.brief)))
        s = CASE_CACHE.stats()
        n = len(jobs) * (args.samples if args.workers else 1)
        print(json.dumps({"round": r, "cpu": tree_cpu_s() - c0, "wall": time.perf_counter() - w0, "n": n,
                          "evictions": s["evictions"], "shed": s.get("prepared_shed", 0)}), flush=True)
    print(json.dumps({"hashes": hashes, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10}))


def run_mode(args: argparse.Namespace, src: Path, cache_mb: float | None) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", "--tasks", args.tasks, "--candidates", args.candidates,
           "--rounds", str(args.rounds), "--seed", str(args.seed), "--workers", str(args.workers),
           "--samples", str(args.samples), "--executor", args.executor]
    cmd += [f"--{k.replace('_', '-')}" for k in ("brief", "fresh_seed") if getattr(args, k)]
    env = dict(os.environ, PYTHONPATH=str(src))
    if cache_mb is not None:  # (the review workers read it too)
        env["NKIEVAL_REVIEW_CACHE_MB"] = str(cache_mb)
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if out.returncode:
        raise SystemExit(f"mode with {src} failed:\n{out.stderr[-3000:]}")
    lines = [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")]
    rounds = [x for x in lines if "round" in x]
    return {"rounds": rounds, **lines[-1]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", default=DEFAULT_TASKS)
    ap.add_argument("--candidates", default="solution", help="comma-separated labels (solution, baseline, "
                    "flawed:<name>) reviewed per task, or all")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--cache-mb", type=float, default=None, help="the case cache's bound (default: the cache's)")
    ap.add_argument("--baseline-src", type=Path, default=None)
    ap.add_argument("--brief", action="store_true", help="brief reviews (a reward without feedback)")
    ap.add_argument("--repeat", type=int, default=1, help="runs of every mode, alternating")
    ap.add_argument("--workers", type=int, default=0, help="score each round as one score_many batch on this "
                    "many review processes (0: reviews in the process, one after the other)")
    ap.add_argument("--fresh-seed", action="store_true", help="a seed of its own for every round")
    ap.add_argument("--samples", type=int, default=1, help="with --workers: items per candidate (an RL step's "
                    "samples of one prompt)")
    ap.add_argument("--executor", choices=("local", "ray"), default="local", help="with --workers: score_many's")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    modes: list[tuple[str, Path, float | None]] = [("this", ROOT / "src", args.cache_mb)]
    if args.baseline_src is not None:
        modes.append(("base", args.baseline_src.resolve(), args.cache_mb))
    modes.append(("unbounded", ROOT / "src", 1 << 20))
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m, _, _ in modes}
    for i in range(args.repeat):
        for name, src, mb in (modes if i % 2 == 0 else modes[::-1]):
            runs[name].append(run_mode(args, src, mb))
    print(f"tasks {args.tasks}; candidates {args.candidates}; {args.rounds} rounds; "
          f"{'brief' if args.brief else 'full'} reviews; cache bound {args.cache_mb or 'default'} MB; "
          f"{f'score_many on {args.workers} {args.executor} workers, {args.samples} sample(s) per candidate' if args.workers else 'reviews in one process'}; "
          f"{'a fresh seed per round' if args.fresh_seed else 'one seed'}")
    print(f"{'mode':<10} {'warm CPU s/review':>18} {'wall s/review':>14} {'evictions':>10} {'checks dropped':>15} "
          f"{'peak RSS MB':>12}")
    cpu: dict[str, float] = {}
    for name, rs in runs.items():
        warm = [x for r in rs for x in r["rounds"][1:]]
        cpu[name] = statistics.median(x["cpu"] / x["n"] for x in warm)
        wall = statistics.median(x["wall"] / x["n"] for x in warm)
        last = rs[-1]["rounds"][-1]
        ev, shed = ("-", "-") if args.workers else (last["evictions"], last["shed"])  # (the workers' caches)
        print(f"{name:<10} {cpu[name]:18.3f} {wall:14.3f} {ev:>10} {shed:>15} {max(r['rss_mb'] for r in rs):12d}")
    if "base" in cpu:
        print(f"base / this warm CPU: {cpu['base'] / cpu['this']:.2f}x")
    print(f"this / unbounded warm CPU: {cpu['this'] / cpu['unbounded']:.2f}x")
    ref = runs["unbounded"][0]["hashes"]
    differ = [f"{m}: {k}" for m, rs in runs.items() for r in rs for k, h in r["hashes"].items() if h != ref.get(k)]
    print("reports: the same in every mode" if not differ else f"reports DIFFER: {differ[:5]}")


if __name__ == "__main__":
    main()
