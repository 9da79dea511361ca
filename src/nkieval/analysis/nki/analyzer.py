"""Run the NKI rule catalogue over one source file."""

from __future__ import annotations

from collections.abc import Iterable

from nkieval.analysis.finding import Finding
from nkieval.analysis.nki.model import NkiSyntaxError, SourceModel, build_model
from nkieval.hardware import Target, get_target


class UnknownRuleError(KeyError):
    """A rule id passed in ``select`` is not in the catalogue."""


def analyze_nki(source: str, filename: str = "<kernel>", *, target: str | Target | None = None,
                select: Iterable[str] | None = None) -> list[Finding]:
    """Findings of the NKI rules on ``source``, sorted by position.

    ``target`` picks the hardware facts (partitions, PSUM limits) the rules quote; ``select``
    restricts the run to some rule ids. Unparsable source yields one NKI000 finding rather than
    an exception, so a review of garbage still has evidence to cite.
    """
    from nkieval.analysis.registry import NKI_RULES

    if not isinstance(source, str):
        raise TypeError(f"analyze_nki: source must be str, got {type(source).__name__}")
    ids = list(NKI_RULES) if select is None else list(select)
    unknown = [i for i in ids if i not in NKI_RULES]
    if unknown:
        raise UnknownRuleError(f"unknown NKI rule id(s) {unknown}; known: {', '.join(NKI_RULES)}")
    tgt = target if isinstance(target, Target) else get_target(target)
    try:
        model = build_model(source, filename, tgt)
    except NkiSyntaxError as e:
        if "NKI000" not in ids:
            return []
        rule = NKI_RULES["NKI000"]
        return [rule.finding(f"{filename} does not parse as Python: {e}", e.line, e.col,
                             "fix the syntax error; nothing else in the file was analysed")]
    return run_rules(model, ids)


def run_rules(model: SourceModel, ids: Iterable[str]) -> list[Finding]:
    from nkieval.analysis.registry import NKI_RULES

    findings: list[Finding] = []
    for rid in ids:
        findings.extend(NKI_RULES[rid].check(model))
    return sorted(set(findings), key=lambda f: (f.line, f.col, f.rule, f.message))
