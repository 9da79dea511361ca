"""Simulator speed and memory on the slowest public cases, as ratios to a baseline tree run in the same invocation.

Issue 31 item 3. The slowest public test cases found so far (``docs/compat-public.md``) are:

* nki-samples (``fc5c69f``) ``test_flash_attn_bwd.py`` at 8 heads, 2 kv heads, 8,192 tokens (full window, with
  and without sinks; 80 s of simulator CPU each, the test's own reference is 12+ GB) and its 4,096-token cases;
* nki-library (``d2ad3a5``) ``TestMoeBlockwiseMatMulLnc2`` (the two LNC-2 blockwise-matmul MoE cases in the
  fast sample; 157 s wall under load, most of it the library's harness and torch reference).

Each case runs in a fresh child process, once with the nkieval source tree under test and once with
``--baseline-src`` (another checkout's ``src``, e.g. a ``git worktree`` of main), alternating, so both see the
same machine load. The child measures **CPU time of the simulation alone** (``time.process_time`` around the
simulator's ``run_kernel``: every LNC thread, not the test's inputs or reference) and the process's **peak
RSS** (``ru_maxrss``; for library cases that includes the harness and its torch reference), and, sampled every
20 ms while the simulator runs, the resident memory at its entry and its peak there: the difference is the
simulator's own share of the case's memory (the rest is the test's inputs, reference and harness). It also prints a
digest of the kernel's outputs, so the two trees are shown to compute the same bits.

Nothing is downloaded and no public code is copied: the checkouts are arguments.

Run::

    .venv/bin/python benchmarks/sim_speed_public.py --samples-ci SAMPLES_CI [--library LIB --library-env ENV] \
        --baseline-src BASE/src [--cases bwd-8x2-4096,moe-lnc2-i2048] [--repeat 1] [--check-trace]

(torch CPU and the library harness's other dependencies on ``PYTHONPATH``, as for ``public_compat.py``.)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

_MOE = ("test/integration/nkilib/core/moe/moe_cte/test_moe_cte.py::TestMoeBlockwiseMatMulLnc2::"
        "test_moe_blockwise_mm_kernel_lnc2[BWMMFunc.SHARD_ON_INTERMEDIATE-3072-1024-8-512-4-{}-None-None-None-None-False]")

_RMSNORM_QUANT = ("test/integration/nkilib/core/rmsnorm/test_rmsnorm_quant.py::TestRmsNormQuantKernel::"
                  "test_rmsnorm_quant_vnc_unit[{}-0.0-2-1-16384-896-QuantizationType.ROW]")

#: name -> (suite, parameters). flash bwd: (heads, kv heads, seqlen, sliding window, sinks)
CASES: dict[str, tuple[str, Any]] = {
    "bwd-8x2-8192": ("samples", (8, 2, 8192, -1, False)),
    "bwd-8x2-8192-sinks": ("samples", (8, 2, 8192, -1, True)),
    "bwd-8x2-4096": ("samples", (8, 2, 4096, -1, False)),
    "bwd-4x1-4096-sw128-sinks": ("samples", (4, 1, 4096, 128, True)),
    "moe-lnc2-i2048": ("library", _MOE.format(
        "2048-dtype0-0-True-False-None-ActFnType.SiLU-ExpertAffinityScaleMode.POST_SCALE")),
    "moe-lnc2-i3072": ("library", _MOE.format(
        "3072-dtype39-1-False-True-None-ActFnType.Swish-ExpertAffinityScaleMode.POST_SCALE")),
    # LNC-2 RMSNorm + fp8 row quantisation of [seqlen, 16384]; the library skips both in simulation (their
    # names hold 16384) unless NKILIB_SIMULATION_RUN_ALL=1, which the child sets
    "rmsnorm-quant-2048": ("library", _RMSNORM_QUANT.format(2048)),
    "rmsnorm-quant-32768": ("library", _RMSNORM_QUANT.format(32768)),
}
DEFAULT = "bwd-8x2-8192,bwd-8x2-8192-sinks,bwd-8x2-4096,moe-lnc2-i2048,moe-lnc2-i3072"


# -- child: one case in this process ---------------------------------------------------------------------
def _rss_mb() -> float:
    """This process's resident set now (Linux ``/proc/self/statm``), in MB."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


class _RssSampler:
    """The most resident memory seen while the simulator runs (sampled every 20 ms by a thread), so a case's
    peak can be split into the simulator's part and the test's own (inputs, reference, harness)."""

    def __init__(self) -> None:
        self.peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, _rss_mb())

    def __enter__(self) -> _RssSampler:
        self.peak = _rss_mb()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss_mb())


