"""Does the migration criterion name semantic port mistakes?

    python benchmarks/cuda_port_acceptance.py --set ports [--tasks rmsnorm_warp,...] [--workers 2] [--seed 5 | --suite-seeds FILE]
    python benchmarks/cuda_port_acceptance.py [--tasks layernorm,adamw_step] [--workers 2] [--limit 40]

``--set ports`` (the acceptance set, ``src/nkieval/tasks/ports``): every task's expert port and every
flawed port is reviewed. A flawed port's mistake is *named* when a migration feedback line (error or
warning) contains one of the evidence phrases its task.toml declares (for a semantic flaw, the cause's kind
and CUDA line, e.g. "formula at kernel.cu:22" or "1e-6f at kernel.cu:20"). A *stated cause* is a migration
line that names one (a "semantic infidelity" or "fusion lost" line, or any line carrying a cause); it is
*wrong* when it contains none of the flaw's evidence phrases. Experts must pass and state no cause.

Without ``--set`` (the built-in tasks): constant mutants of the expert ports.

For every built-in task with a kernel.cu and an expert solution, semantic flaws are made by mutating the
expert port: (a) a float parameter of the task (eps, lr, beta1, scale, ...) replaced where the port uses
it by a literal of a tenth of its value (the "epsilon 1e-6 for the CUDA's 1e-5" class); (b) a float
literal of the port scaled by 1.01 (a wrong GELU constant, a wrong scale). Each mutant and each expert is
reviewed; the table says per mutant whether the differential check found a disagreement with the CUDA
kernel, whether a cause was stated, and whether it was the mutated line (a stated cause on any other line,
or on an expert, is a wrong cause). A mutant whose outputs stay within tolerance of the CUDA kernel on
every input is counted as "not observable" (the mutation does not change the function measurably).
"""

from __future__ import annotations

import argparse
import ast
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any


def mutants(task: Any) -> list[tuple[str, str, int]]:
    """(name, source, mutated line) for the task's expert port."""
    src = task.solution_file.read_text()
    tree = ast.parse(src)
    lines = src.splitlines()
    out: list[tuple[str, str, int]] = []
    floats = {k: v for k, v in task.params.items() if isinstance(v, float)}
    fn = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == task.kernel), None)
    if fn is None:
        return out
    for k, v in floats.items():
        uses = [n for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id == k and isinstance(n.ctx, ast.Load)]
        if not uses:
            continue
        n = uses[0]
        ln = lines[n.lineno - 1]
        new = ln[: n.col_offset] + repr(v / 10) + ln[n.end_col_offset:]
        out.append((f"param_{k}", "\n".join([*lines[: n.lineno - 1], new, *lines[n.lineno:]]) + "\n", n.lineno))
    defaults = {id(d) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) for d in f.args.defaults}
    for n in ast.walk(tree):
        if isinstance(n, ast.Constant) and isinstance(n.value, float) and n.value not in (0.0, 1.0, -1.0) \
                and id(n) not in defaults and n.lineno == n.end_lineno:
            ln = lines[n.lineno - 1]
            new = ln[: n.col_offset] + repr(n.value * 1.01) + ln[n.end_col_offset:]
            out.append((f"literal_{n.lineno}_{n.col_offset}", "\n".join([*lines[: n.lineno - 1], new,
                                                                          *lines[n.lineno:]]) + "\n", n.lineno))
    return out


def _review(job: tuple[str, str, str, int | None]) -> dict[str, Any]:
    import time

    from nkieval.review.pipeline import review

    task_id, path, name, line = job
    t0 = time.process_time()
    r = review(task_id, path, seed=5, compare_references=False)
    cpu = time.process_time() - t0
    mig = next(c for c in r.criteria if c.id == "migration")
    causes = [f.evidence for f in mig.feedback if f.observed.startswith("semantic infidelity")]
    disagree = [f for f in mig.feedback if "disagrees with the CUDA kernel" in f.observed or
                (f.severity == "info" and "verdict disagree" in f.observed)]
    lines = [int(str(c.get("port_location", ":0")).split(":")[1]) for c in causes]
    return {"task": task_id, "name": name, "line": line, "score": r.score, "migration": mig.level,
            "disagree": bool(disagree) or bool(causes), "causes": lines,
            "right": line is not None and line in lines, "wrong": [x for x in lines if x != line], "cpu": cpu}


