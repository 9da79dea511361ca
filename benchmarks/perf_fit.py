"""Fit the few free DMA parameters of the performance model on ratios within one source.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/perf_fit.py [--ladder matmul_tutorial_trn1] [--scale 1] [--jobs 2]

Grid search over ``dma_fixed_ns`` (per-DMA queue latency), ``dma_engine_fixed_ns`` (per-transfer
engine cost) and ``dma_descriptor_overhead_bytes`` (B0), minimising the mean |log error| of the
consecutive-step speedups of one published ladder (never absolute times), with ranking and
bottleneck classes as hard constraints. Held-out ladders (``held_out = true`` in published.toml)
are refused. Prints the best points; copy the chosen values into
``hardware/data/<target>.toml`` with status ``fitted``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import itertools

from nkieval import frontends

frontends.install()

from nkieval.perf.calibration import published  # noqa: E402
from nkieval.perf.calibration.validate import evaluate_ladder, ladder_traces  # noqa: E402

_TRACES: list = []
_LADDER = ""


def _point(ov: dict) -> tuple[dict, list[float], bool, bool]:
    r = evaluate_ladder(_LADDER, _TRACES, ov)
    return ov, [e for *_, e in r.step_ratios()], r.rank_ok(), r.bounds_ok()


def main() -> None:
    global _TRACES, _LADDER
    ap = argparse.ArgumentParser()
    ap.add_argument("--ladder", default="matmul_tutorial_trn1")
    ap.add_argument("--scale", type=int, default=1)
    ap.add_argument("--cache", default="/tmp/nkieval-perf-cache")
    ap.add_argument("--fixed", default="100,200,340")
    ap.add_argument("--engine-fixed", default="150,250,350,450")
    ap.add_argument("--b0", default="160,320,512")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (forked; traces are shared)")
    a = ap.parse_args()
    if published()["ladders"][a.ladder].get("held_out"):
        raise SystemExit(f"{a.ladder} is a held-out set: it must not be used for fitting")
    _LADDER = a.ladder
    _TRACES = ladder_traces(a.ladder, a.scale, a.cache)
    grid = [{"dma_fixed_ns": f, "dma_engine_fixed_ns": e, "dma_descriptor_overhead_bytes": b}
            for f, e, b in itertools.product(*(map(float, s.split(",")) for s in (a.fixed, a.engine_fixed, a.b0)))]
    if a.jobs > 1:
        import multiprocessing as mp

        with mp.get_context("fork").Pool(a.jobs) as pool:
            results = pool.imap_unordered(_point, grid)
            rows = _report(results)
    else:
        rows = _report(map(_point, grid))
    rows.sort(key=lambda x: (x[0], x[1]))
    print("\nbest (rank and bounds respected first):")
    for bad, score, worst, ov in rows[:5]:
        print(f"  {ov}  mean {score:.3f} worst {worst:.3f}{'  (rank/bounds WRONG)' if bad else ''}")


def _report(results) -> list:
    rows = []
    for ov, errs, rank_ok, bounds_ok in results:
        score = sum(errs) / len(errs)
        rows.append((not (rank_ok and bounds_ok), score, max(errs), ov))
        print(f"fixed={ov['dma_fixed_ns']:5.0f} engine_fixed={ov['dma_engine_fixed_ns']:5.0f} "
              f"B0={ov['dma_descriptor_overhead_bytes']:5.0f}: mean|log err| {score:.3f} worst {max(errs):.3f} "
              f"rank {'ok' if rank_ok else 'WRONG'} bounds {'ok' if bounds_ok else 'WRONG'}", flush=True)
    return rows


if __name__ == "__main__":
    main()
