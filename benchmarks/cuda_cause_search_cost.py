"""What the cause search beyond constants costs: per flawed port of the acceptance set, the CPU seconds of the
reviewing thread spent in ``mutation_causes`` (cold: each port reviewed in a fresh process, so no mutant run
is kept from another review), and the cause it stated.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/cuda_cause_search_cost.py \
        [--ports rmsnorm_warp/bf16_square_sum,rope_half/bf16_products] [--seed 5]

CPU time, not wall time: the figure does not depend on the machine's load.
"""

from __future__ import annotations

import argparse
from concurrent.futures import ProcessPoolExecutor
from typing import Any

DEFAULT = ("rmsnorm_warp/bf16_square_sum,rope_half/bf16_products,online_softmax/bf16_exp,"
           "embedding_pos/bf16_rows,layernorm_block/unbiased_variance")


def _one(job: tuple[str, int]) -> dict[str, Any]:
    import time

    import nkieval.review.stages.differential as differential
    from nkieval.review.pipeline import review
    from nkieval.tasks.loader import PORTS_ROOT, load_task

    port, seed = job
    task_id, name = port.split("/")
    task = load_task(PORTS_ROOT / task_id)
    spent: list[float] = []
    stated: list[str] = []
    inner = differential.mutation_causes

    def timed(*a: Any, **k: Any) -> list[dict[str, Any]]:
        t0 = time.thread_time()
        out = inner(*a, **k)
        spent.append(time.thread_time() - t0)
        stated.extend(c["mutation"] for c in out)
        return out

    differential.mutation_causes = timed
    review(str(task.directory), str(task.directory / "flawed" / f"{name}.py"), seed=seed, compare_references=False)
    return {"port": port, "cpu_s": sum(spent), "searched": bool(spent), "cause": stated[0] if stated else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ports", default=DEFAULT)
    ap.add_argument("--seed", type=int, default=5)
    a = ap.parse_args()
    for port in [p for p in a.ports.split(",") if p]:
        with ProcessPoolExecutor(1) as pool:  # (a fresh process per port: a cold search)
            r = pool.submit(_one, (port, a.seed)).result()
        what = "not searched" if not r["searched"] else (r["cause"] or "no cause")
        print(f"{r['port']:36s} cause search {r['cpu_s']:6.2f} s CPU  {what[:120]}")


if __name__ == "__main__":
    main()
