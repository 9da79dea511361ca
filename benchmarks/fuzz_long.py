"""Long fuzz run of the simulator contract (issue 3): N random instruction programs, each ending in a
correct result or an NkiValidationError. Prints the outcome counts, examples/second and every
distinct internal crash site (first example of each); exit status 1 if any.

    .venv/bin/python benchmarks/fuzz_long.py --examples 50000 [--seed 7] [--max-steps 6]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fuzz"))

from nkieval import frontends

frontends.install()

from fuzzlib import InternalError, programs, run_program  # noqa: E402
from hypothesis import HealthCheck, given, seed, settings  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-steps", type=int, default=6)
    a = ap.parse_args()
    outcomes: Counter[str] = Counter()
    crashes: dict[str, str] = {}

    @seed(a.seed)
    @settings(max_examples=a.examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(programs(max_steps=a.max_steps))
    def run(prog) -> None:
        try:
            outcomes[run_program(prog)] += 1
        except InternalError as e:
            site = str(e).splitlines()[0].split(": ")[0]
            crashes.setdefault(site, str(e)[:800])
            outcomes["INTERNAL"] += 1

    t0 = time.perf_counter()
    run()
    dt = time.perf_counter() - t0
    total = sum(outcomes.values())
    print(f"examples: {total} in {dt:.1f} s ({total / dt:.0f}/s); seed {a.seed}, max steps {a.max_steps}")
    for k, v in outcomes.most_common():
        print(f"  {k:<20} {v:>7}  ({v / total:.1%})")
    print(f"internal crash sites: {len(crashes)}")
    for site, msg in crashes.items():
        print(f"--- {site}\n{msg}")
    return 1 if crashes else 0


if __name__ == "__main__":
    raise SystemExit(main())
