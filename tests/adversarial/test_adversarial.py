"""The adversarial suite: hostile candidates must be caught and contained, legitimate ones must pass.

One review per candidate (see harness.py and README.md). Hostile candidates that today's
pipeline lets through are listed in ``harness.KNOWN_HOLES`` and marked xfail(strict=True).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness

CANDS = harness.discover()


def _params() -> list[object]:
    out = []
    for c in CANDS:
        why = harness.hole_reason(c.name)
        marks = [pytest.mark.slow]
        if why is not None:
            marks.append(pytest.mark.xfail(strict=True, reason=f"passes until trusted execution lands: {why}"))
        out.append(pytest.param(c, id=c.name, marks=marks))
    return out


def test_headers_and_counts() -> None:
    hostile = [c for c in CANDS if c.kind == "hostile"]
    legit = [c for c in CANDS if c.kind == "legit"]
    assert len(hostile) >= 60 and len(legit) >= 15
    assert len({c.task for c in hostile}) >= 8
    for c in hostile:
        assert c.expect == "caught", c.name
        assert c.header.get("class") == c.path.parent.name, c.name
        assert c.why, c.name
    for c in legit:
        assert c.expect == "pass", c.name
    names = {c.name for c in CANDS}
    for n, _why in harness.KNOWN_HOLES:
        assert n in names, f"KNOWN_HOLES names {n}, which is not a candidate"


@pytest.mark.parametrize("cand", _params())
def test_candidate(cand: harness.Candidate) -> None:
    out = harness.evaluate(cand, grace_s=harness.GRACE_S if cand.kind == "hostile" else 0.2)
    assert out.ok, out.describe()
