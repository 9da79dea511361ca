"""Reports: the published JSON Schema, validation, and Markdown written for people.

The Markdown is evidence-first and short: a verdict line, a table of criteria, then only the
feedback lines the scorers produced (each observed → expected → suggestion with its evidence)
and a compact case table. No praise, no generic advice: every sentence comes from a number or
a source line of this kernel.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from nkieval.review.model import Review

SCHEMA_FILE = "review-report-v2.json"


@cache
def report_schema() -> dict[str, Any]:
    """The checked-in JSON Schema of ``Review.to_dict()``."""
    return json.loads(resources.files("nkieval.review").joinpath("schemas", SCHEMA_FILE).read_text())


def validate_report(report: dict[str, Any]) -> None:
    """Raise ``jsonschema.ValidationError`` when ``report`` does not follow the schema (needs jsonschema)."""
    import jsonschema

    jsonschema.validate(report, report_schema(), cls=jsonschema.Draft202012Validator)


def _level(c: Any) -> str:
    return "—" if c.level is None else f"{c.level}/4"


def to_markdown(r: Review) -> str:
    lines = [f"# Review: {r.task} — {r.candidate} on {r.target}", ""]
    assessed = sum(c.level is not None for c in r.criteria)
    lines.append(f"**Verdict: {r.verdict.upper()}** — score {r.score:.1f}/100 "
                 f"({assessed} of {len(r.criteria)} criteria assessed; rubric {r.rubric} {r.rubric_version}; "
                 f"seed {r.seed})")
    if r.verdict != "pass" and r.verdict_message:
        lines += ["", f"{r.verdict} ({r.verdict_reason}): {r.verdict_message}"]
    lines += ["", "| Criterion | Level | Weight | Summary |", "|---|---|---|---|"]
    for c in r.criteria:
        cap = f" _(capped: {c.capped_by})_" if c.capped_by else ""
        lines.append(f"| {c.title} | {_level(c)} | {c.weight:g} | {c.summary}{cap} |")
    fb = [(c, f) for c in r.criteria for f in c.feedback]
    if fb:
        lines += ["", "## Findings"]
        for c, f in fb:
            ev = _evidence_tag(f.evidence)
            lines.append(f"- **{c.title}** ({f.severity}): {f.observed} → *expected* {f.expected} → "
                         f"*suggestion* {f.suggestion}{ev}")
    lines += ["", "## Cases", "", "| Case | Shape | Family | Status | Result | Instructions |", "|---|---|---|---|---|---|"]
    for cs in r.cases:
        res = "correct" if cs.correct else (cs.mismatch or {}).get("kind", cs.status) if cs.status == "ok" else "—"
        if cs.numerics:
            res += f"; numerics {cs.numerics.get('status')} (margin {_num(cs.numerics.get('margin'))})"
        shape = ", ".join(f"{k}={v}" for k, v in cs.shape.items())
        lines.append(f"| {cs.case} | {shape} | {cs.family} | {cs.status} | {res} | {cs.instructions or '—'} |")
    if r.not_assessed:
        lines += ["", "## Not assessed", *[f"- {x}" for x in r.not_assessed]]
    return "\n".join(lines) + "\n"


def _num(v: Any) -> str:
    return f"{v:.3g}" if isinstance(v, int | float) else str(v)


def _evidence_tag(ev: dict[str, Any]) -> str:
    keys = [k for k in ("case", "seed", "metric", "value", "reference", "location", "rule") if ev.get(k) is not None]
    if not keys:
        return ""
    parts = [f"{k} {_num(ev[k]) if k in ('value', 'reference') else ev[k]}" for k in keys]
    return " _(evidence: " + "; ".join(parts) + ")_"
