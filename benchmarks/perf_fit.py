"""Fit the few free DMA parameters of the performance model on ratios within one source.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/perf_fit.py [--ladder matmul_tutorial_trn1] [--scale 1]

Grid search over ``dma_fixed_ns`` (per-DMA queue latency), ``dma_engine_fixed_ns`` (per-transfer
engine cost) and ``dma_descriptor_overhead_bytes`` (B0), minimising the mean |log error| of the
consecutive-step speedups of one published ladder (never absolute times), with ranking and
bottleneck classes as hard constraints. Prints the best points; copy the chosen values into
``hardware/data/<target>.toml`` with status ``fitted``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import itertools

from nkieval import frontends

frontends.install()

from nkieval.perf.calibration.validate import evaluate_ladder, ladder_traces  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ladder", default="matmul_tutorial_trn1")
    ap.add_argument("--scale", type=int, default=1)
    ap.add_argument("--cache", default="/tmp/nkieval-perf-cache")
    ap.add_argument("--fixed", default="200,340,500,680")
    ap.add_argument("--engine-fixed", default="200,340,450,600")
    ap.add_argument("--b0", default="160,320,512")
    a = ap.parse_args()
    traces = ladder_traces(a.ladder, a.scale, a.cache)
    rows = []
    grid = itertools.product(*(map(float, s.split(",")) for s in (a.fixed, a.engine_fixed, a.b0)))
    for fixed, eng, b0 in grid:
        ov = {"dma_fixed_ns": fixed, "dma_engine_fixed_ns": eng, "dma_descriptor_overhead_bytes": b0}
        r = evaluate_ladder(a.ladder, traces, ov)
        errs = [e for *_, e in r.step_ratios()]
        score = sum(errs) / len(errs)
        ok = r.rank_ok() and r.bounds_ok()
        rows.append((not ok, score, max(errs), ov))
        print(f"fixed={fixed:5.0f} engine_fixed={eng:5.0f} B0={b0:5.0f}: mean|log err| {score:.3f} worst {max(errs):.3f} "
              f"rank {'ok' if r.rank_ok() else 'WRONG'} bounds {'ok' if r.bounds_ok() else 'WRONG'}", flush=True)
    rows.sort(key=lambda x: (x[0], x[1]))
    print("\nbest (rank and bounds respected first):")
    for bad, score, worst, ov in rows[:5]:
        print(f"  {ov}  mean {score:.3f} worst {worst:.3f}{'  (rank/bounds WRONG)' if bad else ''}")


if __name__ == "__main__":
    main()
