"""Reports: the published JSON Schema, validation, and the Markdown and HTML written for people.

The Markdown and the HTML come from templates (:mod:`nkieval.review.render`); both are evidence-first
and short: a verdict line that says what ``pass`` covers, a table of criteria (a capped level says what
it would have been and why), one finding per cause (observed → expected → suggestion with its evidence and
how sure its stated cause is), and a compact case table. No praise, no generic advice: every sentence
comes from a number or a source line of this kernel.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from nkieval.hardware import get_target
from nkieval.perf import MODEL_VERSION
from nkieval.perf.params import load_params
from nkieval.review.lean import restore_uncertainty
from nkieval.review.model import Review

SCHEMA_FILE = "review-report-v3.json"
#: earlier schemas, kept to validate old reports (``validate_report(d, schema=...)``)
SCHEMA_FILES = {"2": "review-report-v2.json", "3": SCHEMA_FILE}


@cache
def report_schema(version: str = "3") -> dict[str, Any]:
    """The checked-in JSON Schema of ``Review.to_dict()`` (``version``: the report's major version)."""
    return json.loads(resources.files("nkieval.review").joinpath("schemas", SCHEMA_FILES[version]).read_text())


class ReportValidationError(ValueError):
    """A report does not follow its schema (the path in the document and what is wrong)."""


def validate_report(report: dict[str, Any]) -> None:
    """Raise when ``report`` does not follow the schema of its major version (2 or 3).

    With jsonschema installed (the dev extra) it validates fully and raises
    ``jsonschema.ValidationError``; without it, :mod:`nkieval.review.minischema` checks the subset of
    JSON Schema the report schemas use (types, required, enum, const, minimum/maximum, items,
    properties, additionalProperties, $ref to $defs) and raises :class:`ReportValidationError`.
    """
    major = str(report.get("version", "3")).split(".")[0] if isinstance(report, dict) else "3"
    schema = report_schema(major if major in SCHEMA_FILES else "3")
    try:
        import jsonschema
    except ImportError:
        from nkieval.review.minischema import validate

        problem = validate(report, schema)
        if problem:
            raise ReportValidationError(problem) from None
        return
    jsonschema.validate(report, schema, cls=jsonschema.Draft202012Validator)


def to_markdown(r: Review) -> str:
    """The review as Markdown (``templates/review.md.j2``)."""
    from nkieval.review.render import to_markdown as md

    return md(r)


def to_html(r: Review) -> str:
    """The review as one self-contained HTML page (``templates/review.html.j2``)."""
    from nkieval.review.render import to_html as html

    return html(r)


def expand_references(report: dict[str, Any]) -> dict[str, Any]:
    """A 3.x JSON report with every ``{"ref": hash}`` replaced by the evidence it names (``references``), so a
    reader written for 2.x finds ``performance.solution._total_time`` and ``hardware.baseline`` where they were;
    a 3.2 uncertainty statement gets its parameters' sources and ``by_status`` back (the sources only where the
    report's model version and parameters are the current model's). The result still carries ``references``;
    it is a copy."""
    import copy

    d = copy.deepcopy(report)
    refs = d.get("references") or {}

    def expand(v: Any) -> Any:
        if isinstance(v, dict):
            if set(v) == {"ref"} and v["ref"] in refs:
                rec = refs[v["ref"]]
                data = expand(copy.deepcopy(rec["data"]))
                return restore_uncertainty(data, _documented_params) if rec.get("kind") == "uncertainty" else data
            return {k: expand(x) for k, x in v.items()}
        if isinstance(v, list):
            return [expand(x) for x in v]
        return v

    for k in ("hardware", "performance", "cases"):
        if k in d:
            d[k] = expand(d[k])
    return d



def _documented_params(model_version: str, target: str) -> dict[str, Any] | None:
    """The current performance model's parameters of ``target`` with their sources (None: another model version
    or an unknown target)."""
    if model_version != MODEL_VERSION:
        return None
    try:
        return load_params(get_target(target)).to_dict()
    except ValueError:
        return None
