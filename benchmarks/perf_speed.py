"""Scheduling throughput and memory of the performance model.

    .venv/bin/python benchmarks/perf_speed.py [--iters 25000] [--reps 5] [--bytecodes]

Prints instructions/s of ``schedule()`` and of the whole ``estimate()`` on a synthetic
load→activation→vector→store trace, the ratio to a plain Python loop over the same trace
(measured in the same run), the same for the trace read back from its compact form (what the
review harness schedules), ``schedule()`` with its Python loop (``_NATIVE`` off: the reference the
compiled loop is held to) against the compiled one, and peak traced memory for two trace lengths
(linearity). Then the same for a trace that over-subscribes SBUF (accumulators round-robin, more of them
than the usable SBUF holds): the spill estimate alone (compiled and Python loops), and ``estimate()``
with the spill traffic scheduled (``prefetch``) and with it only reported (``off``).
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "perf"))

from perf_helpers import TraceBuilder

from nkieval.hardware import get_target
from nkieval.perf import estimate
from nkieval.perf import schedule as sched_mod
from nkieval.perf import spill as spill_mod
from nkieval.perf.params import load_params
from nkieval.perf.schedule import SchedulePolicy, native_available, schedule
from nkieval.perf.spill import estimate_spill
from nkieval.sim.trace import Trace


def build(n_iters: int) -> TraceBuilder:
    b = TraceBuilder("trn2")
    src = b.alloc("hbm", (128, 512 * 64))
    out = b.alloc("hbm", (128, 512 * 64))
    for i in range(n_iters):
        t = b.alloc("sbuf", (128, 512), site="bench.py:1")
        u = b.alloc("sbuf", (128, 512), site="bench.py:2")
        c = (i % 64) * 512
        b.rec("dma_copy", "dma", [b.op(t, "dst", "w"), b.op(src, "src", "r", cols=(c, c + 512))], line=1)
        b.rec("activation", "scalar", [b.op(u, "dst", "w"), b.op(t, "data", "r")], line=2, op="exp")
        b.rec("tensor_scalar", "vector", [b.op(u, "dst", "w"), b.op(u, "data", "r")], line=3, op0="multiply")
        b.rec("dma_copy", "dma", [b.op(out, "dst", "w", cols=(c, c + 512)), b.op(u, "src", "r")], line=4)
        t.free_seq = u.free_seq = len(b.trace.records)
    return b


def build_oversubscribed(n_iters: int, n_acc: int = 64) -> TraceBuilder:
    """``n_acc`` fp32 [128, 1024] SBUF accumulators (4 KiB per partition each: 64 are 256 KiB, over trn2's usable
    208 KiB), zeroed, then one tile loaded and added into accumulator ``i % n_acc`` per iteration, then stored."""
    b = TraceBuilder("trn2")
    src = b.alloc("hbm", (128, 1024 * 64))
    out = b.alloc("hbm", (128, 1024 * n_acc))
    accs = [b.alloc("sbuf", (128, 1024), site="bench.py:1") for _ in range(n_acc)]
    for a in accs:
        b.rec("memset", "vector", [b.op(a, "dst", "w")], line=1, value=0.0)
    for i in range(n_iters):
        t = b.alloc("sbuf", (128, 1024), site="bench.py:2")
        c = (i % 64) * 1024
        a = accs[i % n_acc]
        b.rec("dma_copy", "dma", [b.op(t, "dst", "w"), b.op(src, "src", "r", cols=(c, c + 1024))], line=2)
        b.rec("tensor_tensor", "vector", [b.op(a, "dst", "w"), b.op(a, "data1", "r"), b.op(t, "data2", "r")],
              line=3, op="add")
        t.free_seq = len(b.trace.records)
    for k, a in enumerate(accs):
        b.rec("dma_copy", "dma", [b.op(out, "dst", "w", cols=(k * 1024, (k + 1) * 1024)), b.op(a, "src", "r")],
              line=4)
    b.trace.peak_sbuf_bytes = (n_acc + 1) * 4096
    return b


def switched(module, native: bool, fn):
    """``fn()`` with ``module``'s compiled loops on or off (its ``_NATIVE`` switch), restored after."""
    on = module._NATIVE
    module._NATIVE = native
    try:
        return fn()
    finally:
        module._NATIVE = on


