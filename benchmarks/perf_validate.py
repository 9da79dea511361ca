"""Validation report of the performance model: predicted vs published ratios, ranks, bottlenecks, micro-results.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/perf_validate.py [--scale 1] [--cache DIR]

``--scale s`` divides the published shapes by s (quicker, less faithful); traces are cached in
DIR (default /tmp/nkieval-perf-cache) so that re-runs only re-estimate.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # the simulator's small matmuls run best single-threaded

import argparse
import itertools
import time

from nkieval import frontends

frontends.install()

from nkieval.perf.calibration import published  # noqa: E402
from nkieval.perf.calibration.validate import (  # noqa: E402
    evaluate_held_out,
    evaluate_ladder,
    geomean_abs_log_error,
    ladder_traces,
    micro_results,
)
from nkieval.perf.schedule import SchedulePolicy  # noqa: E402


def _spill(nbytes: int) -> str:
    return f"  SBUF over-subscribed: spill traffic {nbytes / 1e6:.0f} MB" if nbytes else ""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=int, default=1)
    ap.add_argument("--cache", default="/tmp/nkieval-perf-cache")
    ap.add_argument("--ladders", default="matmul_tutorial_trn1,matmul_bounds_trn2")
    ap.add_argument("--held-out", default="layernorm_trn1,kernel_optimization_trn2",
                    help="held-out ladders (never fitted): direction / classification only; '' to skip")
    ap.add_argument("--heldout-scale", type=int, default=1,
                    help="shape divisor for kernel_optimization_trn2 (fp32 4096x8192x8192: about 25 s a step to "
                         "simulate, cached; at the published shape two steps over-subscribe SBUF and spill)")
    ap.add_argument("--engine-order", choices=["program", "backfill"], default="program",
                    help="SchedulePolicy.engine_order of every estimate (micro-results stay in program order)")
    ap.add_argument("--spill-traffic", choices=["prefetch", "on_demand", "off"], default="prefetch",
                    help="SchedulePolicy.spill_traffic of every estimate")
    a = ap.parse_args()
    policy = SchedulePolicy(engine_order=a.engine_order, spill_traffic=a.spill_traffic)
    print(f"spill traffic: {a.spill_traffic}")
    print(f"engine order: {a.engine_order}")
    results = []
    for name in a.ladders.split(","):
        t = time.time()
        traces = ladder_traces(name, a.scale, a.cache)
        r = evaluate_ladder(name, traces, policy=policy)
        results.append(r)
        lad = published()["ladders"][name]
        print(f"\n== {name} ({lad['target']}, {lad['quantity']}, scale 1/{a.scale}; {time.time() - t:.0f} s)")
        print(f"   source: {r.source}")
        print(f"   {'step':<28} {'published':>10} {'predicted':>12} {'HFU pub':>8} {'HFU pred':>8}  bound pub/pred")
        for s in r.steps:
            hp = f"{s.hfu_published:.1f}" if s.hfu_published is not None else "-"
            print(f"   {s.label:<28} {s.published:>10g} {s.predicted_ns / 1e3:>10.1f}us {hp:>8} {s.hfu_predicted:>8.1f}  "
                  f"{s.bound_published}/{s.bound_predicted} ({s.resource_predicted})" + _spill(s.spill_bytes))
        for pair, pub, pred, err in r.step_ratios():
            print(f"   speedup {pair:<50} published {pub:6.3f}  predicted {pred:6.3f}  |log err| {err:.3f}")
        print(f"   rank order {'OK' if r.rank_ok() else 'WRONG'}; bottleneck classes {'OK' if r.bounds_ok() else 'MISMATCH'}")
    g, worst = geomean_abs_log_error(results)
    print(f"\nmean |log ratio error| over all step speedups: {g:.3f} (target <= 0.15); worst {worst:.3f} (target <= 0.35)")
    for name in filter(None, a.held_out.split(",")):
        t = time.time()
        lad = published()["ladders"][name]
        sc = a.heldout_scale if "M" in lad.get("shape", {}) else 1
        steps = evaluate_held_out(name, ladder_traces(name, sc, a.cache), policy=policy)
        print(f"\n== held out: {name} ({lad['target']}, {lad['quantity']}, scale 1/{sc}; {time.time() - t:.0f} s)")
        print(f"   source: {lad['source']}")
        for s in steps:
            pub_act = ", ".join(f"{k} {v:.1f}%" for k, v in s.active_published.items())
            pred_act = ", ".join(f"{k} {s.active_predicted[k]:.1f}%" for k in s.active_published)
            pv = f"published {s.published:g}, " if s.published is not None else ""
            print(f"   {s.label:<36} {pv}predicted {s.predicted_ns / 1e3:9.1f}us  bound {s.bound_published or '-'}/"
                  f"{s.bound_predicted} ({s.resource_predicted})" + (f"  active pub [{pub_act}] pred [{pred_act}]"
                                                                     if pub_act else "") + _spill(s.spill_bytes))
        if all(s.published is not None for s in steps) and len(steps) >= 2:
            for x, y in itertools.pairwise(steps):
                pub, pred = x.published / y.published, x.predicted_ns / y.predicted_ns
                print(f"   speedup {x.label} -> {y.label}: published {pub:.3f} predicted {pred:.3f} "
                      f"direction {'OK' if (pub > 1) == (pred > 1) else 'WRONG'}")
        if lad.get("faster_each_step") and len(steps) >= 2:
            ok = all(y.predicted_ns < x.predicted_ns for x, y in itertools.pairwise(steps))
            print(f"   each step faster than the one before (published in words only): {'OK' if ok else 'WRONG'}")
        if any(s.bound_published for s in steps):
            ok = all(s.bound_published == s.bound_predicted for s in steps if s.bound_published)
            print(f"   bottleneck classes {'OK' if ok else 'MISMATCH'}")
    print("\n== micro-results (performance guide)")
    for m in micro_results():
        print(f"   {m.name:<26} published {m.published:8.3f}  predicted {m.predicted:8.3f}  {'OK' if m.ok else 'MISS'}  "
              f"({m.claim})")


if __name__ == "__main__":
    main()
