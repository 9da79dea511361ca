"""Wall and CPU time of ``nkieval task audit`` per task, with its mutation kill rate and findings (issue 28).

Audits each task (built-in ids or directories) once, in this process, and prints one line per task:
wall seconds, CPU seconds of the whole process tree (this process, the sandbox's zygote, tracers and
executors: on a loaded machine the wall time says little), sandboxed reviews, mutants killed / non-stillborn (kill rate), stillborn, the rules
of its error and warning findings; ``--jsonl FILE`` appends each report's summary. The issue's bar is
one task's audit in at most 2 minutes on the development machine (``--budget`` flags the slower ones).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/task_audit.py relu silu gemm_bf16
    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/task_audit.py --all --jsonl audit.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import time

from nkieval.tasks import builtin_ids
from nkieval.tasks.audit import audit_task, to_markdown
from nkieval.tasks.audit.clock import tree_cpu_s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tasks", nargs="*")
    ap.add_argument("--all", action="store_true", help="every built-in task")
    ap.add_argument("--max-mutants", type=int, default=16)
    ap.add_argument("--default-target-only", action="store_true")
    ap.add_argument("--budget", type=float, default=120.0, help="seconds one audit may take")
    ap.add_argument("--jsonl", default=None)
    ap.add_argument("--md-dir", default=None, help="write each task's audit.md report here as TASK.md")
    a = ap.parse_args()
    ids = builtin_ids() if a.all else a.tasks
    over = 0
    print(f"{'task':<26} {'wall s':>7} {'CPU s':>7} {'reviews':>7} {'killed':>9} {'rate':>5} {'stillb':>6}  findings")
    for tid in ids:
        t0, c0 = time.perf_counter(), tree_cpu_s()
        rep = audit_task(tid, max_mutants=a.max_mutants, all_targets=not a.default_target_only)
        wall, cpu = time.perf_counter() - t0, tree_cpu_s() - c0
        over += wall > a.budget
        m = rep.criterion("discriminates").measurements
        k, s = m.get("killed"), m.get("survived")
        rate = m.get("kill_rate")
        rules = sorted({f"{f.criterion}:{f.rule}" for f in rep.findings if f.severity != "info"})
        print(f"{rep.task:<26} {wall:7.1f} {cpu:7.1f} {rep.reviews:7d} {f'{k}/{(k or 0) + (s or 0)}':>9} "
              f"{'-' if rate is None else f'{100 * rate:.0f}%':>5} {m.get('stillborn', '-')!s:>6}  "
              f"{', '.join(rules) or 'clean'}" + ("  OVER BUDGET" if wall > a.budget else ""), flush=True)
        if a.md_dir:
            from pathlib import Path

            Path(a.md_dir).mkdir(parents=True, exist_ok=True)
            (Path(a.md_dir) / f"{rep.task}.md").write_text(to_markdown(rep))
        if a.jsonl:
            d = rep.to_dict()
            rec = {"task": rep.task, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "load": os.getloadavg()[0], "reviews": rep.reviews, "summary": d["summary"],
                   "discriminates": {kk: v for kk, v in m.items() if kk not in ("table", "mutant_table")},
                   "findings": [{"criterion": f.criterion, "severity": f.severity, "rule": f.rule,
                                 "observed": f.observed} for f in rep.findings if f.severity != "info"],
                   "timings": rep.timings}
            with open(a.jsonl, "a") as fh:
                fh.write(json.dumps(rec, default=str) + "\n")
    print(f"{len(ids)} task(s); {over} over the {a.budget:.0f} s budget")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
