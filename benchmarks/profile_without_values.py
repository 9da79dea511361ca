"""Estimating without executing: `nkieval profile --no-values` against `--values`, kernel by kernel.

A performance estimate needs the instruction stream, not the element values. `--no-values` runs the kernel
record-only (``SimOptions.compute_values=False``: every instruction is checked and traced, no value is computed
or stored, inputs are never filled), so a kernel at its published shape profiles in a fraction of the time and
memory of a computing run. For each case this prints, for both runs, the CPU time and peak RSS of the `nkieval
profile` process, the trace length, and the estimate; then the ratios (no-values / values) and whether the two
estimates agree (they must, unless the instruction stream depends on values: indirect-DMA addresses or
register-driven loops).

Cases are ``FILE::KERNEL`` with one input spec per argument (`nkieval profile --input` syntax). The default set is
our own kernels at large shapes; kernels of local checkouts of public repositories can be given with ``--case``
(nothing is downloaded):

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/profile_without_values.py
    .venv/bin/python benchmarks/profile_without_values.py --case \\
        'CHECKOUT/src/nki_samples/tutorials/attention_fwd_performance/attention_kernels.py::attn_fwd_v3 \\
         128x4096:bfloat16 128x4096:bfloat16 128x4096:bfloat16'

Goal (issue: estimate without executing): every public tutorial kernel at its published shape profiles in at most
30 s and 2 GB.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILTIN = ROOT / "src" / "nkieval" / "tasks" / "builtin"

#: our own kernels at shapes larger than any review uses
DEFAULT_CASES = [
    f"{BUILTIN}/gemm_bf16/solution_nki.py::gemm_bf16 2048x4096:bfloat16 2048x2048:bfloat16",
    f"{BUILTIN}/row_softmax/solution_nki.py::row_softmax 8192x8192:float32",
    f"{BUILTIN}/rmsnorm/solution_nki.py::rmsnorm 8192x4096:float32 4096:float32",
    f"{BUILTIN}/vector_add/solution_nki.py::vector_add 134217728:float32 134217728:float32",
]


def _profile(case: str, values: bool, out_dir: str) -> dict:
    ref, *specs = case.split()
    out = os.path.join(out_dir, f"est_{int(values)}.json")
    cmd = [sys.executable, "-m", "nkieval.cli", "profile", ref, *[a for s in specs for a in ("--input", s)],
           "--values" if values else "--no-values", "--json", out]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    stdout, stderr = proc.stdout.read(), proc.stderr.read()  # type: ignore[union-attr]
    wall = time.perf_counter() - t0
    row = {"cpu_s": usage.ru_utime + usage.ru_stime, "rss_mb": usage.ru_maxrss / 1024, "wall_s": wall,
           "ok": proc.returncode == 0}
    if proc.returncode != 0:
        row["error"] = (stderr or stdout).strip().splitlines()[-1:] or ["?"]
        return row
    est = json.loads(Path(out).read_text())
    row["total_us"] = est["total_time_ns"] / 1e3
    m = re.search(r"\((\d+) traced ->", stdout)
    row["instructions"] = int(m.group(1)) if m else None
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", action="append", help="'FILE::KERNEL SPEC [SPEC ...]' (repeatable; replaces the "
                    "default set)")
    ap.add_argument("--no-values-only", action="store_true", help="skip the computing run (for shapes whose "
                    "values would not fit in memory)")
    args = ap.parse_args()
    cases = args.case or DEFAULT_CASES
    print(f"{'kernel':<34} {'instr':>7} {'values: cpu s':>13} {'RSS MB':>8} {'no-values: cpu s':>16} "
          f"{'RSS MB':>8} {'cpu ratio':>9} {'RSS ratio':>9}  estimate")
    worst_cpu = worst_rss = 0.0
    for case in cases:
        name = case.split()[0].rsplit("::", 1)[-1]
        with tempfile.TemporaryDirectory() as tmp:
            dry = _profile(case, False, tmp)
            wet = _profile(case, True, tmp) if not args.no_values_only else None
        worst_cpu, worst_rss = max(worst_cpu, dry["cpu_s"]), max(worst_rss, dry["rss_mb"])
        if not dry["ok"] or (wet is not None and not wet["ok"]):
            print(f"{name:<34} failed: no-values {dry.get('error')} values {wet and wet.get('error')}")
            continue
        if wet is None:
            print(f"{name:<34} {dry['instructions'] or 0:>7} {'-':>13} {'-':>8} {dry['cpu_s']:>16.2f} "
                  f"{dry['rss_mb']:>8.0f} {'-':>9} {'-':>9}  {dry['total_us']:.1f} us")
            continue
        same = "same" if abs(wet["total_us"] - dry["total_us"]) <= 1e-9 * max(1.0, wet["total_us"]) else \
            f"DIFFERS ({wet['total_us']:.1f} vs {dry['total_us']:.1f} us)"
        print(f"{name:<34} {dry['instructions'] or 0:>7} {wet['cpu_s']:>13.2f} {wet['rss_mb']:>8.0f} "
              f"{dry['cpu_s']:>16.2f} {dry['rss_mb']:>8.0f} {dry['cpu_s'] / wet['cpu_s']:>9.2f} "
              f"{dry['rss_mb'] / wet['rss_mb']:>9.3f}  {dry['total_us']:.1f} us, {same}")
    print(f"worst no-values run: {worst_cpu:.1f} CPU s, {worst_rss:.0f} MB peak RSS (goal: <= 30 s, <= 2048 MB)")


if __name__ == "__main__":
    main()
