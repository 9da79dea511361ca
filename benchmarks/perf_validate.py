"""Validation report of the performance model: predicted vs published ratios, ranks, bottlenecks, micro-results.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/perf_validate.py [--scale 1] [--cache DIR]

``--scale s`` divides the published shapes by s (quicker, less faithful); traces are cached in
DIR (default /tmp/nkieval-perf-cache) so that re-runs only re-estimate.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # the simulator's small matmuls run best single-threaded

import argparse
import time

from nkieval import frontends

frontends.install()

from nkieval.perf.calibration import published  # noqa: E402
from nkieval.perf.calibration.validate import (  # noqa: E402
    evaluate_ladder,
    geomean_abs_log_error,
    ladder_traces,
    micro_results,
)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=int, default=1)
    ap.add_argument("--cache", default="/tmp/nkieval-perf-cache")
    ap.add_argument("--ladders", default="matmul_tutorial_trn1,matmul_bounds_trn2")
    a = ap.parse_args()
    results = []
    for name in a.ladders.split(","):
        t = time.time()
        traces = ladder_traces(name, a.scale, a.cache)
        r = evaluate_ladder(name, traces)
        results.append(r)
        lad = published()["ladders"][name]
        print(f"\n== {name} ({lad['target']}, {lad['quantity']}, scale 1/{a.scale}; {time.time() - t:.0f} s)")
        print(f"   source: {r.source}")
        print(f"   {'step':<28} {'published':>10} {'predicted':>12} {'HFU pub':>8} {'HFU pred':>8}  bound pub/pred")
        for s in r.steps:
            hp = f"{s.hfu_published:.1f}" if s.hfu_published is not None else "-"
            print(f"   {s.label:<28} {s.published:>10g} {s.predicted_ns / 1e3:>10.1f}us {hp:>8} {s.hfu_predicted:>8.1f}  "
                  f"{s.bound_published}/{s.bound_predicted} ({s.resource_predicted})")
        for pair, pub, pred, err in r.step_ratios():
            print(f"   speedup {pair:<50} published {pub:6.3f}  predicted {pred:6.3f}  |log err| {err:.3f}")
        print(f"   rank order {'OK' if r.rank_ok() else 'WRONG'}; bottleneck classes {'OK' if r.bounds_ok() else 'MISMATCH'}")
    g, worst = geomean_abs_log_error(results)
    print(f"\nmean |log ratio error| over all step speedups: {g:.3f} (target <= 0.15); worst {worst:.3f} (target <= 0.35)")
    print("\n== micro-results (performance guide)")
    for m in micro_results():
        print(f"   {m.name:<26} published {m.published:8.3f}  predicted {m.predicted:8.3f}  {'OK' if m.ok else 'MISS'}  "
              f"({m.claim})")


if __name__ == "__main__":
    main()
