"""Compare a CUDA kernel's fact sheet with its NKI port: the MIG rule catalogue."""

from __future__ import annotations

from collections.abc import Iterable

from nkieval.analysis.cuda.summary import CudaSummary
from nkieval.analysis.finding import Finding
from nkieval.analysis.migration.context import MigrationContext
from nkieval.analysis.nki.analyzer import UnknownRuleError, analyze_nki, run_rules
from nkieval.analysis.nki.model import NkiSyntaxError, SourceModel, build_model
from nkieval.hardware import Target, get_target


def migration_fidelity(summary: CudaSummary, nki_source: str, *, filename: str = "<kernel>",
                       target: str | Target | None = None, select: Iterable[str] | None = None) -> list[Finding]:
    """MIG findings: what the CUDA kernel does that the NKI port does not (or does differently).

    If the port does not parse, the NKI000 finding is returned instead, since nothing can be compared.
    """
    from nkieval.analysis.registry import MIG_RULES, NKI_RULES

    if not isinstance(summary, CudaSummary):
        raise TypeError(f"migration_fidelity: summary must be a CudaSummary (from parse_cuda), got "
                        f"{type(summary).__name__}")
    if not isinstance(nki_source, str):
        raise TypeError(f"migration_fidelity: nki_source must be str, got {type(nki_source).__name__}")
    ids = list(MIG_RULES) if select is None else list(select)
    unknown = [i for i in ids if i not in MIG_RULES]
    if unknown:
        raise UnknownRuleError(f"unknown MIG rule id(s) {unknown}; known: {', '.join(MIG_RULES)}")
    tgt = target if isinstance(target, Target) else get_target(target)
    try:
        model = build_model(nki_source, filename, tgt)
    except NkiSyntaxError:
        return analyze_nki(nki_source, filename, target=tgt, select=["NKI000"])
    return _mig_rules(summary, model, run_rules(model, NKI_RULES), ids)


def analyze_port(summary: CudaSummary | None, nki_source: str, *, filename: str = "<kernel>",
                 target: str | Target | None = None) -> tuple[list[Finding], list[Finding] | None]:
    """Every NKI finding on ``nki_source`` and, when ``summary`` is given, every MIG finding.

    The same results as :func:`analyze_nki` and :func:`migration_fidelity` with all rules, from one
    model of the source: the MIG rules read the NKI findings, so a review that wants both pays for
    the parse and the NKI rules once. MIG findings are None without a CUDA summary.
    """
    from nkieval.analysis.registry import MIG_RULES, NKI_RULES

    if summary is not None and not isinstance(summary, CudaSummary):
        raise TypeError(f"analyze_port: summary must be a CudaSummary (from parse_cuda) or None, got "
                        f"{type(summary).__name__}")
    if not isinstance(nki_source, str):
        raise TypeError(f"analyze_port: nki_source must be str, got {type(nki_source).__name__}")
    tgt = target if isinstance(target, Target) else get_target(target)
    try:
        model = build_model(nki_source, filename, tgt)
    except NkiSyntaxError:
        nki = analyze_nki(nki_source, filename, target=tgt)
        return nki, (None if summary is None else [f for f in nki if f.rule == "NKI000"])
    nki = run_rules(model, NKI_RULES)
    return nki, (None if summary is None else _mig_rules(summary, model, nki, list(MIG_RULES)))


def _mig_rules(summary: CudaSummary, model: SourceModel, nki_findings: list[Finding], ids: list[str]) -> list[Finding]:
    from nkieval.analysis.registry import MIG_RULES

    ctx = MigrationContext(cuda=summary, nki=model, nki_findings=nki_findings)
    findings: list[Finding] = []
    for rid in ids:
        findings.extend(MIG_RULES[rid].check(ctx))
    return sorted(set(findings), key=lambda f: (f.line, f.col, f.rule, f.message))
