"""Is the GPU-vs-Trainium envelope informative? Per built-in task with a kernel.cu, its expert port is reviewed
and, per output, the differential record's expected envelope is printed next to the observed max |GPU - port|
and their ratio (the issue's goal: within 10x), in one run for both bounds the record carries:

* ``all``: max|GPU - X| + max|port - X| over every element (the bound before the magnitude bands);
* ``new``: the per-element envelope |GPU_i - X_i| + |port_i - X_i|, its largest value over the magnitude bands
  where GPU and port differ (the envelope the review states);
* ``band``: the worst per-band ratio (band envelope / band observed) over the bands where they differ.

An output the port computes bitwise equal to the GPU (observed 0) has no ratio: it is counted apart.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/cuda_envelope.py [--tasks a,b] [--workers 1]
        [--executor-budget S]

``--executor-budget``: the review's executor seconds (``differential.EXECUTOR_BUDGET_S``, default 6 s of CPU),
raised so that every case of a task runs (which cases a review covers otherwise depends on the CPU time each
run takes).
"""

from __future__ import annotations

import argparse
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any


def _budget(seconds: float) -> None:
    if seconds > 0:
        from nkieval.review.stages import differential

        differential.EXECUTOR_BUDGET_S = seconds


def _one(task_id: str) -> list[dict[str, Any]]:
    from nkieval.review.pipeline import review
    from nkieval.tasks.loader import builtin_tasks

    t = next(t for t in builtin_tasks() if t.id == task_id)
    t0 = time.process_time()
    try:
        r = review(task_id, str(t.solution_file), seed=5, compare_references=False)
    except Exception as e:  # a harness failure is reported, not hidden
        return [{"task": task_id, "output": "-", "error": f"{type(e).__name__}: {e}"}]
    cpu = time.process_time() - t0
    mig = next(c for c in r.criteria if c.id == "migration")
    rows = [{"task": task_id, "output": f.evidence["output"], "observed": f.evidence["observed"],
             "envelope": f.evidence["envelope"], "envelope_all": f.evidence.get("envelope_all"),
             "bands": f.evidence.get("envelope_bands") or [], "verdict": f.evidence["verdict"], "cpu": cpu,
             "causes": f.evidence.get("envelope_causes") or []}
            for f in mig.feedback if f.severity == "info" and "envelope" in f.evidence]
    if not rows:
        why = next((f.observed for f in mig.feedback if "not assessed" in f.observed), "no envelope line")
        rows = [{"task": task_id, "output": "-", "error": why[:160]}]
    return rows


def _band_ratio(bands: list[dict[str, Any]]) -> float:
    return max((b["envelope"] / b["observed"] for b in bands if b["observed"] > 0), default=0.0)


def _stats(name: str, xs: list[float]) -> str:
    if not xs:
        return f"{name}: none"
    return (f"{name}: min {min(xs):.3g} median {statistics.median(xs):.3g} max {max(xs):.3g}, "
            f"within 10x {sum(x <= 10 for x in xs)}/{len(xs)}, below 1x {sum(x < 1 for x in xs)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default="")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--executor-budget", type=float, default=0.0, help="executor CPU seconds per review")
    a = ap.parse_args()
    from nkieval.tasks.loader import builtin_tasks

    only = {t for t in a.tasks.split(",") if t}
    ids = [t.id for t in builtin_tasks() if t.cuda_file is not None and t.solution_file is not None
           and (not only or t.id in only)]
    with ProcessPoolExecutor(a.workers, initializer=_budget, initargs=(a.executor_budget,)) as pool:
        res = [row for rows in pool.map(_one, ids) for row in rows]
    old, new, band, bitwise = [], [], [], []
    for r in res:
        if "error" in r:
            print(f"{r['task']:28s} {'-':10s} {r['error']}", flush=True)
            continue
        head = f"{r['task']:28s} {r['output']:10s} envelope {r['envelope']:10.3g} (all {r['envelope_all'] or 0:10.3g}) "
        if r["observed"] == 0:
            # (no ratio: the envelope bounds a difference that is not there)
            bitwise.append(r)
            print(head + f"observed {'0 (bitwise)':>10s} ratio        -", flush=True)
            continue
        ratio = r["envelope"] / r["observed"]
        new.append(ratio)
        old.append((r["envelope_all"] or 0.0) / r["observed"])
        band.append(_band_ratio(r["bands"]))
        print(head + f"observed {r['observed']:10.3g} ratio {ratio:8.3g} (all {old[-1]:8.3g}, worst band "
              f"{band[-1]:8.3g}){'  LOOSE' if ratio > 10 else ''}  [review {r['cpu']:.1f} CPU s]", flush=True)
        if r["causes"]:
            print(f"{'':40s}from: " + ", ".join(f"{c['ablation']} {c['share']:.2f}" for c in r["causes"]), flush=True)
    print(f"\noutputs {len(new) + len(bitwise)}; bitwise equal to the GPU (observed 0, no ratio) {len(bitwise)}"
          f" (envelope 0 on {sum(r['envelope'] == 0 for r in bitwise)}); of the {len(new)} that differ:")
    for name, xs in (("all elements (before)", old), ("magnitude bands (stated)", new), ("worst band", band)):
        print("  " + _stats(name, xs))
    _causes_summary([r for r in res if "error" not in r and r["observed"] != 0])
    cpu = {r["task"]: r["cpu"] for r in res if "cpu" in r}
    print(f"review CPU: {sum(cpu.values()):.1f} s over {len(cpu)} reviews")


def _causes_summary(rows: list[dict[str, Any]]) -> None:
    """What the differences come from (the envelope line's ablations): the top named cause per output, and the
    shares of the ablations not named (how much an ablation with no part in a difference removes by chance)."""
    from collections import Counter

    from nkieval.cuda.ablate import NAMED_SHARE

    tops = Counter()
    rest: list[float] = []
    n_named = n_port = 0
    for r in rows:
        causes = r["causes"]
        named = [c for c in causes if c["share"] >= NAMED_SHARE]
        ported = any(c.get("side") == "port" for c in causes)
        # (no port ablation ran: the line names "the port's side" as a whole, as before the port's ablations)
        tops[named[0]["ablation"] if named else ("none named" if ported else "port's side" if causes
                                                 else "not attributed")] += 1
        n_named += bool(named)
        n_port += any(c.get("side") == "port" for c in named)
        rest += [c["share"] for c in causes if c["share"] < NAMED_SHARE]
    print(f"what the {len(rows)} differences come from (top named ablation): "
          + ", ".join(f"{k} {v}" for k, v in tops.most_common()))
    print(f"  a cause named on {n_named}/{len(rows)}; a port-side cause among them on {n_port}")
    if rest:
        print(f"  shares of the ablations not named: min {min(rest):.3f} median {statistics.median(rest):.3f} "
              f"max {max(rest):.3f} ({len(rest)})")


if __name__ == "__main__":
    main()
