"""Golden-output tests: each rule's fixture (bad and good variants) gives exactly the recorded findings.

Regenerate after an intentional change with ``NKIEVAL_UPDATE_GOLDEN=1 pytest tests/analysis/test_golden.py``
and review the diff of tests/analysis/golden/*.json.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from nkieval.analysis import MIG_RULES, NKI_RULES, analyze_nki, migration_fidelity, parse_cuda

HERE = Path(__file__).parent
FIX = HERE / "fixtures"
GOLDEN = HERE / "golden"
UPDATE = os.environ.get("NKIEVAL_UPDATE_GOLDEN") == "1"


def _check(rule_id: str, got: list[dict]) -> None:
    path = GOLDEN / f"{rule_id}.json"
    if UPDATE:
        path.write_text(json.dumps(got, indent=1) + "\n")
    assert path.exists(), f"no golden output {path}; run with NKIEVAL_UPDATE_GOLDEN=1 to record it"
    want = json.loads(path.read_text())
    assert got == want, f"{rule_id} findings changed; see {path}"
    assert want, f"{rule_id}: the fixture must trigger the rule at least once"
    assert all(f["rule"] == rule_id for f in want)


@pytest.mark.parametrize("rule_id", list(NKI_RULES))
def test_nki_rule_golden(rule_id: str) -> None:
    src = (FIX / "nki" / f"{rule_id}.pysrc").read_text()
    got = [f.to_dict() for f in analyze_nki(src, f"{rule_id}.py", target="trn2", select=[rule_id])]
    _check(rule_id, got)


@pytest.mark.parametrize("rule_id", list(MIG_RULES))
def test_mig_rule_golden(rule_id: str) -> None:
    src = (FIX / "mig" / f"{rule_id}.pysrc").read_text()
    header = src.splitlines()[0]
    assert header.startswith("# cuda: "), "MIG fixtures name their CUDA source on line 1"
    summary = parse_cuda((FIX / "cuda" / header.split(":", 1)[1].strip()).read_text())
    got = [f.to_dict() for f in migration_fidelity(summary, src, filename=f"{rule_id}.py", target="trn2",
                                                   select=[rule_id])]
    _check(rule_id, got)
