"""Simulator memory of kernels that place many logical tiles over a few physical slots (``address=``).

The NKI Library's modular allocator allocates one tile per logical block (every query group of every
section) over a few physical slots and keeps the nested list alive while it walks it. The simulator keeps one
storage per slot (``nkieval.sim.placed``), so its memory follows the device's slots, not the logical tiles.

For a growing number of logical [128, 2048] fp32 tiles over three slots, this prints the simulator's peak
traced memory (``tracemalloc``, inputs and outputs excluded: they are allocated before it starts and the
kernel's output is one tile) and the bytes the same tiles would take with a storage each; the ratio of the
largest run's peak to the smallest's shows whether memory grows with the logical tiles.

Run: ``OPENBLAS_NUM_THREADS=1 python benchmarks/sim_memory_placed.py [--tiles 12,48,192]``.
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc
import warnings

import numpy as np

import nkieval.frontends

nkieval.frontends.install(force=True)

import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

from nkieval.sim.runner import run_kernel  # noqa: E402

SLOTS = 3
FREE = 2048
TILE_BYTES = 128 * FREE * 4


def modular_kernel(n: int):
    def kernel(x):
        out = nl.ndarray((128, FREE), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.ndarray((128, FREE), dtype=nl.float32, buffer=nl.sbuf, address=(0, SLOTS * FREE * 4))
        nisa.memset(acc, 0.0)
        tiles = [nl.ndarray((128, FREE), dtype=nl.float32, buffer=nl.sbuf, address=(0, (i % SLOTS) * FREE * 4))
                 for i in range(n)]
        for t in tiles:
            nisa.dma_copy(dst=t, src=x)
            nisa.tensor_tensor(dst=acc, data1=acc, data2=t, op=nl.add)
        nisa.dma_copy(dst=out, src=acc)
        return out

    return kernel


def measure(n: int, x: np.ndarray) -> tuple[int, float]:
    gc.collect()
    tracemalloc.start()
    c0 = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = run_kernel(modular_kernel(n), (x,))
    cpu = time.process_time() - c0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    if not np.allclose(res.outputs, x * n):
        raise SystemExit(f"wrong output for {n} tiles")
    return peak, cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiles", default="12,48,192", help="numbers of logical tiles, comma-separated")
    args = ap.parse_args()
    counts = [int(v) for v in args.tiles.split(",")]
    x = np.random.default_rng(0).standard_normal((128, FREE)).astype(np.float32)
    print(f"| logical tiles over {SLOTS} slots | simulator peak MB | a storage per tile MB | CPU s |")
    print("|---|---|---|---|")
    peaks = []
    for n in counts:
        peak, cpu = measure(n, x)
        peaks.append(peak)
        print(f"| {n} | {peak / 2**20:.1f} | {n * TILE_BYTES / 2**20:.0f} | {cpu:.2f} |")
    print(f"peak ratio, {counts[-1]} tiles / {counts[0]} tiles: {peaks[-1] / peaks[0]:.2f} "
          f"(logical tiles ratio {counts[-1] / counts[0]:.0f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