def _stated_causes(mig: Any) -> list[str]:
    """The migration lines that state a cause (what a wrong cause would be)."""
    out = []
    for f in mig.feedback:
        if f.severity == "info":
            continue
        if f.observed.startswith(("semantic infidelity", "fusion lost")) or getattr(f, "cause", None):
            out.append(f"{f.observed} | {f.cause or ''}")
    return out


def _edge_verdicts(task: Any, edge: list[tuple[Any, ...]]) -> list[str]:
    """Per edge input the review ran: its label and whether the port agrees with the CUDA kernel on it."""
    from nkieval.review.stages.differential import _max_ratio

    out = []
    for label, _dims, _inputs, gpu, port in edge:
        worst = max((_max_ratio(task, g, p) for g, p in zip(gpu, port)), default=0.0)
        out.append(f"{label.removeprefix('edge/')}:{'agree' if worst <= 1.0 else 'DISAGREE'}")
    return out


def _review_port(job: tuple[str, str, str, tuple[str, ...], str, int]) -> dict[str, Any]:
    import resource
    import time

    from nkieval.review import pipeline
    from nkieval.review.stages import differential as diff_stage

    task_dir, path, name, evidence, kind, seed = job
    # (the edge runs and the differential stage's own CPU time are read as the review makes them)
    seen: dict[str, Any] = {"edges": [], "diff_cpu": 0.0}
    edge_runs, differential = diff_stage._edge_runs, pipeline.differential

    def watched_edges(loaded: Any, *args: Any) -> list[tuple[Any, ...]]:
        runs = edge_runs(loaded, *args)
        seen["edges"] = _edge_verdicts(loaded.task, runs)
        return runs

    def watched_differential(*args: Any, **kw: Any) -> Any:
        t0 = time.process_time()
        try:
            return differential(*args, **kw)
        finally:
            seen["diff_cpu"] += time.process_time() - t0

    diff_stage._edge_runs, pipeline.differential = watched_edges, watched_differential  # type: ignore[assignment]
    t0, c0 = time.process_time(), resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        r = pipeline.review(task_dir, path, seed=seed, compare_references=False)
    except Exception as e:  # a harness failure is a miss, reported
        return {"task": Path(task_dir).name, "name": name, "kind": kind, "error": f"{type(e).__name__}: {e}",
                "named": False, "wrong": [], "passed": False, "migration": None}
    finally:
        diff_stage._edge_runs, pipeline.differential = edge_runs, differential  # type: ignore[assignment]
    c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = {"review": time.process_time() - t0, "children": c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime,
           "differential": seen["diff_cpu"]}
    mig = next(c for c in r.criteria if c.id == "migration")
    lines = [f"{f.observed} | {f.expected} | {f.suggestion}" for f in mig.feedback if f.severity != "info"]
    words = [w.lower() for w in evidence]
    named = any(w in t.lower() for t in lines for w in words)
    causes = _stated_causes(mig)
    wrong = causes if name == "expert" else [c for c in causes if not any(w in c.lower() for w in words)]
    # the port's side of a non-constant cause: its first line must be one the flawed port changed (a cause
    # whose port side is "no instruction reads <input>" names no line: the trace itself shows that)
    ports = [f for f in mig.feedback if f.observed.startswith("semantic infidelity (")]
    changed = _changed_lines(Path(task_dir) / "solution_nki.py", Path(path)) if name != "expert" else set()
    port = None
    for f in ports:
        loc = f.evidence.get("port_location")
        line = int(loc.split(":")[1]) if loc else None
        port = "not established" if "in the port:" not in f.observed else \
            "right" if line is None or line in changed else \
            f"{line} (unchecked: the flawed port only deletes lines)" if not changed else \
            f"WRONG {line} vs {sorted(changed)}"
    return {"task": Path(task_dir).name, "name": name, "kind": kind, "named": named, "wrong": wrong,
            "passed": r.verdict == "pass", "migration": mig.level, "score": r.score, "port": port,
            "causes": [c.split(" | ")[0][:110] for c in causes], "edges": seen["edges"], "cpu": cpu}


