"""Helpers shared by the review tests."""

from __future__ import annotations

import json
from typing import Any


def report_outcome(r: Any) -> dict[str, Any]:
    """The review's JSON report without what measures time: its timings and each case's simulation seconds (a
    case's only time field). Two reviews that judge alike give equal outcomes."""
    d = r.to_dict()
    d.pop("timings", None)
    for c in d.get("cases", []):
        c.pop("sim_s", None)
    return d


def report_text(r: Any) -> str:
    """:func:`report_outcome` as canonical JSON text."""
    return json.dumps(report_outcome(r), sort_keys=True, default=str)
