"""CPU time of the numerics checks one review makes, per task (issue 6: pipeline overhead).

Reproduces what ``nkieval.review`` does for each (shape, input family) case of a task: the
task's seeded inputs, the reference output as the kernel's output (a correct kernel) and, with
``--defects``, the same output rounded through bf16 (the flawed-candidate path: a failing
verdict runs the diagnosis), each judged through ``review.adapters.numerics_verdict``. CPU time
(``time.process_time``) is reported, so a loaded machine does not distort comparisons; set
``OPENBLAS_NUM_THREADS=1`` for stable figures.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/numerics_review.py \
        [--tasks gemm_bf16,causal_attention,gemm_bias_gelu] [--defects] [--profile]
"""

from __future__ import annotations

import argparse
import time

import ml_dtypes
import numpy as np

from nkieval.review import adapters
from nkieval.review.stages.judge import oracle_of as _oracle
from nkieval.review.stages.load import case_inputs as _inputs
from nkieval.review.stages.load import plan_cases as _cases
from nkieval.tasks import builtin_tasks, load_reference, reference_outputs
from nkieval.tasks.inputs import is_random


def run(task_ids: list[str], defects: bool) -> list[tuple[str, str, str, float]]:
    rows = []
    for t in builtin_tasks():
        if task_ids and t.id not in task_ids:
            continue
        ref_fn, oracle = load_reference(t), _oracle(t)
        for c in _cases(t, 1, t.families, "all"):
            inp = _inputs(t, c)
            out = reference_outputs(t, ref_fn, inp)[0]
            outs = [("correct", out)]
            if defects:
                outs.append(("bf16-out", out.astype(ml_dtypes.bfloat16).astype(out.dtype)))
            for kind, o in outs:
                c0 = time.process_time()
                d, why = adapters.numerics_verdict(t, o, inp, c.family, is_random(c.family), oracle, c.dims)
                dt = time.process_time() - c0
                st = d["status"] if d else f"error: {why}"
                rows.append((t.id, f"{c.label} {kind}", st, dt))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default="gemm_bf16,causal_attention,gemm_bias_gelu")
    ap.add_argument("--defects", action="store_true")
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    ids = [s for s in args.tasks.split(",") if s]
    if args.profile:
        import cProfile
        import pstats

        pr = cProfile.Profile()
        pr.enable()
        rows = run(ids, args.defects)
        pr.disable()
        pstats.Stats(pr).sort_stats("cumulative").print_stats(40)
    else:
        rows = run(ids, args.defects)
    per: dict[str, float] = {}
    for tid, label, st, dt in rows:
        print(f"{tid:<16} {label:<40} {st:<13} {dt:7.3f} s cpu")
        per[tid] = per.get(tid, 0.0) + dt
    for tid, v in per.items():
        print(f"{tid:<16} total {v:7.3f} s cpu")
    print(f"all              total {sum(per.values()):7.3f} s cpu  ({np.__version__=})")


if __name__ == "__main__":
    main()
