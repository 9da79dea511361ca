"""Long run of the bad-input property (issue #25, item 1): malformed task.toml files, references and
candidates through ``nkieval task check`` and ``nkieval review``, each answered with a specific message
and the documented exit code, no traceback, nothing written outside the output directory
(tests/fuzz/badinput.py). Prints the examples run per kind, the exit codes seen and every distinct
violation (first example of each); exit status 1 if any.

    .venv/bin/python benchmarks/fuzz_bad_inputs.py --tasks 3000 --reviews 200 [--seed 7]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fuzz"))

from badinput import (
    CANDIDATES,
    REFERENCES,
    check_task_answer,
    review_answer,
    toml_mutations,
    write_task,
)
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=2000, help="malformed task.toml examples (task check)")
    ap.add_argument("--reviews", type=int, default=150, help="reviews: of bad tasks and of malformed candidates")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    codes: Counter[str] = Counter()
    violations: dict[str, str] = {}

    def guarded(kind: str, fn: object, *args: object, **kw: object) -> int | None:
        """``fn``'s exit code, counted; None (and the violation kept) when the property does not hold."""
        try:
            code = fn(*args, **kw)  # type: ignore[operator]
        except AssertionError as e:
            first = str(e).splitlines()[0]
            violations.setdefault(first.split(":")[0] + ":" + first.split(":")[-1][:80], str(e)[:2000])
            codes[f"{kind}: VIOLATION"] += 1
            return None
        codes[f"{kind}: exit {code}"] += 1
        return int(code)

    reviews = [0]

    @seed(a.seed)
    @settings(max_examples=a.tasks, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(toml_mutations())
    def tasks(mutation: tuple[str, object]) -> None:
        what, text = mutation
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            write_task(root, toml=text)  # type: ignore[arg-type]
            code = guarded("task check", check_task_answer, root, f"task.toml: {what}")
            if code == 2 and reviews[0] < a.reviews // 2:
                reviews[0] += 1
                guarded("review (bad task)", review_answer, root, root / "task" / "solution_nki.py",
                        f"task.toml: {what}", bad_task=True)

    @seed(a.seed)
    @settings(max_examples=max(1, a.reviews // 2), deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.one_of(st.sampled_from(sorted(CANDIDATES)), st.binary(min_size=1, max_size=256)))
    def candidates(candidate: object) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            write_task(root)
            src = CANDIDATES[candidate] if isinstance(candidate, str) else candidate
            p = root / "candidate.py"
            p.write_bytes(src if isinstance(src, bytes) else src.encode())  # type: ignore[union-attr]
            guarded("review (candidate)", review_answer, root, p, f"candidate {candidate!r}", bad_task=False)

    t0 = time.perf_counter()
    tasks()
    for name, ref in REFERENCES.items():
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            write_task(root, reference=ref)
            guarded("task check (reference)", check_task_answer, root, f"reference.py {name}")
    candidates()
    dt = time.perf_counter() - t0
    n = sum(codes.values())
    print(f"{n} answers in {dt:.0f} s ({n / dt:.1f}/s), seed {a.seed}")
    for k, v in sorted(codes.items()):
        print(f"  {k:<40} {v}")
    print(f"{len(violations)} distinct violation(s)")
    for k, v in violations.items():
        print(f"--- {k}\n{v}\n")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
