"""The task audit names every seeded defect in the right criterion (issue 28).

Each defective task is a copy of a good built-in task with one documented change
(tests/tasks/audit_defects); each is audited on the criterion that must name it, and the untouched
base tasks are audited on the same criteria as the control: none of the seeded rules may appear
there, so a finding cannot come from the base task itself.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from audit_defects import DEFECTS, Defect, make, make_base

from nkieval.tasks.audit import CRITERION_IDS, audit_task

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def defect_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("audit-defects")
    for d in DEFECTS:
        make(d, root)
    return root


def test_catalogue_covers_every_criterion() -> None:
    assert len(DEFECTS) >= 20
    assert {d.criterion for d in DEFECTS} == set(CRITERION_IDS)
    assert len({d.id for d in DEFECTS}) == len(DEFECTS)


@pytest.mark.parametrize("defect", DEFECTS, ids=[d.id for d in DEFECTS])
def test_audit_names_the_defect(defect: Defect, defect_root: Path) -> None:
    rep = audit_task(defect_root / defect.id, criteria=(defect.criterion,), all_targets=False, max_mutants=12)
    crit = rep.criterion(defect.criterion)
    rules = [f.rule for f in crit.findings if f.severity != "info"]
    assert defect.rule in rules, f"{defect.id}: expected {defect.rule} in {defect.criterion}, got {rules}: " \
                                 f"{[f.observed for f in crit.findings]}"
    assert rep.verdict == ("bad-task" if defect.bad_task else "findings")
    assert crit.level is not None and crit.level < 4


@pytest.mark.parametrize("base", sorted({d.base for d in DEFECTS}))
def test_base_tasks_have_none_of_the_seeded_findings(base: str, defect_root: Path) -> None:
    """The control: the prepared base task without a defect, audited on every criterion its defects are
    seeded in."""
    seeded = {(d.criterion, d.rule) for d in DEFECTS if d.base == base}
    rep = audit_task(make_base(base, defect_root, f"control_{base}"), criteria=tuple(sorted({c for c, _ in seeded})), all_targets=False, max_mutants=12)
    got = {(f.criterion, f.rule) for f in rep.findings if f.severity != "info"}
    assert not (got & seeded), f"{base} itself has {sorted(got & seeded)}"
