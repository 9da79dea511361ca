"""Students' Beta-1 kernels of a public course, graded by the course's own harness in simulation, on nkieval.

Stanford CS149's assignment 4 (Trainium; Fall 2024 and Fall 2025) has students write a fused conv2d + max-pool
kernel in Beta 1 (``neuronxcc.nki``) and grades it with ``part2/test_harness.py``, whose ``--simulate`` flag wraps
the kernel in ``nki.simulate_kernel``; many students keep their solution in a public repository. Each checkout
under a directory (cloned by the user; nothing is downloaded, and no student code is in this repository) is run
unmodified with that harness::

    (cd CHECKOUT/part2 && nkieval run test_harness.py --simulate --test_maxpool)

and each of the harness's correctness cases becomes a case: passed, failed (the harness's "Failed": a wrong
result), or failed with the error that stopped the harness (its later cases then did not run and are not
counted). ``benchmarks/public_compat.py --course DIR`` runs this as its ``course`` suite, with the blame of every
failure (``KEPT``/``OUT_OF_SCOPE`` below, each read from the student's code and commit messages).

The harness needs torch (its reference) and ``logging.OFF``, which it uses and Python 3.11 lacks: put CPU torch
on ``PYTHONPATH`` and a ``sitecustomize.py`` that sets ``logging.OFF = logging.CRITICAL + 10``
(docs/compat-public.md, "fourteenth pass").
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

#: one correctness case of the harness's output (both years' wording), and its result when it printed one
CASE_LINE = re.compile(r"Running correctness test for conv2d kernel with (?P<what>.+?)\s*(?:\[simulated\])?\s*"
                       r"\.\.\.\s*(?P<result>Passed|Failed)?")
#: the last line of a traceback: the error that stopped the harness
ERROR_LINE = re.compile(r"^(?P<error>[A-Za-z_][\w.]*(?:Error|Exception|Exit)\b.*)$")

#: (regular expression on the case id ``repository::case``) -> why nkieval keeps its behaviour
KEPT: dict[str, str] = {
    r"^Ni2002ka\+asst4-trainium2::":
        "(the student's harness runs no correctness case, only the performance ones, which compare no values) "
        "the max pool writes prev_pool_row[:, :, row_idx % 2] in every even iteration of an nl.affine_range over "
        "rows and reads it in the odd ones: a loop-carried dependency that affine_range forbids (Beta 1's error "
        "unexpected-output-dependencies)",
}
#: (regular expression on the case id) -> why the case is out of scope
OUT_OF_SCOPE: dict[str, str] = {
    r"^(TomZelazny\+asst4-trainium|akjadhav\+asst4-trainium|chengli2003\+asst4-trainium2|kenny1G\+asst4-trainium)"
    r"::.*maxpool":
        "the student did not write the max pool: the unpooled result does not fit the pooled output (it fails the "
        "same shape check on Trainium)",
    r"^okyangyishen\+asst4-trainium::.*maxpool":
        "the student did not finish the max pool (last commit: \"Passing conv functionality and performance, but "
        "not pooling\")",
    r"^Yousef02\+149-asst4-trainium::larger":
        "the student's kernel handles small images only (last commit: \"Small Images working\"): a PSUM tile of 222 "
        "partitions",
    r"^ewang675\+asst4-trainium::":
        "a work in progress (last commit: \"getting output writing error\")",
    r"^tianyeeT\+cs149-asst4-trainium2::":
        "the student's kernel is wrong and nkieval refuses it as Beta 1 did: its only store sits in "
        "nl.affine_range(out_width // 512), zero iterations for every image (tensor-output-not-written-to)",
    r"^EtashGuha\+asst4-trainium2::larger":
        "a work in progress (commit \"checkpoint but still dies\") that reloads the whole image for every spatial "
        "tile: past the time limit",
}
#: (regular expression on the error) -> why a failure is out of scope
OUT_OF_SCOPE_ERRORS: dict[str, str] = {
    r"Please fill your implementation": "no solution: the course's starter kernel",
    r"ImportError: cannot import name": "the checkout's harness does not import (its reference module lacks a name)",
}


def parse(output: str) -> list[tuple[str, str, str | None]]:
    """(case, passed | failed, the error or None) of every correctness case the harness started, in order: a case
    whose result line never came failed with the last error printed after it (the harness stopped there)."""
    cases: list[tuple[str, str, str | None]] = []
    pending: str | None = None
    error: str | None = None

    def close() -> None:
        if pending is not None:
            cases.append((pending, "failed", error or "the harness stopped in this case (time limit or crash)"))

    for line in output.splitlines():
        m = CASE_LINE.search(line)
        if m:
            close()
            pending, error = " ".join(m["what"].split()), None
            if m["result"]:
                cases.append((pending, "passed" if m["result"] == "Passed" else "failed", None))
                pending = None
            continue
        r = re.match(r"(Passed|Failed)\b", line.strip())
        if r and pending is not None:
            cases.append((pending, "passed" if r[1] == "Passed" else "failed", None))
            pending = None
            continue
        e = ERROR_LINE.match(line.strip())
        if e and pending is not None:
            error = e["error"]
    close()
    return cases


def blame(case_id: str, error: str | None) -> tuple[str, str]:
    """(nkieval | kept | out of scope, why) of a case that did not pass."""
    for table, who in ((KEPT, "kept"), (OUT_OF_SCOPE, "out of scope")):
        for pat, why in table.items():
            if re.search(pat, case_id):
                return who, why
    for pat, why in OUT_OF_SCOPE_ERRORS.items():
        if error and re.search(pat, error):
            return "out of scope", why
    return "nkieval", error or "a wrong result"


def run_checkout(repo: Path, timeout: float) -> tuple[str, int | None]:
    """The harness's output on ``repo`` (and its exit status, None past ``timeout``)."""
    nkieval = Path(sys.executable).with_name("nkieval")
    cmd = [str(nkieval), "run", "test_harness.py", "--simulate", "--test_maxpool"]
    env = {**os.environ, "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "1")}
    try:
        p = subprocess.run(cmd, cwd=repo / "part2", capture_output=True, text=True, timeout=timeout, env=env)
        return p.stdout + p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        return out, None


def checkouts(root: Path) -> Iterator[Path]:
    """The checkouts under ``root`` that hold the assignment's harness."""
    for p in sorted(root.iterdir()):
        if (p / "part2" / "test_harness.py").is_file() and (p / "part2" / "conv2d.py").is_file():
            yield p
