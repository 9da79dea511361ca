"""Run the adversarial suite (tests/adversarial) and print a table per class.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/adversarial.py [--only GLOB] [--grace S]

Per class: candidates, caught (hostile: not a pass and below the honest baseline's score, with
an acceptable verdict), false positives (legitimate kernels that did not pass), contained (no
marker file, no connection to the listener, no surviving process). Exits 1 when a hostile
candidate is not caught or not contained, or a legitimate one does not pass; the holes are
listed with what let them through, and which of them are in ``KNOWN_HOLES``.
"""

from __future__ import annotations

import argparse
import fnmatch
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "adversarial"))

import harness


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="*", help="candidate names to run (fnmatch, e.g. 'host_compute/*')")
    ap.add_argument("--grace", type=float, default=harness.GRACE_S, help="seconds to wait before the marker scan")
    ap.add_argument("-v", "--verbose", action="store_true", help="one line per candidate")
    args = ap.parse_args(argv)
    cands = [c for c in harness.discover() if fnmatch.fnmatch(c.name, args.only)]
    t0 = time.perf_counter()
    outs = []
    for c in cands:
        o = harness.evaluate(c, grace_s=args.grace if c.kind == "hostile" else 0.2)
        outs.append(o)
        if args.verbose:
            print(("ok   " if o.ok else "FAIL ") + o.describe() + f" [{o.seconds:.1f}s]", flush=True)
    by: dict[str, list[harness.Outcome]] = defaultdict(list)
    for o in outs:
        by[o.candidate.cls].append(o)
    print(f"{'class':<18}{'n':>4}{'caught':>8}{'FP':>5}{'contained':>11}")
    tot = {"n": 0, "caught": 0, "hostile": 0, "fp": 0, "legit": 0, "contained": 0}
    for cls in sorted(by):
        os_ = by[cls]
        hostile = [o for o in os_ if o.candidate.kind == "hostile"]
        legit = [o for o in os_ if o.candidate.kind == "legit"]
        caught = sum(o.caught for o in hostile)
        fp = sum(not o.ok for o in legit)
        cont = sum(o.contained for o in os_)
        print(f"{cls:<18}{len(os_):>4}{(f'{caught}/{len(hostile)}' if hostile else '-'):>8}"
              f"{(f'{fp}/{len(legit)}' if legit else '-'):>5}{f'{cont}/{len(os_)}':>11}")
        tot["n"] += len(os_)
        tot["caught"] += caught
        tot["hostile"] += len(hostile)
        tot["fp"] += fp
        tot["legit"] += len(legit)
        tot["contained"] += cont
    print(f"{'total':<18}{tot['n']:>4}{tot['caught']:>4}/{tot['hostile']:<3}{tot['fp']:>3}/{tot['legit']:<2}"
          f"{tot['contained']:>6}/{tot['n']}   ({time.perf_counter() - t0:.0f} s)")
    holes = [o for o in outs if not o.ok]
    known = {n for n, _ in harness.KNOWN_HOLES}
    if holes:
        print("\nholes (hostile not caught or not contained; legitimate not passing):")
        for o in holes:
            tag = "known" if o.candidate.name in known else "NEW  "
            print(f"  [{tag}] {o.describe()}")
    fixed = sorted(known - {o.candidate.name for o in holes} & {o.candidate.name for o in outs})
    if fixed:
        print("\nin KNOWN_HOLES but caught now (remove them): " + ", ".join(fixed))
    return 1 if holes else 0


if __name__ == "__main__":
    sys.exit(main())
