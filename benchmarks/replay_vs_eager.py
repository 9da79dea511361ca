"""The judge's replay of a recorded program against the eager run of the same kernel, in one process.

For each built-in candidate asked for (``task/label``, labels as ``nkieval.tasks.loader.candidate_files`` names
them: ``solution``, ``baseline``, ``flawed:<name>``), on the task's largest shape: CPU time of the eager run
(``run_kernel``), of recording the program with every instruction run and as the review's tracer records it
(``defer=True`` and no trace kept: the checks the replay makes left to it; the tracer's work, without its sandbox),
of parsing and compiling the program document, of a replay of the compiled program, and of an untraced replay (what
the judge's later cases of a static program cost: ``nkieval.review.executor.replay_options``); best of ``--repeat``
runs, as ratios to eager
measured in the same run (machines here are noisy; CPU time is steadier than wall time under load). The
collector runs with the thresholds the review's tracer and executor processes use
(``nkieval.review.child.GC_THRESHOLDS``).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/replay_vs_eager.py \\
        vector_add/flawed:thread_port gemm_bf16/solution causal_attention/solution gemm_bias_gelu/solution
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import time
import warnings
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from nkieval import frontends
from nkieval.review.child import GC_THRESHOLDS
from nkieval.sim.options import SimOptions
from nkieval.sim.program import ArgSpec, Program, compile_program, record_program, replay_program
from nkieval.sim.runner import run_kernel
from nkieval.tasks.inputs import generate_inputs
from nkieval.tasks.loader import builtin_tasks, candidate_files


def _kernel(path: Any, name: str) -> tuple[Any, int]:
    spec = importlib.util.spec_from_file_location(f"bench_{abs(hash(str(path)))}", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    fn = getattr(mod, name)
    return getattr(fn, "fn", fn), int(getattr(fn, "lnc", 1) or 1)


def _best(f: Callable[[], Any], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        f()
        best = min(best, time.process_time() - t0)
    return best


def measure(task_id: str, label: str, repeat: int) -> dict[str, float]:
    task = next(t for t in builtin_tasks() if t.id == task_id)
    fn, lnc = _kernel(candidate_files(task)[label], task.kernel)
    dims = max((dict(s.dims) for s in task.shapes), key=lambda d: sum(d.values()))
    specs = [(t.name, t.concrete(dims), t.dtype, t.family) for t in task.inputs]
    inputs = generate_inputs(specs, task.families[0], 1, "bench")
    args = [inputs[t.name] for t in task.inputs]
    params = dict(task.params)
    arg_specs = [ArgSpec(a.shape, a.dtype.name) for a in args]
    untraced = replace(SimOptions.from_env(), record_trace=False, capacity_check="off")
    text = record_program(fn, arg_specs, params, target="trn2", lnc=lnc).program.to_json()
    compiled = Program.from_json(text)
    compile_program(compiled)

    def eager() -> None:
        run_kernel(fn, [a.copy() for a in args], dict(params), target="trn2", lnc=lnc)

    def record() -> None:
        record_program(fn, arg_specs, params, target="trn2", lnc=lnc).program.to_json()

    def record_deferred() -> None:  # (as the review's tracer records: no trace kept)
        record_program(fn, arg_specs, params, target="trn2", lnc=lnc, defer=True,
                       options=SimOptions.from_env(record_trace=False)).program.to_json()

    def parse_compile() -> None:
        compile_program(Program.from_json(text))

    def replay() -> None:
        replay_program(compiled, [a.copy() for a in args], dict(params), target="trn2")

    def replay_untraced() -> None:
        replay_program(compiled, [a.copy() for a in args], dict(params), target="trn2", options=untraced)

    parts = (eager, record, record_deferred, parse_compile, replay, replay_untraced)
    for f in parts:  # first calls pay for imports and caches
        f()
    return {f.__name__: _best(f, repeat) for f in parts}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("candidates", nargs="+", help="task/label, e.g. gemm_bf16/solution")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    frontends.install(force=True)
    warnings.simplefilter("ignore")
    gc.set_threshold(*GC_THRESHOLDS)  # the collector's settings of the tracer and the executor
    print(f"{'candidate':<36} {'eager ms':>9} {'record':>7} {'deferred':>9} {'parse+compile':>14} {'replay':>7}"
          f" {'untraced':>9}   (ratios to eager)")
    for c in args.candidates:
        task_id, label = c.split("/", 1)
        m = measure(task_id, label, args.repeat)
        e = m["eager"]
        print(f"{c:<36} {e * 1000:9.1f} {m['record'] / e:7.2f} {m['record_deferred'] / e:9.2f} "
              f"{m['parse_compile'] / e:14.2f} {m['replay'] / e:7.2f} {m['replay_untraced'] / e:9.2f}")


if __name__ == "__main__":
    main()
