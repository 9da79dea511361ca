"""Simulator speed: overhead per small instruction and a 2048³ bf16 tiled matmul vs NumPy.

Prints:
* µs per small ``tensor_tensor`` ([128, 64] fp32 add), issued on the same tiles and on fresh
  slice views (a new view per call, as ``t[0:rows]`` in a loop does) — target ≤ 25 µs;
* wall time of ``matmul_bf16_resident`` (examples/acceptance.py) on 2048×2048×2048 bf16 and
  of NumPy doing the same tile-by-tile fp32 work (convert inputs to fp32, then per 128×512
  output tile 16 accumulating 128×128ᵀ·128×512 products), measured in the same run; the
  ratio sim / NumPy has a target of ≤ 2.0.

Run: ``.venv/bin/python benchmarks/sim_overhead.py [--repeat 3] [--size 2048] [--wall]``. BLAS
runs on one thread (override with OPENBLAS_NUM_THREADS) so that the ratio measures simulator
overhead. Times are this process's CPU time (``time.process_time``): with one BLAS thread that is
the work done, and it does not grow when other processes load the machine, as wall time does
(``--wall`` measures wall time instead).
"""

from __future__ import annotations

import argparse
import os
import time

# One BLAS thread: both sides of the ratio do the same fp32 products, and a shared machine's
# other processes make multi-threaded BLAS timings swing by several times.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402

from nkieval import frontends  # noqa: E402

frontends.install()

import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

from nkieval.examples.acceptance import matmul_bf16_resident  # noqa: E402

clock = time.process_time  # --wall: time.perf_counter


def _tt_kernel(a, n, fresh):
    t = nl.load(a)
    o = nl.ndarray(t.shape, dtype=nl.float32, buffer=nl.sbuf)
    p = t.shape[0]
    if fresh:
        for _ in range(n):
            nisa.tensor_tensor(dst=o[0:p], data1=t[0:p], data2=t[0:p], op=nl.add)
    else:
        for _ in range(n):
            nisa.tensor_tensor(dst=o, data1=t, data2=t, op=nl.add)


def us_per_tensor_tensor(n: int, fresh: bool, repeat: int) -> float:
    a = np.ones((128, 64), np.float32)
    best = float("inf")
    for _ in range(repeat):
        t0 = clock()
        nki.simulate(_tt_kernel)(a, n, fresh)
        dt = clock() - t0
        t1 = clock()
        nki.simulate(_tt_kernel)(a, 0, fresh)  # launch + load cost, subtracted
        base = clock() - t1
        best = min(best, (dt - base) / n)
    return best * 1e6


def numpy_tiled(a_t: np.ndarray, b: np.ndarray) -> np.ndarray:
    k, m = a_t.shape
    n = b.shape[1]
    af = a_t.astype(np.float32)
    bf = b.astype(np.float32)
    out = np.empty((m, n), np.float32)
    for mi in range(m // 128):
        for ni in range(n // 512):
            acc = np.zeros((128, 512), np.float32)
            for ki in range(k // 128):
                acc += af[ki * 128:(ki + 1) * 128, mi * 128:(mi + 1) * 128].T @ bf[ki * 128:(ki + 1) * 128,
                                                                                 ni * 512:(ni + 1) * 512]
            out[mi * 128:(mi + 1) * 128, ni * 512:(ni + 1) * 512] = acc
    return out


def matmul_ratio(size: int, repeat: int) -> tuple[float, float, int]:
    rng = np.random.default_rng(0)
    a_t = rng.standard_normal((size, size)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((size, size)).astype(ml_dtypes.bfloat16)
    sim_best = np_best = float("inf")
    out = ref = None
    for _ in range(repeat):
        t0 = clock()
        ref = numpy_tiled(a_t, b)
        np_best = min(np_best, clock() - t0)
        t0 = clock()
        out = nki.simulate(matmul_bf16_resident)(a_t, b)
        sim_best = min(sim_best, clock() - t0)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-3)
    n_instr = len(nki.last_result().trace.records)
    return sim_best, np_best, n_instr


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--size", type=int, default=2048)
    ap.add_argument("--n", type=int, default=5000, help="tensor_tensor calls per measurement")
    ap.add_argument("--wall", action="store_true", help="measure wall time instead of CPU time")
    args = ap.parse_args()
    global clock
    if args.wall:
        clock = time.perf_counter
    same = us_per_tensor_tensor(args.n, False, args.repeat)
    fresh = us_per_tensor_tensor(args.n, True, args.repeat)
    what = "wall time" if args.wall else "CPU time"
    print(f"[{what}] tensor_tensor [128, 64] fp32: {same:.1f} us/instruction (same tiles), "
          f"{fresh:.1f} us/instruction (fresh slice views)   target <= 25 us")
    sim_s, np_s, n_instr = matmul_ratio(args.size, args.repeat)
    s = args.size
    print(f"[{what}] matmul {s}x{s}x{s} bf16 (matmul_bf16_resident, {n_instr} instructions): simulator {sim_s:.3f} s, "
          f"NumPy tile-by-tile fp32 {np_s:.3f} s, ratio {sim_s / np_s:.2f}   target <= 2.0")


if __name__ == "__main__":
    main()
