"""The one record every analysis rule emits.

Findings are plain data so that the review pipeline can quote them (observed → expected →
suggestion, with a source line) and RL reward code can serialise them without importing
anything from the analysers.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

Severity = Literal["error", "warning", "info"]
"""``error``: wrong on hardware, wrong on hidden shapes, or an integrity violation.
``warning``: a likely performance or fidelity defect an NKI expert would ask to fix.
``info``: a style, version or performance note that does not lower a verdict on its own."""

SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")

Category = Literal["correctness", "integrity", "performance", "idiom", "api-version", "fidelity"]
"""Which question a rule answers; the review maps categories onto rubric criteria."""

CATEGORIES: tuple[Category, ...] = ("correctness", "integrity", "performance", "idiom", "api-version", "fidelity")


@dataclass(frozen=True)
class Finding:
    """One observation about one place in a source file.

    ``line`` and ``col`` are 1-based (col 0 when a finding concerns a whole file); they refer
    to the NKI source except for findings whose ``source`` is ``"cuda"``.
    """

    rule: str
    severity: Severity
    message: str
    line: int
    col: int = 0
    suggestion: str = ""
    category: Category = "idiom"
    source: Literal["nki", "cuda"] = "nki"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (keys are stable; the review's report schema relies on them)."""
        return asdict(self)
