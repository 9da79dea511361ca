"""Op-level conformance: every case in the tables runs against its NumPy expectation, and every
illegal use raises ``NkiValidationError`` with the expected rule. Cases for a front end that
is not importable in this checkout are skipped (the Beta-1 front end is optional)."""

from __future__ import annotations

import pytest
from conf_cases_isa import CASES as ISA_CASES
from conf_cases_isa import ILLEGAL as ISA_ILLEGAL
from conf_cases_language import CASES as NL_CASES
from conf_cases_language import ILLEGAL as NL_ILLEGAL
from conf_cases_views import CASES as VIEW_CASES
from conf_cases_views import ILLEGAL as VIEW_ILLEGAL
from conf_coverage import coverage, format_listing
from conf_kit import Case, Illegal, compare, expect_rule, frontend_available, run

CASES = ISA_CASES + NL_CASES + VIEW_CASES
ILLEGAL = ISA_ILLEGAL + NL_ILLEGAL + VIEW_ILLEGAL


def _skip_unavailable(case: Case | Illegal) -> None:
    if not frontend_available(case.frontend):
        pytest.skip(f"front end {case.frontend} is not importable in this checkout")


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_legal(case: Case) -> None:
    _skip_unavailable(case)
    out = run(case)
    if case.check is not None:
        nargs = case.check.__code__.co_argcount
        case.check(out, *case.args[: max(0, nargs - 1)])
    if case.expect is not None:
        compare(out, case.expect(*case.args), case.rtol, case.atol)
    assert case.check is not None or case.expect is not None, f"{case.name} checks nothing"


@pytest.mark.parametrize("case", ILLEGAL, ids=[c.name for c in ILLEGAL])
def test_illegal(case: Illegal) -> None:
    _skip_unavailable(case)
    expect_rule(case)


def test_every_instruction_has_a_legal_and_an_illegal_case() -> None:
    """The generated coverage listing: every nki.isa instruction must have conformance cases."""
    cov = coverage()
    print(format_listing(cov))
    missing = [n for n, c in cov["nisa"].items() if not c["legal"]]
    assert not missing, f"nki.isa instructions without a conformance case: {missing}"


def test_table_names_exist() -> None:
    """A case for an API name that does not exist is a typo in the table, not coverage."""
    cov = coverage()
    assert not cov["unknown"], f"conformance cases name unknown APIs: {cov['unknown']}"
