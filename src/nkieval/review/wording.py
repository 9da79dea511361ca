"""How the review words numbers and causes: 3 significant digits, shares of elements, case lists, and the
confidence of a stated cause read off the numerics diagnosis.

One place for these so every criterion's feedback and every report format say the same thing the same
way (the Markdown, HTML and JSON reports all print what the scorers wrote).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

#: numerics diagnosis findings that name a cause from the error's signature (where it is, its shape), not
#: from re-running the op: "matched pattern"
PATTERN_FINDINGS = frozenset({"zeros", "constant_factor", "nan_produced", "nan_swallowed", "tile_edge", "last_tile",
                              "localized", "output_grid"})


def num(v: Any) -> str:
    """A measured figure to 3 significant digits (integers as they are; inf and NaN by name)."""
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, int):
        return f"{v:,}" if abs(v) >= 10_000 else str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        if v == int(v) and abs(v) < 1e6:
            return str(int(v))
        return f"{v:.3g}"
    if isinstance(v, str):
        try:
            return num(float(v))
        except ValueError:
            return v
    return str(v)


def share(count: int, total: int) -> str:
    """``5 of 262,144 elements (0.00191%)``: a count and its share, so 5 wrong elements and all of them differ."""
    pct = 100.0 * count / total if total else 0.0
    return f"{num(int(count))} of {num(int(total))} elements ({pct:.3g}%)"


def case_list(cases: Sequence[str], limit: int = 4) -> str:
    """The first ``limit`` case labels and how many more."""
    xs = list(cases)
    more = f" and {len(xs) - limit} more" if len(xs) > limit else ""
    return ", ".join(xs[:limit]) + more


def index(ix: Any) -> str:
    """A multi-index as ``[3, 7]``."""
    if isinstance(ix, list | tuple):
        return "[" + ", ".join(str(int(i)) for i in ix) + "]"
    return str(ix)


def reproduced(finding: dict[str, Any] | None) -> bool:
    return bool(finding) and "reproduces" in str(finding.get("evidence", ""))  # type: ignore[union-attr]


def finding_confidence(finding: dict[str, Any] | None) -> str | None:
    """How the numerics diagnosis established ``finding``'s cause: reproduced, matched pattern, or suspected."""
    if not finding or not finding.get("cause"):
        return None
    if reproduced(finding):
        return "reproduced"
    if finding.get("id") in PATTERN_FINDINGS:
        return "matched-pattern"
    return "suspected"


def stated(cause: str, confidence: str | None) -> str:
    """A cause worded by how sure it is: a suspected cause is said to be suspected."""
    if confidence == "suspected":
        return f"suspected cause (not confirmed): {cause}"
    if confidence == "reproduced":
        return f"cause (reproduced): {cause}"
    if confidence == "matched-pattern":
        return f"likely cause (matched pattern): {cause}"
    return cause


def relative_error(got: Any, expected: Any) -> float | None:
    try:
        g, e = float(got), float(expected)
    except (TypeError, ValueError):
        return None
    if not (math.isfinite(g) and math.isfinite(e)) or e == 0:
        return None
    return abs(g - e) / abs(e)
