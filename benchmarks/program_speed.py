"""Trace-then-execute cost per phase (issues 24 and 31): recording a kernel as a program, parsing and compiling
the program, and replaying it, as ratios to a baseline tree run in the same invocation.

The kernels are built-in candidates of many small instructions (the thread-by-thread ports), where the judge's
trusted pipeline loses throughput: recording and replay each cost about one eager run. Each phase's CPU time
(``time.process_time``) is the best of ``--repeat`` runs, each begun after a full garbage collection: ``record`` is
recording and the program's JSON together (the tracer's work), ``json`` the JSON alone, ``own`` the recorder's own
work (``record`` less the same record-only run without a recorder); ``parse`` is ``Program.from_json`` and
``compile`` the judge's checks and compile (``compile_program``), both with the collector paused, as the judge's
executor runs them; ``debt`` is a full collection right after them (the collector's work on what they left); the
collector's thresholds are the tracer's and the executor's (``nkieval.review.child.GC_THRESHOLDS``). ``bytes`` is
the program's JSON. The replay's outputs and its trace (paths normalised) are digested, so the two trees are shown
to compute the same bytes (the program text itself differs between format versions, so it is not digested).

Run::

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/program_speed.py --baseline-src BASE/src [--repeat 3]
        [--rounds 2] [--tasks vector_add,rmsnorm,row_softmax]

(BASE: e.g. ``git archive`` of main's commit, unpacked.) Each tree runs in its own child process, alternating.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import resource
import subprocess
import sys
import time
import warnings
from dataclasses import replace
from pathlib import Path

#: task -> the thread-by-thread port's input shapes (the largest the judge's cases reach, and larger)
SHAPES: dict[str, list[tuple[tuple[int, ...], str]]] = {
    "vector_add": [((300007,), "float32"), ((300007,), "float32")],
    "rmsnorm": [((4096, 512), "float32"), ((512,), "float32")],
    "row_softmax": [((4096, 512), "float32")],
}


def child(tasks: list[str], repeat: int) -> None:
    import numpy as np

    import nkieval
    from nkieval import frontends
    from nkieval.review.child import GC_THRESHOLDS, _kernel_entry
    from nkieval.sim.options import SimOptions
    from nkieval.sim.program import ArgSpec, Program, compile_program, record_program, replay_program
    from nkieval.sim.runner import run_kernel
    from nkieval.tasks.loader import load_task

    warnings.simplefilter("ignore")
    frontends.install(force=True)
    gc.set_threshold(*GC_THRESHOLDS)  # (the collector's pace of the tracer and of the judge's replays)
    builtin = Path(nkieval.__file__).parent / "tasks" / "builtin"
    for task in tasks:
        shapes = SHAPES[task]
        entry = _kernel_entry(str(builtin / task / "flawed" / "thread_port.py"), load_task(builtin / task).kernel)
        rng = np.random.default_rng(0)
        specs = [ArgSpec(s, d) for s, d in shapes]
        inputs = [rng.standard_normal(s).astype(d) for s, d in shapes]
        opts = SimOptions.from_env(record_trace=False, **entry.options)
        bare_opts = replace(opts, compute_values=False)
        best = [float("inf")] * 7
        for _ in range(repeat):
            prog = res = None
            gc.collect()
            b0 = time.process_time()  # the same record-only run without a recorder: the simulator's share
            run_kernel(entry.fn, [s.placeholder() for s in specs], {}, options=bare_opts, lnc=entry.lnc,
                       grid=entry.grid)
            b1 = time.process_time()
            gc.collect()
            c0 = time.process_time()
            rec = record_program(entry.fn, specs, {}, options=opts, lnc=entry.lnc, grid=entry.grid)
            cj = time.process_time()
            text = rec.program.to_json()
            c1 = time.process_time()
            rec = None
            gc.collect()
            c2 = time.process_time()
            gc.disable()
            prog = Program.from_json(text)
            cp = time.process_time()
            compile_program(prog)
            gc.enable()
            c3 = time.process_time()
            gc.collect()
            c4 = time.process_time()
            res = replay_program(prog, inputs, {}, options=SimOptions.from_env(emit_warnings=False))
            c5 = time.process_time()
            best = [min(b, x) for b, x in zip(best, (c1 - c0, c3 - cp, c4 - c3, c5 - c4, b1 - b0, c1 - cj, cp - c2))]
        outs = res.outputs if isinstance(res.outputs, tuple | list) else [res.outputs]
        digest = hashlib.sha256()
        for o in outs:
            digest.update(np.ascontiguousarray(o).tobytes())
        digest.update(res.trace.to_json().replace(str(builtin), "BUILTIN").encode())
        print("RESULT " + json.dumps({
            "task": task, "record": best[0], "compile": best[1], "debt": best[2], "replay": best[3],
            "bare": best[4], "json": best[5], "parse": best[6], "bytes": len(text.encode()),
            "events": prog.n_events, "instructions": len(res.trace), "digest": digest.hexdigest()[:16],
            "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}), flush=True)


#: phases each child measures (best of its repeats): ``record`` is recording and JSON together, ``json`` its part,
#: ``bare`` the same record-only run without a recorder
_MEASURED = ("record", "json", "bare", "parse", "compile", "debt", "replay", "bytes")


def run_tree(src: Path, tasks: list[str], repeat: int) -> dict[str, dict]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")]),
               OPENBLAS_NUM_THREADS="1")
    out = subprocess.run([sys.executable, __file__, "--child", ",".join(tasks), "--repeat", str(repeat)], env=env,
                         capture_output=True, text=True, check=False)
    rows = [json.loads(line[7:]) for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    if len(rows) != len(tasks):
        raise SystemExit(f"the run with {src} failed:\n{out.stderr[-3000:]}")
    return {r["task"]: r for r in rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline-src", type=Path, help="the baseline nkieval tree's src directory")
    ap.add_argument("--tasks", default=",".join(SHAPES))
    ap.add_argument("--repeat", type=int, default=3, help="runs per child (the minimum CPU of each phase is kept)")
    ap.add_argument("--rounds", type=int, default=2, help="children per tree, alternating (the minimum is kept)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    tasks = (args.child or args.tasks).split(",")
    unknown = [t for t in tasks if t not in SHAPES]
    if unknown:
        raise SystemExit(f"unknown task(s) {unknown}; known: {', '.join(SHAPES)}")
    if args.child:
        child(tasks, args.repeat)
        return
    if args.baseline_src is None:
        raise SystemExit("--baseline-src is required")
    this = Path(__file__).resolve().parents[1] / "src"
    runs: dict[str, list[dict]] = {"base": [], "this": []}
    for _ in range(args.rounds):
        runs["base"].append(run_tree(args.baseline_src.resolve(), tasks, args.repeat))
        runs["this"].append(run_tree(this, tasks, args.repeat))
    phases = ("bytes", "record", "own", "json", "parse", "compile", "debt", "replay")
    print("| task | events | " + " | ".join(f"{p}, base → this (ratio)" if p == "bytes" else
                                           f"{p} CPU s, base → this (speed-up)" for p in phases)
          + " | peak RSS MB, base → this | same bytes |")
    print("|---|---|" + "---|" * len(phases) + "---|---|")
    for t in tasks:
        b = {p: min(r[t][p] for r in runs["base"]) for p in (*_MEASURED, "maxrss_mb")}
        n = {p: min(r[t][p] for r in runs["this"]) for p in (*_MEASURED, "maxrss_mb")}
        for d in (b, n):  # the recorder's own work: recording and JSON less the same run without a recorder
            d["own"] = d["record"] - d["bare"]
        same = len({r[t]["digest"] for k in runs for r in runs[k]}) == 1
        cells = [f"{b[p]:,.0f} → {n[p]:,.0f} ({b[p] / n[p]:.2f}×)" if p == "bytes" else
                 f"{b[p]:.3f} → {n[p]:.3f} ({b[p] / n[p]:.2f}×)" if n[p] > 0 else "-" for p in phases]
        print(f"| {t} | {runs['this'][0][t]['events']} | " + " | ".join(cells)
              + f" | {b['maxrss_mb']:.0f} → {n['maxrss_mb']:.0f} | {'yes' if same else 'NO'} |")


if __name__ == "__main__":
    main()
