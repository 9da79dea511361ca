"""What ``rotation_room="spill"`` changes on the built-in suite's performance verdicts, before it became the default.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/perf_rotation_room.py [--tasks 'rms*,softmax'] [--jsonl F]

Each expert and baseline kernel is traced once per declared target on the shape whose trace the review uses as its
evidence (the most compulsory HBM traffic, public first; first input family), record-only (no values), and that
one trace is estimated twice: ``SchedulePolicy(rotation_room="fit")`` and ``rotation_room="spill"``. Printed per
entry: both estimates and their ratio, the expert's percent of roofline both ways against the task's stated
fraction, and whether the expert stays faster than the baseline; then the count of estimates that moved, the
verdict changes (stated fraction missed, baseline no longer slower) and the roofline-fraction changes (min / median
/ max of spill/fit). Figures are model estimates on one trace, compared within this run. An entry that moves should
then be re-reviewed with ``nkieval suite run --tasks ...``; an entry whose estimate does not move cannot change
its verdict.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import fnmatch
import json
import statistics
import time
import warnings

from nkieval import frontends

frontends.install()

from nkieval.perf import estimate  # noqa: E402
from nkieval.perf.cli import _simulate, load_kernel  # noqa: E402
from nkieval.perf.schedule import SchedulePolicy  # noqa: E402
from nkieval.tasks.inputs import generate_inputs  # noqa: E402
from nkieval.tasks.loader import builtin_tasks  # noqa: E402


def _evidence_shape(task):
    """The review's evidence case (``review.stages.load.evidence_key``): most compulsory bytes, public first."""
    return max(task.shapes, key=lambda s: (sum(task.compulsory_bytes(s.dims)), not s.hidden))


def _pair(task, path, target) -> tuple[float, float, float, float, int]:
    """(fit ns, spill ns, fit % of roofline, spill % of roofline, records) of one kernel on one target."""
    case = _evidence_shape(task)
    specs = [(s.name, s.concrete(case.dims), s.dtype, s.family) for s in task.inputs]
    inputs = generate_inputs(specs, task.families[0], 0, case.label)
    obj, _ = load_kernel(f"{path}::{task.kernel}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = _simulate(obj, target, [inputs[s.name] for s in task.inputs], dict(task.params), None, None,
                        compute_values=False)
    out = []
    for room in ("fit", "spill"):
        e = estimate(res.trace, target, policy=SchedulePolicy(rotation_room=room))
        out.append((e.total_time_ns, float(e.to_dict()["summary"]["percent_of_roofline"])))
    return out[0][0], out[1][0], out[0][1], out[1][1], len(res.trace.records)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", default="*", help="comma-separated fnmatch patterns over task ids")
    ap.add_argument("--jsonl", default=None, help="also append one JSON line per entry to this file")
    a = ap.parse_args()
    pats = a.tasks.split(",")
    sink = open(a.jsonl, "a") if a.jsonl else None  # closed at the end
    moved: list[str] = []
    missed: list[str] = []
    not_slower: list[str] = []
    fraction_ratios: list[tuple[float, str]] = []
    t0 = time.process_time()
    for task in builtin_tasks():
        if not any(fnmatch.fnmatch(task.id, p) for p in pats) or not (task.solution_file and task.baseline_file):
            continue
        stated = task.perf.expert_roofline_fraction
        for target in task.targets:
            key = f"{task.id}@{target}"
            try:
                e = _pair(task, task.solution_file, target)
                b = _pair(task, task.baseline_file, target)
            except Exception as exc:  # a kernel this harness cannot run in-process: reported, not hidden
                print(f"{key:<36} not run: {type(exc).__name__}: {str(exc)[:100]}", flush=True)
                continue
            for label, r in (("expert", e), ("baseline", b)):
                if abs(r[1] / r[0] - 1) > 1e-9:
                    moved.append(f"{key} {label}")
            fraction_ratios.append((e[3] / e[2], key))
            if stated is not None and e[3] < 100 * stated <= e[2]:
                missed.append(key)
            if b[1] <= e[1]:
                not_slower.append(key)
            print(f"{key:<36} expert {e[0] / 1e3:9.2f} -> {e[1] / 1e3:9.2f} us ({e[1] / e[0]:.3f}x), "
                  f"{e[2]:5.1f} -> {e[3]:5.1f} % roofline (stated {100 * stated if stated else float('nan'):.0f}) | "
                  f"baseline {b[0] / 1e3:9.2f} -> {b[1] / 1e3:9.2f} us ({b[1] / b[0]:.3f}x) | "
                  f"baseline/expert {b[0] / e[0]:.2f} -> {b[1] / e[1]:.2f}", flush=True)
            if sink:
                sink.write(json.dumps({"key": key, "expert": e, "baseline": b, "stated": stated}) + "\n")
                sink.flush()
    ratios = sorted(r for r, _ in fraction_ratios)
    print(f"\n{len(fraction_ratios)} entries; {len(moved)} estimate(s) moved: {', '.join(moved) or 'none'}")
    print(f"stated fraction newly missed: {', '.join(missed) or 'none'}; baseline not slower with spill: "
          f"{', '.join(not_slower) or 'none'}")
    if ratios:
        print(f"expert % of roofline, spill / fit: min {ratios[0]:.3f}, median {statistics.median(ratios):.3f}, "
              f"max {ratios[-1]:.3f}; most moved: "
              + ", ".join(f"{k} {r:.3f}" for r, k in sorted(fraction_ratios, key=lambda x: -abs(x[0] - 1))[:5]))
    print(f"{time.process_time() - t0:.0f} s CPU")
    if sink:
        sink.close()


if __name__ == "__main__":
    main()
