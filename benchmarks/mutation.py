"""Mutation testing of the critical code (issue #25, item 5): the kill rate per area.

The mutations are Cosmic Ray's (``pip install -e '.[mutation]'``): its operators enumerate every
mutation of the area's modules (comparison, arithmetic, boolean and unary operators, number
replacement, break/continue, exception handlers, ...) and its ``mutate_and_test`` applies one and runs the
area's tests. Cosmic Ray mutates files in place, so this script works on a copy of the checkout
in a temporary directory (the checkout is never modified, even if the run is killed) and
imports the copy through ``PYTHONPATH``. Each area runs a random sample of its mutants (``--per-area``;
the sample depends only on ``--seed`` and the area, so one area can be rerun alone) against its own fast tests (a full run of every mutant takes hours on two cores).

Prints, per area, the mutants sampled out of all, killed, survived, incompetent (the mutant does not
import) and the kill rate killed / (killed + survived); ``--survivors FILE`` writes each survivor's
diff (as each is found); ``--progress`` prints each mutant's outcome to stderr. Exit status 0 (the figures
are the output).

    .venv/bin/python benchmarks/mutation.py [--per-area 30] [--seed 1] [--areas numerics-gates,perf-costs]
        [--progress] [--survivors FILE]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Area:
    """Modules to mutate (relative to the repository), the tests that must kill their mutants, and
    optionally the definitions to keep (a predicate on Cosmic Ray's ``definition_name``)."""

    modules: tuple[str, ...]
    tests: tuple[str, ...]
    definitions: str | None = None  # a word the mutated definition's name must contain


AREAS: dict[str, Area] = {
    "sim-validation": Area(("src/nkieval/sim/isa/core.py", "src/nkieval/sim/isa/tensor_engine.py",
                            "src/nkieval/sim/capacity.py"),
                           ("tests/sim/test_validation.py", "tests/sim/test_max_instructions.py",
                            "tests/analysis/test_rule_boundaries.py", "tests/sim/test_validation_mutants.py",
                            "tests/sim/test_fixed_address_capacity.py", "tests/sim/test_validation_seed2.py",
                            "tests/sim/test_validation_seed3.py"), "check"),
    "numerics-gates": Area(("src/nkieval/numerics/gates.py", "src/nkieval/numerics/stream.py",
                            "src/nkieval/numerics/bounds.py"),
                           ("tests/numerics/test_numerics_bounds.py", "tests/numerics/test_numerics_verdict.py",
                            "tests/numerics/test_numerics_ops.py", "tests/numerics/test_numerics_mutants.py",
                            "tests/numerics/test_numerics_bound_figures.py",
                            "tests/numerics/test_contraction_bound_terms.py",
                            "tests/numerics/test_numerics_seed2_figures.py",
                            "tests/numerics/test_numerics_seed2_contract_and_generic.py",
                            "tests/numerics/test_numerics_seed3_figures.py")),
    "review-scoring": Area(("src/nkieval/review/scoring.py", "src/nkieval/review/integrity.py",
                            "src/nkieval/review/verdict.py"),
                           ("tests/review/test_review_scoring_hints.py", "tests/review/test_reward_semantics.py",
                            "tests/review/test_integrity_prefilter.py", "tests/review/test_scoring_mutants.py",
                            "tests/review/test_performance_levels.py", "tests/review/test_feedback_mutants.py",
                            "tests/review/test_group_feedback_mutants.py", "tests/review/test_scoring_seed1_round2.py",
                            "tests/review/test_scoring_seed1_round3.py", "tests/review/test_scoring_seed3.py")),
    "analysis-rules": Area(tuple(str(p.relative_to(ROOT)) for p in sorted(
        [*ROOT.glob("src/nkieval/analysis/nki/rules/nki0*.py"),
         *ROOT.glob("src/nkieval/analysis/migration/rules/mig0*.py")])), ("tests/analysis",)),
    "perf-costs": Area(("src/nkieval/perf/costs.py",), ("tests/perf/test_costs.py", "tests/perf/test_cost_facts.py",
                                                    "tests/perf/test_cost_mutants.py", "tests/perf/test_cost_rounding.py",
                                                    "tests/perf/test_cost_seed3.py")),
}


def _mutants(area: Area, copy: Path) -> list:
    """Every Cosmic Ray mutation of the area's modules (in the copy), filtered by ``definitions``."""
    from cosmic_ray.commands.init import init
    from cosmic_ray.work_db import WorkDB, use_db

    with tempfile.TemporaryDirectory() as tmp, use_db(Path(tmp) / "session.sqlite", WorkDB.Mode.create) as db:
        init([copy / m for m in area.modules], db, {})
        muts = [m for item in db.work_items for m in item.mutations]
    if area.definitions:
        muts = [m for m in muts if area.definitions in str(m.definition_name or "")
                or "capacity" in str(m.module_path)]
    return muts


def run_area(name: str, area: Area, copy: Path, per_area: int, rng: random.Random,
             survivors: list[str], survivors_file: str | None = None, progress: bool = False) -> dict[str, int]:
    from cosmic_ray.mutating import mutate_and_test
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome

    tests = [t for t in area.tests if (copy / t).exists()]
    cmd = f"{sys.executable} -m pytest -x -q -p no:cacheprovider -p no:randomly " + " ".join(tests)
    t0 = time.perf_counter()
    from cosmic_ray.testing import run_tests

    base, out = run_tests(cmd, 900)
    base_s = time.perf_counter() - t0
    if base != TestOutcome.SURVIVED:  # (cosmic ray's name for "the tests passed")
        print(f"{name}: skipped, the tests fail without a mutation:\n{out[-2000:]}", file=sys.stderr)
        return {"mutants": 0, "sampled": 0, "killed": 0, "survived": 0, "incompetent": 0}
    muts = _mutants(area, copy)
    sample = rng.sample(muts, min(per_area, len(muts)))
    counts = {"mutants": len(muts), "sampled": len(sample), "killed": 0, "survived": 0, "incompetent": 0}
    for i, m in enumerate(sample, 1):
        res = mutate_and_test([m], cmd, timeout=max(60.0, 3 * base_s))
        if res.worker_outcome != WorkerOutcome.NORMAL:
            outcome = "incompetent"
        elif res.test_outcome == TestOutcome.KILLED:
            outcome = "killed"
        elif res.test_outcome == TestOutcome.SURVIVED:
            outcome = "survived"
            survivors.append(f"--- {name}: {m.operator_name} in {m.definition_name}\n{res.diff}")
            if survivors_file:  # (written as each survivor is found: a long run can be read while it goes on)
                Path(survivors_file).write_text("\n".join(survivors))
        else:
            outcome = "incompetent"
        counts[outcome] += 1
        if progress:
            print(f"  {name} {i}/{len(sample)}: {outcome} ({m.operator_name} in {m.definition_name})",
                  file=sys.stderr, flush=True)
    return counts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-area", type=int, default=30)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--areas", default=",".join(AREAS))
    ap.add_argument("--survivors", default=None, help="write each survivor's diff to this file")
    ap.add_argument("--progress", action="store_true", help="print each mutant's outcome to stderr as it ends")
    a = ap.parse_args()
    try:
        import cosmic_ray  # noqa: F401
    except ImportError:
        print("Cosmic Ray is not installed: pip install -e '.[mutation]'", file=sys.stderr)
        return 2
    survivors: list[str] = []
    rows = []
    with tempfile.TemporaryDirectory(prefix="nkieval-mutation-") as tmp:
        copy = Path(tmp)
        shutil.copytree(ROOT, copy, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns(".git", ".venv", "__pycache__", "*.pyc", ".hypothesis", "build",
                                                      "*.egg-info", ".pytest_cache"))
        old = os.getcwd()
        os.environ["PYTHONPATH"] = str(copy / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")
        os.chdir(copy)
        try:
            for name in a.areas.split(","):
                t0 = time.perf_counter()
                c = run_area(name, AREAS[name], copy, a.per_area, random.Random(f"{a.seed}:{name}"), survivors,
                             a.survivors, a.progress)
                judged = c["killed"] + c["survived"]
                rate = c["killed"] / judged if judged else float("nan")
                rows.append((name, c, rate, time.perf_counter() - t0))
                if a.survivors:  # (written as each area ends: a long run can be read while it goes on)
                    Path(a.survivors).write_text("\n".join(survivors))
                print(f"{name:<16} sampled {c['sampled']:>3} of {c['mutants']:>5}  killed {c['killed']:>3}  "
                      f"survived {c['survived']:>3}  incompetent {c['incompetent']:>3}  kill rate {rate:6.1%}  "
                      f"({rows[-1][3]:.0f} s)", flush=True)
        finally:
            os.chdir(old)
    if a.survivors:
        Path(a.survivors).write_text("\n".join(survivors))
    print(f"seed {a.seed}, {a.per_area} mutants per area; {len(survivors)} survivor(s)"
          + (f" written to {a.survivors}" if a.survivors else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
