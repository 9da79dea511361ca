"""What the cause search beyond constants costs: per flawed port of the acceptance set, the CPU seconds of the
reviewing thread spent in ``mutation_causes`` (cold: each port reviewed in a fresh process, so no mutant run
is kept from another review), and the cause it stated.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/cuda_cause_search_cost.py \
        [--ports rmsnorm_warp/bf16_square_sum,rope_half/bf16_products] [--seed 5] [--warm] [--compare-resume]

A name that is not a port task's is a built-in task's flawed candidate (``gemm_bf16/drops_k_tail``).
``--compare-resume`` reviews each port once more with every mutant run fresh (``/fresh``: no run resumed from the
unmutated kernel's state, :mod:`nkieval.cuda.resume`); the causes must be the same. ``--ab N``: after the cold
review, its search (the arguments the review passed) runs again 2N times in the same process, resumed and fresh
alternately, each with runs kept within the search only; the mean CPU of each (one process: the fairest
comparison on a loaded machine) and whether every repetition stated the same causes.

With ``--warm`` each port is also reviewed by warm judges, each in a fresh process that first reviews, untimed and
with the same seed, an RL loop's earlier candidates of the task, then the port, timed:

* ``others``: the task's other flawed ports (other flaws: they share only the mutants tried before their own
  cause was found);
* ``same``: the same and another sample with the same flaw (the port's text with a comment added: another
  source, the same kernel), as a policy's samples of one task often share a flaw.

Each once with the cause search's runs kept as ``review/stages/kept_runs.py`` keeps them and once as the judge
kept them before (``/before``: mutants' runs but not their timeouts, never the constant hypotheses'). The
figures are the CPU of the mutation search and of the constant hypotheses before it.

CPU time, not wall time: the figure does not depend on the machine's load.

``--baseline-src BASE/src`` reviews each port (cold) with another tree's ``nkieval`` too (e.g. ``git archive`` of main),
``--repeat N`` times each, the two trees alternating (A B B A ...) so that both see the same load: the median CPU of
each, their ratio, and whether both stated the same causes.
"""

from __future__ import annotations

import argparse
from concurrent.futures import ProcessPoolExecutor
from contextlib import nullcontext
from typing import Any

DEFAULT = ("rmsnorm_warp/bf16_square_sum,rope_half/bf16_products,online_softmax/bf16_exp,"
           "embedding_pos/bf16_rows,layernorm_block/unbiased_variance")
#: the judges a port is reviewed by with ``--warm``: (name, what is reviewed first, kept-runs mode)
JUDGES = (("cold", "", "full"), ("others", "others", "full"), ("others/before", "others", "before-kept"),
          ("same", "same", "full"), ("same/before", "same", "before-kept"))


def _one(job: tuple[str, int, str, str]) -> dict[str, Any]:
    import time

    import nkieval.review.stages.differential as differential
    from nkieval.review.pipeline import review
    from nkieval.tasks.loader import BUILTIN_ROOT, PORTS_ROOT, load_task

    port, seed, warm, mode, ab = job
    task_id, name = port.split("/")
    task = load_task((PORTS_ROOT if (PORTS_ROOT / task_id).is_dir() else BUILTIN_ROOT) / task_id)
    context: Any = nullcontext()
    if mode == "fresh":
        from nkieval.cuda.resume import ResumableRun

        ResumableRun.point = lambda self, source: None  # type: ignore[method-assign]  # (this process only)
    elif mode != "full":
        from review_throughput import kept_runs_mode, store_for_mode  # (this directory: the same judge modes)

        context = kept_runs_mode(mode, store_for_mode(mode))
    spent: dict[str, list[float]] = {"mutations": [], "constants": []}
    stated: list[str] = []
    inner, constants = differential.mutation_causes, differential._attribute

    calls: list[tuple[Any, dict[str, Any]]] = []

    def timed(*a: Any, **k: Any) -> list[dict[str, Any]]:
        calls.append((a, k))
        t0 = time.thread_time()
        out = inner(*a, **k)
        spent["mutations"].append(time.thread_time() - t0)
        stated.extend(c["mutation"] for c in out)
        return out

    def timed_constants(*a: Any, **k: Any) -> list[dict[str, Any]]:
        t0 = time.thread_time()
        out = constants(*a, **k)
        spent["constants"].append(time.thread_time() - t0)
        stated.extend(c["summary"][:60] for c in out)
        return out

    port_file = task.directory / "flawed" / f"{name}.py"
    with context:
        if warm == "others":
            for fl in task.flawed:
                if not fl.file.endswith(f"/{name}.py"):
                    review(str(task.directory), str(task.directory / fl.file), seed=seed, compare_references=False)
        elif warm == "same":
            sample = port_file.read_text() + "\n# another sample with the same flaw\n"
            review(str(task.directory), sample, seed=seed, compare_references=False)
        differential.mutation_causes, differential._attribute = timed, timed_constants
        review(str(task.directory), str(port_file), seed=seed, compare_references=False)
    return {"port": port, "cpu_s": sum(spent["mutations"]), "constants_s": sum(spent["constants"]),
            "searched": bool(spent["mutations"]), "cause": stated[0] if stated else None,
            "ab": _alternate(inner, calls, ab) if ab and calls else None}


