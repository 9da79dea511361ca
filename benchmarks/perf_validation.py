"""Validation ladders of the performance model, with and without the compiler model.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/perf_validation.py [--scale 2] [--cache DIR]
        [--rotation-room fit|spill]

For each ladder (our own kernels reproducing published optimisation steps; sources in
``nkieval/perf/calibration/published.toml`` and docs/perf.md) it prints, with the compiler model off
and on: Spearman rho of predicted vs published times, pairwise order accuracy, each step's
|log(predicted speed-up / published speed-up)| and absolute predicted/published per step (where the
published figure is a time at the shape simulated). Then the guide's micro-results, both ways.

Held out and never used here: the fused Mamba tutorial's timing tables, Autocomp's Trainium step
traces, AccelOpt/NKIBench profiles and latencies, nki-autotune's MFU ladder.

``--scale s`` divides the published matmul shapes by s (the absolute ratio is then printed against the
published time scaled by the FLOP ratio s^3, for information only); traces are cached in DIR.
``--rotation-room spill`` schedules with ``SchedulePolicy(rotation_room="spill")`` (opt-in; default ``fit``).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import itertools
import math
import time

from nkieval import frontends

frontends.install()

from nkieval.perf.calibration import published  # noqa: E402
from nkieval.perf.calibration.validate import evaluate_ladder, ladder_traces, micro_results  # noqa: E402
from nkieval.perf.compiler import CompilerOptions  # noqa: E402
from nkieval.perf.schedule import SchedulePolicy  # noqa: E402

UNITS_NS = {"latency_ms": 1e6, "latency_us": 1e3, "total_time_us": 1e3}


def spearman(xs: list[float], ys: list[float]) -> float:
    """Spearman's rho (average ranks for ties)."""
    def ranks(v: list[float]) -> list[float]:
        order = sorted(range(len(v)), key=v.__getitem__)
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2
            i = j + 1
        return r
    rx, ry = ranks(xs), ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    num = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    den = math.sqrt(sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry))
    return num / den if den else float("nan")


def pairwise(xs: list[float], ys: list[float]) -> float:
    pairs = list(itertools.combinations(range(len(xs)), 2))
    ok = sum((xs[i] - xs[j]) * (ys[i] - ys[j]) > 0 for i, j in pairs)
    return ok / len(pairs)


def report(name: str, scale: int, cache: str, policy: SchedulePolicy | None = None) -> None:
    lad = published()["ladders"][name]
    t0 = time.process_time()
    traces = ladder_traces(name, scale if "M" in lad["shape"] else 1, cache)
    sim_s = time.process_time() - t0
    print(f"\n== {name} ({lad['target']}, {lad['quantity']}; {lad.get('use', '')}) ==")
    print(f"   source: {lad['source']}")
    print(f"   traced {', '.join(str(len(t.records)) for t in traces)} instructions "
          f"(simulation {sim_s:.1f} s CPU, or cached)")
    flops_scale = scale ** 3 if "M" in lad["shape"] else 1
    for label, opts in (("compiler model off", CompilerOptions.off()), ("compiler model on", CompilerOptions())):
        t0 = time.process_time()
        r = evaluate_ladder(name, traces, compiler=opts, policy=policy)
        est_s = time.process_time() - t0
        pub = [s.published for s in r.steps]
        pred = [s.predicted_ns for s in r.steps]
        errs = [e for *_, e in r.step_ratios()]
        print(f"  {label} (estimates {est_s:.1f} s CPU): rho {spearman(pub, pred):+.2f}, pairwise "
              f"{100 * pairwise(pub, pred):.0f} %, step |log err| mean {sum(errs) / len(errs):.3f} "
              f"max {max(errs):.3f}")
        for (pair, p, q, e) in r.step_ratios():
            print(f"    {pair:<58} published {p:5.2f}x  predicted {q:5.2f}x  |log err| {e:.3f}")
        unit = UNITS_NS.get(lad["quantity"])
        if unit:
            print("    absolute predicted/published" + (f" (published / {flops_scale}, information only)"
                                                       if flops_scale > 1 else "") + ": "
                  + ", ".join(f"{s.label} {s.predicted_ns / (s.published * unit / flops_scale):.2f}"
                              for s in r.steps))


def report_ranks(name: str, scale: int, cache: str, policy: SchedulePolicy | None = None) -> None:
    """A ladder published without times, only as "each step is faster": rank agreement only."""
    from nkieval.perf import estimate

    lad = published()["ladders"][name]
    traces = ladder_traces(name, scale, cache)
    print(f"\n== {name} ({lad['target']}; steps in published order, each faster; no times published) ==")
    print(f"   source: {lad['source']}; shape divided by {scale}")
    print(f"   traced {', '.join(str(len(t.records)) for t in traces)} instructions")
    rank = list(range(len(traces), 0, -1))  # the published order: later steps faster
    for label, opts in (("compiler model off", CompilerOptions.off()), ("compiler model on", CompilerOptions())):
        pred = [estimate(t, lad["target"], compiler=opts, policy=policy).total_time_ns for t in traces]
        print(f"  {label}: rho {spearman(rank, pred):+.2f}, pairwise {100 * pairwise(rank, pred):.0f} %; predicted "
              + ", ".join(f"{s['label']} {p / 1e3:.0f} us" for s, p in zip(lad["steps"], pred)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=int, default=2, help="divide the matmul ladders' shapes by this")
    ap.add_argument("--cache", default=os.path.join(os.path.expanduser("~"), ".cache", "nkieval-perf"))
    ap.add_argument("--ladders", default="matmul_tutorial_trn1,matmul_bounds_trn2,layernorm_trn1")
    ap.add_argument("--rank-ladders", default="kernel_optimization_trn2",
                    help="ladders published as an order only ('' to skip)")
    ap.add_argument("--rotation-room", choices=("fit", "spill"), default="fit",
                    help="SchedulePolicy.rotation_room (spill: opt-in)")
    a = ap.parse_args()
    policy = SchedulePolicy(rotation_room=a.rotation_room)
    print(f"shape divisor {a.scale} for the matmul ladders; layernorm at its published shape; "
          f"rotation_room={a.rotation_room}")
    for name in a.ladders.split(","):
        report(name, a.scale, a.cache, policy)
    for name in filter(None, a.rank_ladders.split(",")):
        report_ranks(name, a.scale, a.cache, policy)
    print("\n== micro-results (NKI performance guide, DMA overview) ==")
    off, on = micro_results(compiler=CompilerOptions.off()), micro_results()
    for m0, m1 in zip(off, on):
        print(f"  {m0.name:<24} published {m0.published:8.2f}  off {m0.predicted:8.2f} ({'ok' if m0.ok else 'MISS'})"
              f"  on {m1.predicted:8.2f} ({'ok' if m1.ok else 'MISS'})")


if __name__ == "__main__":
    main()
