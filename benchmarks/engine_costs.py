"""Engine costs, HFU and spill pricing: the model's figures before and after the round-2 changes, in one run.

    .venv/bin/python benchmarks/engine_costs.py [--target trn2]

For a few kernels of our own (defined below) prints the modelled Vector/Scalar busy time and total time with the
previous cost rules (two-input Vector instructions at the NeuronCore-v2 ``2N`` on every generation, the bf16 2x
mode at ``N``) and with the current ones (the documented data-path width per dtype); HFU against the BF16 peak
(the previous figure) and against the peak of the dtype used; and, for kernels that over-subscribe SBUF, the
spill traffic, total time and bottleneck label with the previous pricing (every evicted tile written on chip saved,
every evicted tile reloaded; the label the busiest resource alone) and the current one (what moves). The "before" figures come from swapping the
previous rules in for the duration of one estimate, so both columns see the same trace.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Iterator

import ml_dtypes
import numpy as np

from nkieval import frontends

frontends.install()

import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

from nkieval.examples import kernels as ex  # noqa: E402
from nkieval.perf import costs, estimate  # noqa: E402
from nkieval.perf import metrics as metrics_mod  # noqa: E402
from nkieval.perf import spill as spill_mod  # noqa: E402
from nkieval.perf.costs import Cost, free_elems, main_input  # noqa: E402
from nkieval.perf.params import PerfParams  # noqa: E402
from nkieval.sim.options import SimOptions  # noqa: E402
from nkieval.sim.trace import TraceRecord  # noqa: E402


# -- kernels of our own ------------------------------------------------------------------------------------------
@nki.jit
def scan_rows(a, b):
    """r[i] = a[i] * r[i-1] + b[i] along each row, tile by tile."""
    n, f = a.shape
    out = nl.ndarray((n, f), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n // 128):
        ta = nl.ndarray((128, f), dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray((128, f), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a[i * 128:(i + 1) * 128])
        nisa.dma_copy(dst=tb, src=b[i * 128:(i + 1) * 128])
        r = nl.ndarray((128, f), dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor_scan(dst=r, data0=ta, data1=tb, initial=0.0, op0=nl.multiply, op1=nl.add)
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128], src=r)
    return out


@nki.jit
def axpy_max(a, b):
    """max(a * 0.5, b) by scalar_tensor_tensor, then + b by tensor_tensor."""
    n, f = a.shape
    out = nl.ndarray((n, f), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n // 128):
        ta = nl.ndarray((128, f), dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray((128, f), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a[i * 128:(i + 1) * 128])
        nisa.dma_copy(dst=tb, src=b[i * 128:(i + 1) * 128])
        y = nl.ndarray((128, f), dtype=a.dtype, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(dst=y, data=ta, op0=nl.multiply, operand0=0.5, op1=nl.maximum, operand1=tb)
        nisa.tensor_tensor(dst=y, data1=y, data2=tb, op=nl.add)
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128], src=y)
    return out


F_SPILL, T_SPILL = 65536, 2048  # fp32: 256 KiB per partition, over the usable SBUF


@nki.jit
def zero_then_overwrite(x):
    out = nl.ndarray((128, F_SPILL), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, F_SPILL), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    for i in nl.affine_range(F_SPILL // T_SPILL):
        t = nl.ndarray((128, T_SPILL), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[:, i * T_SPILL:(i + 1) * T_SPILL])
        nisa.tensor_scalar(dst=acc[:, i * T_SPILL:(i + 1) * T_SPILL], data=t, op0=nl.multiply, operand0=2.0)
        nisa.dma_copy(dst=out[:, i * T_SPILL:(i + 1) * T_SPILL], src=acc[:, i * T_SPILL:(i + 1) * T_SPILL])
    return out


@nki.jit
def cyclic_passes(x):
    f, t = x.shape[1], 4096
    out = nl.ndarray((128, f), dtype=x.dtype, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, f), dtype=x.dtype, buffer=nl.sbuf)
    for i in nl.affine_range(f // t):
        nisa.dma_copy(dst=acc[:, i * t:(i + 1) * t], src=x[:, i * t:(i + 1) * t])
    for _ in range(3):
        for i in nl.affine_range(f // t):
            nisa.tensor_scalar(dst=acc[:, i * t:(i + 1) * t], data=acc[:, i * t:(i + 1) * t], op0=nl.add,
                               operand0=1.0)
    for i in nl.affine_range(f // t):
        nisa.dma_copy(dst=out[:, i * t:(i + 1) * t], src=acc[:, i * t:(i + 1) * t])
    return out


estimate_mod = sys.modules["nkieval.perf.estimate"]  # the module (the package exports the function under its name)


# -- the previous rules ------------------------------------------------------------------------------------------
def _n(rec: TraceRecord) -> int:
    src = main_input(rec)
    return free_elems(src) if src is not None else 1


def _prev_tensor_tensor(rec: TraceRecord, p: PerfParams) -> Cost:
    n = _n(rec)
    ins = [o for o in rec.operands if "r" in o.mode]
    mixed = len({o.buffer for o in ins}) > 1 and any(o.buffer == "psum" for o in ins)
    fast = mixed or (costs._all_two_byte(rec) and rec.attrs.get("op") in costs._FAST_TT_OPS
                     and costs._unit_stride(rec))
    mode = None
    if rec.engine == "vector" and p.vector_perf_modes and costs._all_two_byte(rec) and not costs._any_psum(rec):
        fast, mode = True, "2x"
    return costs._cycles_cost(rec, p, max(p.min_ii_cycles, n if fast else 2 * n), mode)


def _prev_scalar_tensor_tensor(rec: TraceRecord, p: PerfParams) -> Cost:
    n = _n(rec)
    fast = (costs._all_two_byte(rec) and rec.attrs.get("op0") == "subtract" and rec.attrs.get("op1") == "multiply"
            and n % 2 == 0)
    return costs._cycles_cost(rec, p, max(p.min_ii_cycles, n if fast else 2 * n))


def _prev_scan(rec: TraceRecord, p: PerfParams) -> Cost:
    return costs._cycles_cost(rec, p, max(p.min_ii_cycles, 2 * _n(rec)))


def _prev_copy_predicated(rec: TraceRecord, p: PerfParams) -> Cost:
    n = _n(rec)
    return costs._cycles_cost(rec, p, max(p.min_ii_cycles, n if costs._any_psum(rec) else 2 * n))


def _prev_event_flags(bits: np.ndarray) -> np.ndarray:
    """The previous spill pricing: any write not from HBM (memsets included) makes a tile dirty; nothing is known
    to be overwritten, so every evicted tile is reloaded."""
    dirty = (bits & (spill_mod.ROW_DIRTIES | spill_mod.ROW_CONSTANT)) != 0
    return (np.where(dirty, spill_mod.EV_DIRTIES, 0)
            | np.where((bits & spill_mod.ROW_WRITES) != 0, spill_mod.EV_WRITES, 0))


@contextlib.contextmanager
def previous_model() -> Iterator[None]:
    saved = dict(costs.COST_RULES)
    flags = spill_mod._event_flags
    costs.COST_RULES.update({"tensor_tensor": _prev_tensor_tensor, "scalar_tensor_tensor": _prev_scalar_tensor_tensor,
                             "tensor_tensor_scan": _prev_scan, "tensor_copy_predicated": _prev_copy_predicated})
    spill_mod._event_flags = _prev_event_flags
    # the previous bottleneck label: the busiest resource alone (no stall breakdown, no spill share)
    estimate_mod.classify = lambda util, *_: metrics_mod.classify(util)
    try:
        yield
    finally:
        costs.COST_RULES.clear()
        costs.COST_RULES.update(saved)
        spill_mod._event_flags = flags
        estimate_mod.classify = metrics_mod.classify


# -- the run -----------------------------------------------------------------------------------------------------
def _trace(kernel, target: str, *args, warn: bool = False):
    opts = {"options": SimOptions.from_env(capacity_check="warn")} if warn else {}
    nki.simulate(kernel, target=target, **opts)(*args)
    return nki.last_result().trace


def _cases(target: str) -> list[tuple[str, object]]:
    rng = np.random.default_rng(0)
    f32 = rng.standard_normal((1024, 2048)).astype(np.float32)
    b16 = f32.astype(ml_dtypes.bfloat16)
    g32 = np.abs(rng.standard_normal((512, 4096))).astype(np.float32) * 0.5
    return [
        ("tiled_add fp32 [1024, 2048]", _trace(ex.tiled_add, target, f32, f32)),
        ("tiled_add bf16 [1024, 2048]", _trace(ex.tiled_add, target, b16, b16)),
        ("scan_rows fp32 [512, 4096]", _trace(scan_rows, target, g32, g32)),
        ("axpy_max fp32 [1024, 2048]", _trace(axpy_max, target, f32, f32)),
        ("matmul fp32 [512x128]@[512x2048]", _trace(ex.matmul_bf16, target, f32[:512, :128].copy(),
                                                    rng.standard_normal((512, 2048)).astype(np.float32))),
        ("zero_then_overwrite fp32 (spill)", _trace(zero_then_overwrite, target,
                                                    np.ones((128, F_SPILL), np.float32), warn=True)),
        ("cyclic_passes bf16 (spill)", _trace(cyclic_passes, target,
                                              np.ones((128, 131072), ml_dtypes.bfloat16), warn=True)),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", default="trn2")
    args = ap.parse_args()
    t0 = time.process_time()
    cases = _cases(args.target)
    print(f"target {args.target}; before = previous rules, after = current (same trace)\n")
    head = (f"{'kernel':34} {'vector busy us':>21} {'ratio':>6} {'total us':>21} {'ratio':>6} "
            f"{'HFU % (bf16 peak -> dtype peak)':>32}")
    print(head)
    print("-" * len(head))
    spill_rows = []
    for name, tr in cases:
        with previous_model():
            before = estimate(tr, args.target)
        after = estimate(tr, args.target)
        vb, va = before.summary["vector_active_time"] * 1e6, after.summary["vector_active_time"] * 1e6
        tb, ta = before.total_time_ns / 1e3, after.total_time_ns / 1e3
        hfu = (f"{after.summary['hfu_bf16_peak_percent']:6.1f} -> {after.summary['hfu_estimated_percent']:6.1f}"
               if after.summary["hardware_flops"] else "-")
        print(f"{name:34} {vb:9.2f} -> {va:9.2f} {va / vb if vb else 1:6.2f} {tb:9.2f} -> {ta:9.2f} "
              f"{ta / tb:6.2f} {hfu:>32}")
        if after.summary["spill_evictions"] or before.summary["spill_evictions"]:
            spill_rows.append((name, before, after))
    print("\nspill (MB saved / reloaded / refilled; bottleneck)")
    for name, before, after in spill_rows:
        for label, e in (("before", before), ("after", after)):
            m = e.summary
            print(f"  {name:34} {label:6} {m['spill_save_bytes'] / 1e6:7.2f} / {m['spill_reload_bytes'] / 1e6:7.2f} / "
                  f"{m['spill_refill_bytes'] / 1e6:7.2f}  total {e.total_time_ns / 1e3:9.2f} us  "
                  f"{e.bottleneck.resource} ({e.bottleneck.bound}): {e.bottleneck.reason}")
    print(f"\nCPU time of this process {time.process_time() - t0:.1f} s")


if __name__ == "__main__":
    main()