class _SimClock:
    """CPU seconds spent inside the simulator's run_kernel (all threads), a digest of its outputs, and the
    resident memory at its entry and at its peak (sampled)."""

    def __init__(self, check_trace: bool = False) -> None:
        self.cpu = 0.0
        self.calls = 0
        self.digest = hashlib.sha256()
        # with check_trace, also a digest of each run's whole trace (its JSON export: every record, allocation
        # and warning, per program: _per_program); off by default, as the export would count in the peak memory
        self.trace_digest = hashlib.sha256() if check_trace else None
        self.entry_rss = 0.0  # MB, at the entry of the run with the highest peak
        self.sim_peak_rss = 0.0  # MB, the most seen during any run

    def install(self) -> None:
        import nkieval.frontends.beta1.launch as b1
        import nkieval.frontends.nki as cur
        import nkieval.sim.runner as runner

        real = runner.run_kernel

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.process_time()
            sampler = _RssSampler()
            try:
                with sampler:
                    entry = sampler.peak
                    res = real(*args, **kwargs)
            finally:
                self.cpu += time.process_time() - t0
                self.calls += 1
                if sampler.peak > self.sim_peak_rss:
                    self.sim_peak_rss, self.entry_rss = sampler.peak, entry
            for out in _arrays(res.outputs):
                self.digest.update(out.tobytes())
            if self.trace_digest is not None:
                self.trace_digest.update(json.dumps(_per_program(json.loads(res.trace.to_json()))).encode())
            return res

        for mod in (runner, b1, cur):
            mod.run_kernel = timed  # type: ignore[attr-defined]


_RACY = ("id", "program", "alloc_seq", "free_seq")  # an HBM allocation's fields that depend on thread timing


def _per_program(doc: dict[str, Any]) -> dict[str, Any]:
    """A trace's JSON export with each program's records and allocations on their own, numbered within the
    program: LNC-2 programs run in two threads, so how their records interleave (the global ``seq``, the
    allocation ids) changes from run to run; what each program did, in its own order, does not."""
    import bisect

    recs, allocs = doc["records"], doc["allocations"]
    out: dict[str, Any] = {k: v for k, v in doc.items() if k not in ("records", "allocations", "warnings")}
    out["warnings"] = sorted(json.dumps(w, sort_keys=True) for w in doc["warnings"])
    # HBM tensors are the launch's: which program made a shared one first is a race between the LNC threads, so
    # they are listed once, without program, id or position, and operands name them by what they are
    hbm = {a["id"]: "hbm " + json.dumps({k: v for k, v in a.items() if k not in _RACY}, sort_keys=True)
           for a in allocs if a["buffer"] == "hbm"}
    out["hbm allocations"] = sorted(hbm.values())
    for p in sorted({r["program"] for r in recs} | {a["program"] for a in allocs if a["id"] not in hbm}):
        mine = [r for r in recs if r["program"] == p]
        seqs = [r["seq"] for r in mine]
        made = sorted((a for a in allocs if a["program"] == p and a["id"] not in hbm),
                      key=lambda a: (a["alloc_seq"], a["id"]))
        ids: dict[int, Any] = {**hbm, **{a["id"]: i for i, a in enumerate(made)}}

        def local(seq: int | None, seqs: list[int] = seqs) -> int | None:
            return None if seq is None else bisect.bisect_left(seqs, seq)

        out[f"allocations {p}"] = [{**a, "id": ids[a["id"]], "alloc_seq": local(a["alloc_seq"]),
                                    "free_seq": local(a["free_seq"])} for a in made]
        out[f"records {p}"] = [{**r, "seq": None, "operands": [{**o, "alloc": ids.get(o["alloc"], f"other {o['alloc']}")}
                                                              for o in r["operands"]]} for r in mine]
    return out


def _arrays(x: Any) -> list[Any]:
    import numpy as np

    if isinstance(x, np.ndarray):
        return [x]
    if isinstance(x, list | tuple):
        return [a for v in x for a in _arrays(v)]
    return []


