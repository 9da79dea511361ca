"""Review NKI kernels against tasks: sandboxed runs, evidence, a versioned rubric, reports.

``nkieval.review.review(task, candidate) -> Review`` is the programmatic entry point; see
:mod:`nkieval.review.pipeline`. Attributes are loaded lazily so that the sandboxed child,
which imports :mod:`nkieval.review.child`, does not pull in the whole pipeline.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Review", "load_rubric", "redact_hidden", "review", "to_html", "to_markdown", "validate_report"]


def __getattr__(name: str) -> Any:
    if name == "review":
        from nkieval.review.pipeline import review

        return review
    if name == "Review":
        from nkieval.review.model import Review

        return Review
    if name in ("to_markdown", "to_html", "validate_report"):
        from nkieval.review import report

        return getattr(report, name)
    if name == "redact_hidden":
        from nkieval.review.redact import redact_hidden

        return redact_hidden
    if name == "load_rubric":
        from nkieval.review.rubric import load_rubric

        return load_rubric
    raise AttributeError(f"module 'nkieval.review' has no attribute {name!r}")
