"""Time and memory of one ``check`` on 10^7-element outputs (issue 5, Acceptance).

For each op: wall time of ``nkieval.numerics.check`` and its peak traced memory (NumPy
reports its buffers to ``tracemalloc``), relative to the bytes of the arrays handed in
(inputs + the kernel output). The kernel outputs are computed beforehand and not timed.
Usage::

    .venv/bin/python benchmarks/numerics_scale.py [--elements 10000000]
"""

from __future__ import annotations

import argparse
import time
import tracemalloc
from collections.abc import Callable

import ml_dtypes
import numpy as np

from nkieval.numerics import PrecisionRecipe, check, generate, matmul_inputs
from nkieval.numerics.formats import round_to
from nkieval.numerics.oracle import ACTIVATIONS


def _bytes(*arrays: np.ndarray) -> int:
    return sum(np.asarray(a).nbytes for a in arrays)


def run(name: str, actual: np.ndarray, inputs: list[np.ndarray], fn: Callable[[], object]) -> None:
    tracemalloc.start()
    t0, c0 = time.perf_counter(), time.process_time()
    v = fn()
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    given = _bytes(actual, *inputs)
    print(f"{name:<40}{actual.size:>11,}{dt:>8.2f}{cpu:>8.2f}{peak / 2**20:>10.0f}{given / 2**20:>8.0f}"
          f"{peak / given:>8.2f}  {v.status}")  # type: ignore[attr-defined]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--elements", type=int, default=10_000_000)
    n = ap.parse_args().elements
    print(f"{'case':<40}{'elements':>11}{'wall s':>8}{'cpu s':>8}{'peak MiB':>10}{'in MiB':>8}{'peak/in':>8}  status")

    # matmul, bf16 in, fp32 accumulation, fp32 out: n outputs
    k = 256
    m = 2048
    cols = max(1, n // m)
    a, b = matmul_inputs("normal", m, k, cols, "bf16", seed=1)
    y = a.astype(np.float32) @ b.astype(np.float32)
    r = PrecisionRecipe(inputs="bf16", output="fp32")
    run(f"matmul bf16→fp32 {m}x{k}x{cols}", y, [a, b],
        lambda: check(y, [a, b], "matmul", r, input_family="normal"))

    # elementwise exp, bf16 in/out
    x = generate("normal", (n,), "bf16", seed=2)
    e = np.exp(x.astype(np.float32)).astype(ml_dtypes.bfloat16)
    rb = PrecisionRecipe(inputs="bf16", output="bf16")
    run("exp bf16", e, [x], lambda: check(e, [x], "exp", rb, input_family="normal"))

    # gelu_tanh fp32 (float64 oracle through the sigmoid form)
    x32 = generate("normal", (n,), "fp32", seed=3)
    g = round_to(ACTIVATIONS["gelu_tanh"].f(x32.astype(np.float64)), "fp32").astype(np.float32)
    run("gelu_apprx_tanh fp32", g, [x32], lambda: check(g, [x32], "gelu_tanh", PrecisionRecipe(),
                                                         input_family="normal"))

    # softmax over rows of 4096, fp32
    rows = max(1, n // 4096)
    xs = generate("normal", (rows, 4096), "fp32", seed=4)
    ex = np.exp(xs - xs.max(-1, keepdims=True))
    sm = ex / ex.sum(-1, keepdims=True)
    run(f"softmax fp32 {rows}x4096", sm, [xs], lambda: check(sm, [xs], "softmax", PrecisionRecipe(),
                                                             input_family="normal"))

    # layernorm over rows of 4096, fp32
    mu = xs.mean(-1, keepdims=True)
    ln = (xs - mu) / np.sqrt(((xs - mu) ** 2).mean(-1, keepdims=True) + np.float32(1e-5))
    run(f"layernorm fp32 {rows}x4096", ln, [xs], lambda: check(ln, [xs], "layernorm", PrecisionRecipe(),
                                                               input_family="normal"))

    # full reduction of n one-signed fp32 inputs (N(0,1) data would sum to rounding noise)
    xu = generate("uniform", (n,), "fp32", seed=5)
    s = np.array(xu.sum(dtype=np.float32))
    run(f"sum fp32 over {n:,} inputs", s, [xu],
        lambda: check(s, [xu], "sum", PrecisionRecipe(), input_family="uniform", axis=None))


if __name__ == "__main__":
    main()