def _flash_bwd(params: tuple[int, int, int, int, bool]) -> None:
    import numpy as np
    from neuronxcc.nki import baremetal, simulate_kernel
    from nki_samples.reference.attention import flash_attn_bwd

    nheads, nheads_kv, seqlen, sliding_window, sinks = params
    bs, d = 1, 128
    rng = np.random.default_rng(0)

    def rand(h: int) -> np.ndarray:
        return ((rng.random([bs, h, d, seqlen]) - 0.5) * 2).astype(np.float32)

    q, k, v, dy, o = rand(nheads), rand(nheads_kv), rand(nheads_kv), rand(nheads), rand(nheads)
    lse = rng.random([bs, nheads, 128, seqlen // 128]).astype(np.float32)
    sinks_t = rng.standard_normal((bs, nheads)).astype(np.float32) if sinks else None
    simulate_kernel(baremetal(flash_attn_bwd)[bs, nheads_kv], q, k, v, o, dy, lse, None, use_causal_mask=True,
                    mixed_precision=True, sliding_window=sliding_window, sinks=sinks_t)


def _library_case(node: str) -> None:
    import pytest

    code = pytest.main(["-q", "-p", "no:cacheprovider", "-p", "nk_compat_plugin", "--nki-sim", node,
                        "--test-mode", "simulation"])
    if code != 0:
        raise SystemExit(f"library case did not pass (pytest exit {code})")


def child(name: str, check_trace: bool = False) -> int:
    from nkieval import frontends

    frontends.install(force=True)
    clock = _SimClock(check_trace)
    clock.install()
    suite, params = CASES[name]
    if suite == "samples":
        _flash_bwd(params)
    else:
        _library_case(params)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("RESULT " + json.dumps({"cpu_s": round(clock.cpu, 2), "peak_rss_mb": round(rss), "runs": clock.calls,
                                  "sim_entry_rss_mb": round(clock.entry_rss), "sim_peak_rss_mb": round(clock.sim_peak_rss),
                                  "digest": clock.digest.hexdigest()[:16],
                                  "trace": clock.trace_digest.hexdigest()[:16] if clock.trace_digest else None}),
          flush=True)
    return 0


# -- parent ----------------------------------------------------------------------------------------------
def run_case(name: str, src: Path, args: argparse.Namespace) -> dict[str, Any]:
    suite, _ = CASES[name]
    paths = [str(src)]
    cwd = None
    if suite == "samples":
        paths.append(str(args.samples_ci / "src"))
    else:
        paths += [str(args.library_env), str(args.library / "src")]
        cwd = str(args.library)
    env = dict(os.environ, OPENBLAS_NUM_THREADS=os.environ.get("OPENBLAS_NUM_THREADS", "1"),
               PYTHONPATH=os.pathsep.join([*paths, os.environ.get("PYTHONPATH", "")]), NKILIB_SIMULATION_RUN_ALL="1")
    extra = ["--check-trace"] if args.check_trace else []
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", name, *extra], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=args.timeout)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    tail = (proc.stdout + proc.stderr).strip().splitlines()[-5:]
    return {"error": f"exit {proc.returncode}: " + " | ".join(tail)}


def _sim_rss(r: dict[str, Any]) -> str:
    return f"{r.get('sim_entry_rss_mb', '?')} -> {r.get('sim_peak_rss_mb', '?')}"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--child"]:
        return child(argv[1], "--check-trace" in argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples-ci", type=Path, help="checkout of nki-samples at fc5c69f")
    ap.add_argument("--library", type=Path, help="checkout of aws-neuron/nki-library (d2ad3a5)")
    ap.add_argument("--library-env", type=Path, help="directory of stand-ins the library harness imports")
    ap.add_argument("--baseline-src", type=Path, required=True, help="the baseline nkieval tree's src directory")
    ap.add_argument("--cases", default=DEFAULT, help=f"comma-separated, of: {', '.join(CASES)}")
    ap.add_argument("--repeat", type=int, default=1, help="runs per tree and case (the minimum CPU is kept)")
    ap.add_argument("--timeout", type=float, default=3600.0)
    ap.add_argument("--check-trace", action="store_true",
                    help="also compare the two trees' traces (a digest of each run's JSON export; peak memory "
                         "then includes the export's text)")
    args = ap.parse_args(argv)
    this_src = Path(__file__).resolve().parents[1] / "src"
    names = [n for n in args.cases.split(",") if n]
    for n in names:
        if n not in CASES:
            ap.error(f"unknown case {n!r}")
        if CASES[n][0] == "samples" and not args.samples_ci:
            ap.error(f"{n} needs --samples-ci")
        if CASES[n][0] == "library" and not (args.library and args.library_env):
            ap.error(f"{n} needs --library and --library-env")
    print("| case | baseline CPU s | this tree CPU s | speed-up | baseline peak RSS MB | this tree peak RSS MB "
          "| RSS ratio | simulation RSS MB, entry -> peak: baseline; this tree | outputs |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n in names:
        runs: dict[str, list[dict[str, Any]]] = {"base": [], "this": []}
        for _ in range(args.repeat):
            runs["base"].append(run_case(n, args.baseline_src.resolve(), args))
            runs["this"].append(run_case(n, this_src, args))
        errs = [r["error"] for rs in runs.values() for r in rs if "error" in r]
        if errs:
            print(f"| {n} | error: {errs[0]} ||||||||", flush=True)
            continue
        b = min(runs["base"], key=lambda r: r["cpu_s"])
        t = min(runs["this"], key=lambda r: r["cpu_s"])
        same = "identical" if {r["digest"] for rs in runs.values() for r in rs} == {b["digest"]} else "DIFFER"
        if args.check_trace:
            same += "; traces " + ("identical" if {r["trace"] for rs in runs.values() for r in rs} == {b["trace"]}
                                   else "DIFFER")
        print(f"| {n} | {b['cpu_s']:.1f} | {t['cpu_s']:.1f} | {b['cpu_s'] / t['cpu_s']:.2f}x | {b['peak_rss_mb']} | "
              f"{t['peak_rss_mb']} | {t['peak_rss_mb'] / b['peak_rss_mb']:.2f} | {_sim_rss(b)}; {_sim_rss(t)} | {same} |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