def memory_per_instruction(make, iters: int, what: str) -> None:
    """Peak traced memory of ``estimate()`` on ``make(k).trace`` for k = iters / 4 and iters (linearity)."""
    for k in (iters // 4, iters):
        small = make(k).trace
        tracemalloc.start()
        estimate(small)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(f"peak memory of estimate(){what} for {len(small):7d} instructions: {peak / 1e6:7.1f} MB "
              f"({peak / len(small):.0f} B/instruction)")


def plain_loop(tr) -> int:
    """The baseline: a plain Python loop over the trace's records and operands."""
    s = 0
    for r in tr.records:
        for o in r.operands:
            s += o.nbytes
    return s


def best(fns: list, reps: int) -> list[float]:
    """Least CPU time of each function over ``reps`` rounds, the functions interleaved within a round (so
    that a load on the machine weighs on all of them alike)."""
    ts = [float("inf")] * len(fns)
    for _ in range(reps):
        for k, fn in enumerate(fns):
            t0 = time.process_time()
            fn()
            ts[k] = min(ts[k], time.process_time() - t0)
    return ts


def bytecodes_per_instruction(tr, fn) -> float:
    """Python bytecode instructions executed per trace instruction by ``fn()`` (all frames it runs; counted
    with ``sys.settrace`` opcode events): a machine-independent measure of the interpreter work, which a
    noisy machine's timings cannot resolve to a few per cent."""
    count = 0

    def local(frame, event, arg):
        nonlocal count
        if event == "opcode":
            count += 1
        return local

    def call(frame, event, arg):
        frame.f_trace_opcodes = True
        return local

    fn()  # (warm: first-call imports and caches not counted)
    sys.settrace(call)
    try:
        fn()
    finally:
        sys.settrace(None)
    return count / len(tr)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=25_000)
    ap.add_argument("--reps", type=int, default=5, help="rounds; each time is the least over the rounds")
    ap.add_argument("--bytecodes", action="store_true",
                    help="also count the bytecode instructions schedule() executes per trace instruction (2,000 "
                         "iterations; deterministic)")
    a = ap.parse_args()
    b = build(a.iters)
    tr = b.trace
    n = len(tr)
    p = load_params(get_target("trn2"))

    # the same records as the review harness receives them: read back from the sandbox's compact form (objects
    # made column by column, in order; the builder's are made record by record)
    dec = Trace.from_compact(tr.to_compact())

    def python_loop(trace):
        return switched(sched_mod, False, lambda: schedule(trace, p))

    t_plain, t_sched, t_est, t_plain_dec, t_sched_dec, t_py = best(
        [lambda: plain_loop(tr), lambda: schedule(tr, p), lambda: estimate(tr), lambda: plain_loop(dec),
         lambda: schedule(dec, p), lambda: python_loop(tr)], a.reps)
    print(f"trace: {n} instructions; scheduler loop: {'compiled' if native_available() else 'Python (not built)'}")
    print(f"plain loop over records/operands: {n / t_plain:12,.0f} instr/s")
    print(f"schedule():                       {n / t_sched:12,.0f} instr/s  ({t_sched / t_plain:.1f}x the plain loop)")
    print(f"estimate() (schedule + metrics):  {n / t_est:12,.0f} instr/s  ({t_est / t_plain:.1f}x the plain loop)")
    print(f"read back from the compact form:  schedule() {n / t_sched_dec:,.0f} instr/s  "
          f"({t_sched_dec / t_plain_dec:.1f}x its plain loop at {n / t_plain_dec:,.0f} instr/s)")
    print(f"schedule() with the Python loop: {n / t_py:12,.0f} instr/s  ({t_py / t_plain:.1f}x the plain loop; "
          f"the compiled loop {t_py / t_sched:.2f}x as fast)")
    if a.bytecodes:
        small = build(2_000).trace
        per = bytecodes_per_instruction(small, lambda: schedule(small, p))
        per_py = bytecodes_per_instruction(small, lambda: python_loop(small))
        print(f"schedule(): {per:.1f} bytecode instructions executed per trace instruction ({len(small)} instructions; "
              f"{per_py:.1f} with the Python loop)")
    memory_per_instruction(build, a.iters, "")
    oversubscribed(a.iters, a.reps, p)


def oversubscribed(iters: int, reps: int, p) -> None:
    """Speed of the spill estimate and of estimates that carry one, on a trace over the usable SBUF."""
    tr = build_oversubscribed(iters).trace
    n = len(tr)
    cap = int(p.sbuf_usable_bytes_per_partition)

    def walk(native: bool):
        return switched(spill_mod, native, lambda: estimate_spill(tr, cap))

    sp = walk(True)
    t_plain, t_c, t_py, t_pre, t_off = best(
        [lambda: plain_loop(tr), lambda: walk(True), lambda: walk(False),
         lambda: estimate(tr), lambda: estimate(tr, policy=SchedulePolicy(spill_traffic="off"))], reps)
    walk_kind = "compiled loops" if spill_mod._schedule_c is not None else "Python (not built)"
    print(f"over-subscribed trace: {n} instructions, SBUF peak {tr.peak_sbuf_bytes:,} B/partition against "
          f"{cap:,} usable; spill {sp.save_bytes / 1e6:.0f} MB saved, {sp.reload_bytes / 1e6:.0f} MB reloaded, "
          f"{sp.evictions} evictions")
    print(f"plain loop over records/operands: {n / t_plain:12,.0f} instr/s")
    print(f"estimate_spill(), {walk_kind}: {n / t_c:9,.0f} instr/s  ({t_c / t_plain:.1f}x the plain loop)")
    print(f"estimate_spill(), Python loops:  {n / t_py:12,.0f} instr/s  ({t_py / t_plain:.1f}x the plain loop; the "
          f"compiled ones {t_py / t_c:.2f}x as fast)")
    print(f"estimate(), spill scheduled:     {n / t_pre:12,.0f} instr/s  ({t_pre / t_plain:.1f}x the plain loop)")
    print(f"estimate(), spill_traffic='off': {n / t_off:12,.0f} instr/s  ({t_off / t_plain:.1f}x the plain loop)")
    memory_per_instruction(build_oversubscribed, iters, " with spill traffic")


if __name__ == "__main__":
    main()
