"""The rule catalogue's conventions: ids, doc sections, fixtures, goldens, and docs/analysis.md in sync."""

from __future__ import annotations

from pathlib import Path

import pytest

from nkieval.analysis import RULES, Rule
from nkieval.analysis.docs import render_catalogue
from nkieval.analysis.finding import CATEGORIES, SEVERITIES
from nkieval.analysis.rule import SECTIONS, RuleDefinitionError, make_rule

ROOT = Path(__file__).resolve().parents[2]
FIX = Path(__file__).parent / "fixtures"


@pytest.mark.parametrize("rule", list(RULES.values()), ids=list(RULES))
def test_rule_conventions(rule: Rule) -> None:
    assert list(rule.sections()) == list(SECTIONS)
    assert all(body.strip() for body in rule.sections().values()), "empty doc section"
    assert rule.severity in SEVERITIES and rule.category in CATEGORIES
    assert rule.summary and not rule.summary.endswith(" ")
    folder = "nki" if rule.id.startswith("NKI") else "mig"
    assert (FIX / folder / f"{rule.id}.pysrc").exists(), "each rule has a fixture"
    assert (Path(__file__).parent / "golden" / f"{rule.id}.json").exists(), "each rule has a golden output"


def test_ids_are_unique_and_sorted() -> None:
    ids = list(RULES)
    assert len(ids) == len(set(ids))
    assert ids == sorted(ids, key=lambda i: (i[:3] != "NKI", i))


def test_docs_page_is_in_sync() -> None:
    page = (ROOT / "docs" / "analysis.md").read_text()
    assert page == render_catalogue(), "regenerate: python -m nkieval.analysis.docs > docs/analysis.md"
    for rid in RULES:
        assert f"### {rid} " in page


def test_make_rule_rejects_bad_definitions() -> None:
    doc = "NKI999 demo: x.\n\n" + "\n".join(f"## {s}\ntext\n" for s in SECTIONS)
    make_rule(doc, id="NKI999", name="demo", severity="info", category="idiom", check=lambda m: [])
    with pytest.raises(RuleDefinitionError, match="must look like"):
        make_rule(doc, id="X1", name="demo", severity="info", category="idiom", check=lambda m: [])
    with pytest.raises(RuleDefinitionError, match="doc sections"):
        make_rule(doc.replace("## Example", "## Sample"), id="NKI999", name="demo", severity="info",
                  category="idiom", check=lambda m: [])
    with pytest.raises(RuleDefinitionError, match="must start with"):
        make_rule(doc, id="NKI998", name="demo", severity="info", category="idiom", check=lambda m: [])
