"""Op-level conformance: every case in the tables runs against its NumPy expectation, and every
illegal use raises ``NkiValidationError`` with the expected rule. Cases for a front end that
is not importable in this checkout are skipped (the Beta-1 front end is optional)."""

from __future__ import annotations

import pytest
from conf_cases_beta1 import CASES as B1_CASES
from conf_cases_beta1 import ILLEGAL as B1_ILLEGAL
from conf_cases_isa import CASES as ISA_CASES
from conf_cases_isa import ILLEGAL as ISA_ILLEGAL
from conf_cases_language import CASES as NL_CASES
from conf_cases_language import ILLEGAL as NL_ILLEGAL
from conf_cases_views import CASES as VIEW_CASES
from conf_cases_views import ILLEGAL as VIEW_ILLEGAL
from conf_coverage import REFUSED, beta1_coverage, coverage, format_listing
from conf_kit import Case, Illegal, compare, expect_rule, frontend_available, run

CASES = ISA_CASES + NL_CASES + VIEW_CASES + B1_CASES
ILLEGAL = ISA_ILLEGAL + NL_ILLEGAL + VIEW_ILLEGAL + B1_ILLEGAL


def _require_frontend(case: Case | Illegal) -> None:
    """Both front ends ship with nkieval: one that does not import fails the case (no skip)."""
    frontend_available(case.frontend)


def _id(c: Case | Illegal) -> str:
    return f"beta1:{c.name}" if c.frontend == "beta1" else c.name


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_legal(case: Case) -> None:
    _require_frontend(case)
    out = run(case)
    if case.check is not None:
        nargs = case.check.__code__.co_argcount
        case.check(out, *case.args[: max(0, nargs - 1)])
    if case.expect is not None:
        compare(out, case.expect(*case.args), case.rtol, case.atol)
    assert case.check is not None or case.expect is not None, f"{case.name} checks nothing"


@pytest.mark.parametrize("case", ILLEGAL, ids=[_id(c) for c in ILLEGAL])
def test_illegal(case: Illegal) -> None:
    _require_frontend(case)
    expect_rule(case)


def test_every_instruction_has_a_legal_and_an_illegal_case() -> None:
    """The generated coverage listing: every nki.isa instruction must have conformance cases."""
    cov = coverage()
    print(format_listing(cov, refused=REFUSED))
    missing = [n for n, c in cov["nisa"].items() if not c["legal"]]
    assert not missing, f"nki.isa instructions without a conformance case: {missing}"


def test_every_language_call_has_a_legal_case() -> None:
    """Every nki.language call (less the types and the names refused on purpose) and every tensor method."""
    cov = coverage()
    missing = [f"{ns}.{n}" for ns in ("nl", "tensor") for n, c in cov[ns].items()
               if not c["legal"] and f"{ns}.{n}" not in REFUSED]
    assert not missing, f"nki.language APIs without a legal conformance case: {missing}"


def test_refused_names_have_an_illegal_case() -> None:
    """A name refused on purpose must be shown to refuse with its rule (an illegal case), not just skipped."""
    from conf_cases_isa import ILLEGAL as ISA_ILLEGAL
    from conf_cases_language import ILLEGAL as NL_ILLEGAL
    from conf_cases_views import ILLEGAL as VIEW_ILLEGAL
    from conf_coverage import REFUSED

    refused_apis = {c.api for c in ISA_ILLEGAL + NL_ILLEGAL + VIEW_ILLEGAL}
    assert REFUSED <= refused_apis, sorted(REFUSED - refused_apis)


def test_table_names_exist() -> None:
    """A case for an API name that does not exist is a typo in the table, not coverage."""
    cov = coverage()
    assert not cov["unknown"], f"conformance cases name unknown APIs: {cov['unknown']}"


def test_every_beta1_instruction_has_a_legal_case() -> None:
    """The Beta-1 listing: every neuronxcc.nki.isa instruction (not refused on purpose) has a legal case, and
    every neuronxcc.nki.language API too."""
    frontend_available("beta1")
    cov = beta1_coverage()
    print(format_listing(cov, ("nisa", "nl", "ncc", "nt"), "Beta 1 (neuronxcc.nki):"))
    missing = [f"{ns}.{n}" for ns in ("nisa", "nl", "ncc", "nt") for n, c in cov[ns].items() if not c["legal"]]
    assert not missing, f"Beta-1 APIs without a legal conformance case: {missing}"
    assert not cov["unknown"], f"Beta-1 conformance cases name unknown APIs: {cov['unknown']}"


def test_the_beta1_alias_is_nkievals_front_end_and_its_cases_are_collected() -> None:
    """``neuronxcc.nki`` is nkieval's Beta-1 front end (a broken alias fails here and in every Beta-1 case,
    never skips them), and the Beta-1 cases are part of the table."""
    import neuronxcc.nki as b1  # type: ignore[import-not-found]

    assert b1.__name__.startswith("nkieval.frontends") or "nkieval" in str(getattr(b1, "__file__", "")), b1
    n_beta1 = sum(c.frontend == "beta1" for c in CASES) + sum(c.frontend == "beta1" for c in ILLEGAL)
    assert n_beta1 >= 150, n_beta1