def _changed_lines(expert: Path, flawed: Path) -> set[int]:
    """Lines of the flawed port (past its docstring) that differ from the expert's: where its mistake is."""
    import difflib

    a, b = expert.read_text().splitlines(), flawed.read_text().splitlines()
    body = next((i for i, ln in enumerate(b) if ln.startswith(("import", "from"))), 0)
    out: set[int] = set()
    for tag, _i1, _i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag in ("replace", "insert"):
            out |= {j + 1 for j in range(j1, j2) if j >= body}
    return out


def _suite_seeds(path: str) -> dict[tuple[str, str], int]:
    """(task, candidate) -> the review seed of a ``nkieval suite run --results FILE`` record (the suite's own
    per-entry seeds), so the flawed ports are reviewed as the suite reviewed them."""
    import json

    out = {}
    for line in Path(path).read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            out[(r["task"], r["candidate"])] = int(r["seed"])
    return out


def _semantic(evidence: tuple[str, ...]) -> bool:
    """A flaw declared by the cause it must produce (a kind or constant at a kernel.cu line) is semantic."""
    return any("kernel.cu:" in w for w in evidence)


def ports_main(a: argparse.Namespace) -> None:
    from nkieval.tasks.loader import port_tasks

    only = {t for t in a.tasks.split(",") if t}
    seeds = _suite_seeds(a.suite_seeds) if a.suite_seeds else {}
    jobs = []
    for t in port_tasks():
        if only and t.id not in only:
            continue
        jobs.append((str(t.directory), str(t.solution_file), "expert", (), "expert",
                     seeds.get((t.id, "solution"), a.seed)))
        for fl in t.flawed:
            ev = tuple(fl.evidence)
            name = Path(fl.file).stem
            jobs.append((str(t.directory), str((t.directory / fl.file).resolve()), name, ev,
                         "semantic" if _semantic(ev) else "structural", seeds.get((t.id, f"flawed:{name}"), a.seed)))
    with ProcessPoolExecutor(a.workers) as pool:
        res = list(pool.map(_review_port, jobs))
    for r in res:
        mark = ("PASS" if r["passed"] and not r["wrong"] else "FAIL") if r["name"] == "expert" else \
            ("named" if r["named"] else "MISSED")
        print(f"{r['task']:16s} {r['name']:22s} {r['kind']:10s} migration {r['migration']!s:>4s}  {mark:6s}"
              + (f"  WRONG CAUSE: {r['wrong']}" if r["wrong"] else "") + (f"  ERROR {r['error']}" if "error" in r else "")
              + (f"  port line {r['port']}" if r.get("port") else ""))
        if "cpu" in r:
            print(f"{'':40s}edges {' '.join(r['edges']) or '-'}; CPU s: review {r['cpu']['review']:.2f} "
                  f"(differential {r['cpu']['differential']:.2f}), sandbox children {r['cpu']['children']:.2f}")
        for c in r.get("causes") or []:
            print(f"{'':40s}cause: {c}")
    experts = [r for r in res if r["name"] == "expert"]
    flawed = [r for r in res if r["name"] != "expert"]
    sem = [r for r in flawed if r["kind"] == "semantic"]
    print(f"\ntasks {len(experts)}; experts passing with no stated cause: "
          f"{sum(r['passed'] and not r['wrong'] for r in experts)}/{len(experts)}")
    print(f"flawed ports {len(flawed)} ({len(sem)} semantic): mistake named {sum(r['named'] for r in flawed)}/"
          f"{len(flawed)} ({100.0 * sum(r['named'] for r in flawed) / max(1, len(flawed)):.0f}%); semantic "
          f"{sum(r['named'] for r in sem)}/{len(sem)}; structural {sum(r['named'] for r in flawed if r not in sem)}/"
          f"{len(flawed) - len(sem)}")
    print(f"ports with a wrong cause stated: {sum(bool(r['wrong']) for r in flawed)}/{len(flawed)}")
    timed = [r["cpu"] for r in res if "cpu" in r]
    if timed:
        n = len(timed)
        print(f"CPU s per review (mean of {n}): review process {sum(c['review'] for c in timed) / n:.2f}, of it the "
              f"differential stage {sum(c['differential'] for c in timed) / n:.2f}; sandbox children "
              f"{sum(c['children'] for c in timed) / n:.2f}; edge inputs run {sum(len(r['edges']) for r in res)}, "
              f"disagreeing {sum(e.endswith('DISAGREE') for r in res for e in r.get('edges', []))}")
    located = [r for r in flawed if r.get("port") and r["port"] != "not established"]
    print(f"non-constant causes stated: {sum(bool(r.get('port')) for r in flawed)}; port line stated for "
          f"{len(located)}: at a line the flawed port changed (or no line, where no instruction reads the input) "
          f"{sum(r['port'] == 'right' for r in located)}, wrong {sum(r['port'].startswith('WRONG') for r in located)}, "
          f"unchecked (a flawed port that only deletes lines) {sum('unchecked' in r['port'] for r in located)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", dest="task_set", choices=["builtin", "ports"], default="builtin")
    ap.add_argument("--tasks", default="")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--limit", type=int, default=40, help="mutants at most (in task order)")
    ap.add_argument("--seed", type=int, default=5, help="review seed of the ports (--set ports)")
    ap.add_argument("--suite-seeds", default="", help="a suite results file: review each port with its seed there")
    a = ap.parse_args()
    if a.task_set == "ports":
        ports_main(a)
        return
    from nkieval.tasks.loader import builtin_tasks

    only = {t for t in a.tasks.split(",") if t}
    tmp = Path(tempfile.mkdtemp(prefix="nkieval-mutants-"))
    jobs: list[tuple[str, str, str, int | None]] = []
    experts: list[tuple[str, str, str, int | None]] = []
    for t in builtin_tasks():
        if t.cuda_file is None or t.solution_file is None or (only and t.id not in only):
            continue
        ms = mutants(t)
        if not ms:
            continue
        experts.append((t.id, str(t.solution_file), "expert", None))
        for name, src, line in ms:
            p = tmp / f"{t.id}__{name}.py"
            p.write_text(src)
            jobs.append((t.id, str(p), name, line))
    jobs = jobs[: a.limit]
    used = {j[0] for j in jobs}
    experts = [e for e in experts if e[0] in used]
    with ProcessPoolExecutor(a.workers) as pool:
        res = list(pool.map(_review, experts + jobs))
    for r in res:
        print(f"{r['task']:24s} {r['name']:22s} line {r['line']!s:>4s} score {r['score']:5.1f} migration "
              f"{r['migration']}  disagree {'yes' if r['disagree'] else 'no ':3s} causes at {r['causes']}"
              + ("  RIGHT" if r["right"] else "") + (f"  WRONG {r['wrong']}" if r["wrong"] else "")
              + f"  CPU {r['cpu']:.2f} s")
    muts = [r for r in res if r["name"] != "expert"]
    obs = [r for r in muts if r["disagree"]]
    print(f"\nexperts: {len(res) - len(muts)}, with a stated cause (wrong by definition): "
          f"{sum(1 for r in res if r['name'] == 'expert' and r['causes'])}")
    print(f"mutants: {len(muts)}; observable (the port disagrees with the CUDA kernel): {len(obs)}; "
          f"mistake named (cause at the mutated line): {sum(r['right'] for r in muts)} "
          f"({sum(r['right'] for r in obs)}/{len(obs)} of the observable); "
          f"wrong causes stated: {sum(bool(r['wrong']) for r in muts)}")
    # (the review process's CPU: the sandbox's children are not counted, the judge's own work is)
    print(f"CPU s per review (mean of {len(res)}): {sum(r['cpu'] for r in res) / max(1, len(res)):.2f}; experts "
          f"{sum(r['cpu'] for r in res if r['name'] == 'expert') / max(1, len(res) - len(muts)):.2f}, mutants "
          f"{sum(r['cpu'] for r in muts) / max(1, len(muts)):.2f}")


if __name__ == "__main__":
    main()
