"""The rule record: id, name, default severity, category, documentation and check function.

Each rule lives in its own module whose docstring is the rule's documentation, written in
fixed sections (What it does / Why is this bad / Example / Use instead / References), as
in Ruff's rule catalogue. The registry (``registry.py``) is the single table of rules.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from nkieval.analysis.finding import Category, Finding, Severity

SECTIONS: tuple[str, ...] = ("What it does", "Why is this bad", "Example", "Use instead", "References")

_ID_RE = re.compile(r"^(NKI|MIG)\d{3}$")
_SECTION_RE = re.compile(r"^## (.+?)\??\s*$", re.MULTILINE)


class RuleDefinitionError(ValueError):
    """A rule module breaks the catalogue's conventions (bad id, missing doc section, ...)."""


@dataclass(frozen=True)
class Rule:
    """A catalogue entry. ``check`` is called by the analyser with a context object
    (:class:`~nkieval.analysis.nki.model.SourceModel` for NKI rules, a migration context for MIG
    rules) and yields findings."""

    id: str
    name: str
    severity: Severity
    category: Category
    summary: str
    doc: str
    check: Callable[[Any], Iterable[Finding]] = field(repr=False, compare=False)

    def sections(self) -> dict[str, str]:
        """The documentation split into its fixed sections (title → body)."""
        return split_sections(self.doc)

    def finding(self, message: str, line: int, col: int = 0, suggestion: str = "",
                severity: Severity | None = None, source: str = "nki") -> Finding:
        """A finding of this rule, with the rule's default severity unless overridden."""
        return Finding(rule=self.id, severity=severity or self.severity, message=message, line=line,
                       col=col, suggestion=suggestion, category=self.category, source=source)  # type: ignore[arg-type]


def split_sections(doc: str) -> dict[str, str]:
    """Split a rule docstring into ``## Section`` blocks."""
    parts = _SECTION_RE.split(doc)
    out: dict[str, str] = {}
    for title, body in zip(parts[1::2], parts[2::2]):
        out[title.strip()] = body.strip("\n")
    return out


def make_rule(module_doc: str | None, *, id: str, name: str, severity: Severity, category: Category,
              check: Callable[[Any], Iterable[Finding]]) -> Rule:
    """Build a :class:`Rule` from a rule module's docstring, checking the conventions.

    The docstring's first line is ``"<ID> <name>: <summary>"``; the rest holds the five sections.
    """
    if not _ID_RE.match(id):
        raise RuleDefinitionError(f"rule id {id!r} must look like NKI012 or MIG003")
    if not module_doc:
        raise RuleDefinitionError(f"rule {id} has no module docstring")
    doc = module_doc.strip()
    first, _, rest = doc.partition("\n")
    prefix = f"{id} {name}: "
    if not first.startswith(prefix):
        raise RuleDefinitionError(f"rule {id}: docstring must start with {prefix!r}, got {first!r}")
    titles = list(split_sections(rest))
    if titles != list(SECTIONS):
        raise RuleDefinitionError(f"rule {id}: doc sections are {titles}, expected {list(SECTIONS)}")
    return Rule(id=id, name=name, severity=severity, category=category,
                summary=first[len(prefix):].strip(), doc=rest.strip(), check=check)
