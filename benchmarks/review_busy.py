"""Review throughput with every core busy: several processes reviewing at once, one pipeline after the other.

``benchmarks/review_throughput.py`` reviews one candidate at a time, so a pipeline that spreads a review over
two processes (the trusted one: the sandboxed tracer and the replay worker beside the judge) uses a core that the
other leaves idle. A reward service runs one review process per core, and there what a review costs is its CPU:
this benchmark starts ``--processes`` review processes (default: one per core) for each mode in turn, each reviewing
the same candidates (an untimed first round fills its caches), lets them all start their timed rounds at once and
prints reviews per minute until the last one finishes, with the whole machine's CPU per review (``/proc/stat``).
The modes run in the order A, B, B, A (``--modes A,B``), so that a drift of the machine's speed falls on both
alike, and the ratio of A's to B's throughput is printed, each mode's figure the mean of its two runs.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/review_busy.py \\
        --tasks gemm_bf16,causal_attention,vector_add,row_softmax,rmsnorm,gemm_bias_gelu [--max-review-s 1.0]

The timed rounds review the candidates again after the untimed one, as an RL step's samples meet a flaw already
judged (the cause search's runs are kept). ``--max-review-s S`` keeps the candidates whose first review takes under
S seconds in every mode (measured first, in one process): the long reviews are mostly the differential check's cause
search, the same work in every mode. The
reviews run without the envelope's port-side ablations, which only the trusted pipeline has (as
``review_throughput.py --no-port-ablations``). Modes: ``full`` (the review), ``untrusted`` (the pipeline before
trace-then-execute, ``review(..., trusted=False)``), ``brief`` (``review(..., brief=True)``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

MODES: dict[str, dict[str, bool]] = {"full": {}, "untrusted": {"trusted": False}, "brief": {"brief": True}}


def _machine_cpu() -> float:
    """Seconds of CPU the whole machine has spent (user, nice and system, every core)."""
    with open("/proc/stat") as f:
        v = f.readline().split()[1:]
    return (int(v[0]) + int(v[1]) + int(v[2])) / os.sysconf("SC_CLK_TCK")


def _setup(tasks_arg: str) -> tuple[Any, list[tuple[Any, Path]]]:
    import review_throughput as rt
    from nkieval.review.stages import differential
    from nkieval.tasks.loader import builtin_tasks

    differential._port_side = lambda *a, **k: ({}, {})  # (as review_throughput.py --no-port-ablations)
    want = tasks_arg.split(",")
    tasks = [t for t in builtin_tasks() if t.id in want]
    return rt, [(t, f) for t in tasks for _, f in rt.candidates(t, False)]


def _review(rt: Any, t: Any, f: Path, mode: str) -> float:
    from nkieval.review import review

    rt._forget_judged_outputs()  # (each review judges its outputs, as a new candidate's would be)
    rt._forget_candidate_sources()
    w0 = time.perf_counter()
    review(t, f, seed=1, **MODES[mode])
    return time.perf_counter() - w0


def select(tasks_arg: str, modes: list[str], max_s: float) -> list[str]:
    """The candidates (``task/file``) whose first review takes under ``max_s`` seconds in every mode (in one
    process, each task's first candidate reviewed once before, untimed, so that its cases are made)."""
    rt, items = _setup(tasks_arg)
    keep, seen = [], set()
    for t, f in items:
        if t.id not in seen:
            seen.add(t.id)
            for mode in modes:
                _review(rt, t, t.solution_file, mode)
        if all(_review(rt, t, f, mode) < max_s for mode in modes):
            keep.append(f"{t.id}/{f.name}")
    return keep


def worker(mode: str, tasks_arg: str, names: list[str], rounds: int) -> None:
    """One review process: an untimed round, "ready", then, on a line from the driver, ``rounds`` timed rounds."""
    from nkieval.reward.workers import settle_collector

    rt, items = _setup(tasks_arg)
    items = [(t, f) for t, f in items if f"{t.id}/{f.name}" in set(names)]
    for t, f in items:
        _review(rt, t, f, mode)
    settle_collector()  # (as a reward worker after its first job)
    print("ready", flush=True)
    sys.stdin.readline()
    w0 = time.perf_counter()
    for _ in range(rounds):
        for t, f in items:
            _review(rt, t, f, mode)
    print(json.dumps({"reviews": rounds * len(items), "wall": time.perf_counter() - w0}), flush=True)


def run_mode(mode: str, args: argparse.Namespace, names: list[str]) -> dict[str, float]:
    """``--processes`` workers of ``mode`` started together: reviews, wall until the last one ends, machine CPU."""
    cmd = [sys.executable, __file__, "--worker", mode, "--tasks", args.tasks, "--rounds", str(args.rounds),
           "--names", ",".join(names)]
    procs = [subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for _ in range(args.processes)]
    try:
        for p in procs:
            line = p.stdout.readline().strip() if p.stdout else ""
            if line != "ready":
                raise SystemExit(f"a {mode} worker did not start (it said {line!r})")
        c0, w0 = _machine_cpu(), time.perf_counter()
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        outs = [json.loads(p.stdout.readline()) for p in procs if p.stdout]
        wall, cpu = time.perf_counter() - w0, _machine_cpu() - c0
    finally:
        for p in procs:
            p.wait()
    n = sum(o["reviews"] for o in outs)
    return {"reviews": n, "wall": wall, "per_minute": n / wall * 60, "cpu_per_review": cpu / n}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", default="gemm_bf16,causal_attention,vector_add,row_softmax,rmsnorm,gemm_bias_gelu")
    ap.add_argument("--modes", default="full,untrusted", help="two modes, A,B: run in the order A, B, B, A")
    ap.add_argument("--processes", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--rounds", type=int, default=2, help="timed rounds over the candidates in each process")
    ap.add_argument("--max-review-s", type=float, default=1.0,
                    help="keep the candidates reviewed in under this many seconds in every mode (0: keep all)")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--names", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.tasks, args.names.split(","), args.rounds)
        return
    modes = args.modes.split(",")
    if len(modes) != 2 or any(m not in MODES for m in modes):
        raise SystemExit(f"--modes takes two of {', '.join(MODES)}")
    if args.max_review_s > 0:
        names = select(args.tasks, modes, args.max_review_s)
    else:
        _, items = _setup(args.tasks)
        names = [f"{t.id}/{f.name}" for t, f in items]
    print(f"{len(names)} candidates, {args.processes} processes, {args.rounds} timed rounds each", flush=True)
    runs: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
    for mode in (modes[0], modes[1], modes[1], modes[0]):
        r = run_mode(mode, args, names)
        runs[mode].append(r)
        print(f"{mode:<10} {r['reviews']:5d} reviews in {r['wall']:7.2f} s: {r['per_minute']:7.1f} reviews/minute, "
              f"machine CPU {r['cpu_per_review']:.3f} s per review", flush=True)
    a, b = ({k: sum(r[k] for r in runs[m]) / len(runs[m]) for k in ("per_minute", "cpu_per_review")} for m in modes)
    print(f"throughput {modes[0]} / {modes[1]} = {a['per_minute'] / b['per_minute']:.3f}x; machine CPU per review "
          f"{modes[0]} / {modes[1]} = {a['cpu_per_review'] / b['cpu_per_review']:.3f}x")


if __name__ == "__main__":
    main()