def _alternate(search: Any, calls: list[tuple[Any, dict[str, Any]]], rounds: int) -> dict[str, Any]:
    """The searches of ``calls`` run ``rounds`` times resumed and ``rounds`` times fresh, alternately: mean CPU
    seconds of each, and whether all stated the same causes."""
    import time

    from nkieval.cuda.resume import ResumableRun

    point = ResumableRun.point
    cpu = {"resume": 0.0, "fresh": 0.0}
    seen: set[str] = set()
    for r in range(rounds):
        for mode in (("resume", "fresh") if r % 2 == 0 else ("fresh", "resume")):
            ResumableRun.point = point if mode == "resume" else (lambda self, source: None)  # type: ignore
            t0 = time.thread_time()
            for a, k in calls:
                seen.add(repr([c["summary"] for c in search(*a, **{**k, "keep": False})]))
            cpu[mode] += time.thread_time() - t0
    ResumableRun.point = point  # type: ignore[method-assign]
    return {"resume_s": cpu["resume"] / rounds, "fresh_s": cpu["fresh"] / rounds, "same": len(seen) == 1}


def _use_tree(src: str) -> None:
    """Pool initializer: this process imports ``nkieval`` from ``src`` (before anything imports it)."""
    import sys

    sys.path.insert(0, src)


def _cold(port: str, seed: int, src: str | None) -> dict[str, Any]:
    """One cold review of ``port`` in a fresh process importing ``nkieval`` from ``src`` (None: this tree)."""
    import multiprocessing

    kw: dict[str, Any] = {"mp_context": multiprocessing.get_context("spawn")}
    if src is not None:
        kw.update(initializer=_use_tree, initargs=(src,))
    with ProcessPoolExecutor(1, **kw) as pool:
        return pool.submit(_one, (port, seed, "", "full", 0)).result()


def _against_baseline(ports: list[str], seed: int, base: str, repeat: int) -> None:
    import statistics

    for port in ports:
        cpu: dict[str, list[float]] = {"this": [], "base": []}
        causes: set[str] = set()
        for r in range(repeat):
            for tree in (("this", "base") if r % 2 == 0 else ("base", "this")):
                out = _cold(port, seed, base if tree == "base" else None)
                cpu[tree].append(out["cpu_s"])
                causes.add(repr(out["cause"]))
        a, b = statistics.median(cpu["this"]), statistics.median(cpu["base"])
        print(f"{port:36s} cause search CPU (median of {repeat}): this tree {a:6.2f} s, baseline {b:6.2f} s, "
              f"baseline / this {b / max(a, 1e-9):5.2f}x; causes {'the same' if len(causes) == 1 else 'DIFFERENT'}"
              f" ({next(iter(causes))[:70]})", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ports", default=DEFAULT)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--warm", action="store_true", help="also review each port after the task's other flawed "
                    "ports in one process, with the cause search's runs kept as now and as before")
    ap.add_argument("--compare-resume", action="store_true", help="also review each port (cold) with every mutant "
                    "run fresh, none resumed from the unmutated kernel's state")
    ap.add_argument("--ab", type=int, default=0, help="rounds of the cold review's search replayed resumed and fresh")
    ap.add_argument("--baseline-src", default=None, help="another tree's src: each port reviewed cold with it too")
    ap.add_argument("--repeat", type=int, default=3, help="with --baseline-src: reviews per port and tree")
    a = ap.parse_args()
    if a.baseline_src:
        _against_baseline([p for p in a.ports.split(",") if p], a.seed, a.baseline_src, a.repeat)
        return
    judges = JUDGES if a.warm else JUDGES[:1]
    if a.compare_resume:
        judges = (*judges, ("cold/fresh", "", "fresh"))
    for port in [p for p in a.ports.split(",") if p]:
        for judge, warm, mode in judges:
            with ProcessPoolExecutor(1) as pool:  # (a fresh process per port and judge)
                r = pool.submit(_one, (port, a.seed, warm, mode, a.ab if judge == "cold" else 0)).result()
            what = "not searched" if not r["searched"] else (r["cause"] or "no cause")
            extra = f" + constants {r['constants_s']:6.2f} s" if a.warm else ""
            print(f"{r['port']:36s} {judge:<13} cause search {r['cpu_s']:6.2f} s CPU{extra}  {what[:100]}",
                  flush=True)
            if r["ab"] is not None:
                ab = r["ab"]
                print(f"{'':36s} {'same process':<13} search resumed {ab['resume_s']:6.2f} s, fresh {ab['fresh_s']:6.2f} s "
                      f"CPU (mean of {a.ab} each), causes {'the same' if ab['same'] else 'DIFFERENT'}", flush=True)


if __name__ == "__main__":
    main()
