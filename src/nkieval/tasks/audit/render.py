"""The task audit as one self-contained HTML page, from a Jinja2 template (``tasks/audit/templates``).

It reuses the review's stylesheet (``review/templates/_style.css.j2``: the audit composes the review, never
the other way round) so a task's audit and a candidate's review read alike: verdict and rubric table, then
each criterion's findings (observed, expected, suggestion, the mutant's diff) and its measurement tables.
The page has inline CSS only: no script, no font, nothing fetched from the network.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from nkieval.tasks.audit.model import AUDIT_SCHEMA, AUDIT_VERSION, AuditReport


@cache
def _env() -> Any:
    import jinja2

    from nkieval.review import wording

    loader = jinja2.ChoiceLoader([jinja2.PackageLoader("nkieval.tasks.audit", "templates"),
                                  jinja2.PackageLoader("nkieval.review", "templates")])
    env = jinja2.Environment(loader=loader, autoescape=True, trim_blocks=True, lstrip_blocks=True,
                             keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    env.filters["num"] = wording.num
    return env


def table_cells(rows: list[str]) -> tuple[list[str], list[list[str]]]:
    """A Markdown table (header, separator, rows; as the criteria write them) as header cells and rows of
    cells; lines that are not table rows are dropped."""
    cells = [[x.strip() for x in r.strip().strip("|").split("|")] for r in rows if r.strip().startswith("|")]
    body = [c for c in cells[1:] if not all(set(x) <= set("-: ") for x in c)]
    return (cells[0] if cells else []), body


def view(rep: AuditReport) -> dict[str, Any]:
    """What the template shows, every figure already in words."""
    criteria = []
    for c in rep.criteria:
        tables = []
        rows = c.measurements.get("table")
        if isinstance(rows, list):
            # (the discriminates table holds the trivial and the mutant tables, split by a blank line)
            parts: list[list[str]] = [[]]
            for r in rows:
                if str(r).strip():
                    parts[-1].append(str(r))
                else:
                    parts.append([])
            tables = [table_cells(p) for p in parts if p]
        criteria.append({
            "id": c.id, "title": c.title, "weight": c.weight, "level": "n/a" if c.level is None else f"{c.level}/4",
            "raw_level": c.level, "summary": c.summary, "tables": tables,
            "findings": [{"severity": f.severity, "rule": f.rule, "observed": f.observed, "expected": f.expected,
                          "suggestion": f.suggestion, "diff": str(f.evidence.get("diff") or "")}
                         for f in c.findings],
        })
    return {"rep": rep, "criteria": criteria, "schema": AUDIT_SCHEMA, "version": AUDIT_VERSION,
            "errors": sum(f.severity == "error" for f in rep.findings),
            "warnings": sum(f.severity == "warning" for f in rep.findings),
            "timings": ", ".join(f"{k.removesuffix('_s')} {v:.1f} s" for k, v in rep.timings.items())}


def to_html(rep: AuditReport) -> str:
    """The audit as one self-contained HTML page."""
    return _env().get_template("audit.html.j2").render(**view(rep))
