"""Is the third bf16 rounding of rmsnorm_warp's bf16_square_sum port observable, and does the cause search find
it where it is? The port rounds the mean of squares to bf16, then the mean plus eps, then the output; the
review states two of them (the mean plus eps, the output). Per shape of the task, on rows of N(0, 1) x 1e-3
(the review's tiny_magnitude edge input) and of N(0, 1) (its normal family), the port (the flawed file in the
simulator) is compared with the CUDA kernel carrying two and three of those roundings; then the cause search
(:func:`nkieval.review.stages.mutation_causes.mutation_causes`) runs on two tiny-magnitude inputs of a shape.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/cuda_third_rounding.py [--seed 0]
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import numpy as np

import nkieval

TASK = Path(nkieval.__file__).parent / "tasks" / "ports" / "rmsnorm_warp"
MEAN, MEAN_EPS, OUTPUT = "`ss / (float)n_cols` rounded to bf16", "`ss / (float)n_cols + 1e-6f` rounded to bf16", \
    "`xr[c] * inv_rms * (1.0f + w[c])` rounded to bf16"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    from nkieval.cuda import run_task_cuda
    from nkieval.cuda.mutate import combine_all, mutations
    from nkieval.cuda.program import preprocess
    from nkieval.frontends import install
    from nkieval.review.stages.differential import tolerance_ratios
    from nkieval.review.stages.mutation_causes import mutation_causes
    from nkieval.sim.runner import run_kernel
    from nkieval.tasks.loader import load_task

    install()
    task = load_task(TASK)
    spec = importlib.util.spec_from_file_location("bf16_square_sum", TASK / "flawed" / "bf16_square_sum.py")
    assert spec is not None and spec.loader is not None
    port_mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(port_mod)
    src = task.cuda_file.read_text()
    text = preprocess(src)
    by_what = {m.what: m for m in mutations(src) if m.kind == "precision"}
    two = combine_all([by_what[MEAN_EPS], by_what[OUTPUT]], text)
    three = combine_all([by_what[MEAN], by_what[MEAN_EPS], by_what[OUTPUT]], text)
    rng = np.random.default_rng(a.seed)
    shapes = [(1, 33), (130, 96), (256, 512)]
    runs = []
    print(f"{'shape':10s} {'inputs':8s} {'two roundings: not bitwise, max/tol':>38s} {'three':>24s}")
    for n, d in shapes:
        for family, scale in (("tiny", 1e-3), ("normal", 1.0)):
            x = (rng.standard_normal((n, d)) * scale).astype(np.float32)
            w = rng.standard_normal(d).astype(np.float32)
            out = run_kernel(port_mod.rmsnorm_warp, (x, w)).outputs  # (the one array the kernel returns)
            port = [np.asarray(out[0] if isinstance(out, list | tuple) else out)]
            cells = []
            for m in (two, three):
                g, _ = run_task_cuda(task, {"x": x, "w": w}, {"N": n, "D": d}, source=m.apply(text))
                _, ratio = tolerance_ratios(np.asarray(g[0], np.float64), np.asarray(port[0], np.float64),
                                            task.rtol, task.atol)
                same = np.asarray(g[0], np.float64) == np.asarray(port[0], np.float64)
                cells.append(f"{1 - same.mean():8.4f} {ratio.max():6.3g}")
            print(f"{n}x{d:<7d} {family:8s} {cells[0]:>38s} {cells[1]:>24s}")
            if family == "tiny" and n > 1:
                gpu, _ = run_task_cuda(task, {"x": x, "w": w}, {"N": n, "D": d})
                runs.append((f"tiny/{n}x{d}", {"N": n, "D": d}, {"x": x, "w": w}, gpu, port))
    causes = mutation_causes(task, src, runs, ["y"])
    print("\ncause search on the two multi-row tiny-magnitude inputs:",
          causes[0]["summary"][:400] if causes else "cause not identified")


if __name__ == "__main__":
    main()
