"""Static-analysis speed: median ms per file for analyze_nki + migration_fidelity(parse_cuda(...)).

The review calls both once per candidate; the budget is 50 ms per file. Run:
``.venv/bin/python benchmarks/analysis_speed.py`` (uses the analysis test fixtures).
"""

from __future__ import annotations

import pathlib
import statistics
import time

from nkieval.analysis import analyze_nki, migration_fidelity, parse_cuda

FIX = pathlib.Path(__file__).resolve().parents[1] / "tests" / "analysis" / "fixtures"


def main() -> None:
    files = sorted((FIX / "nki").glob("NKI0*.pysrc")) + sorted((FIX / "good").glob("*.pysrc"))
    cu = (FIX / "cuda" / "row_softmax.cu").read_text()
    analyze_nki(files[0].read_text())  # warm imports and the grammar
    parse_cuda(cu)
    times = []
    for _ in range(3):
        for p in files:
            src = p.read_text()
            t0 = time.process_time()
            analyze_nki(src)
            migration_fidelity(parse_cuda(cu), src)
            times.append(time.process_time() - t0)
    med = statistics.median(times) * 1e3
    print(f"{len(files)} files x 3: median {med:.1f} ms CPU per file (analyze_nki + migration_fidelity), "
          f"max {max(times) * 1e3:.1f} ms   budget 50 ms")


if __name__ == "__main__":
    main()
