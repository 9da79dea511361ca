"""The report's Findings: one per cause, and the summary that says what the verdict covers.

The criteria's feedback lines stay as the scorers wrote them (the RL reward and the suite read them);
the report states each cause once. Lines of several criteria that state the same cause share a
``Feedback.key`` (a reproduced formula bug is a Correctness and a Numerical standard line): the first
leads, the others add their one-clause ``brief``. Every finding that states a cause says how it was
established (``Feedback.confidence``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from nkieval.review import wording as W
from nkieval.review.model import CaseResult, CriterionResult, Feedback, Finding

_SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}
_LOCATION = re.compile(r"candidate\.py:(\d+)")


def _confidence(f: Feedback) -> tuple[str | None, str | None]:
    """The line's cause and confidence; static-rule and trace-metric lines get theirs from their kind."""
    if f.cause:
        return f.cause, f.confidence or "suspected"
    rule = f.evidence.get("rule") or f.evidence.get("static_rule")
    if f.criterion in ("code_quality", "migration") and rule and rule != "integrity":
        return f"static rule {rule}", "matched-pattern"
    if f.criterion in ("hardware", "performance") and f.evidence.get("metric"):
        return None, "measured"
    return None, f.confidence


def location(f: Feedback) -> str | None:
    """The candidate line a line cites (``candidate.py:N``), if any."""
    ev = f.evidence
    for k in ("location", "static_line"):
        v = ev.get(k)
        if isinstance(v, int):
            return f"candidate.py:{v}"
        if isinstance(v, str) and _LOCATION.search(v):
            return f"candidate.py:{_LOCATION.search(v).group(1)}"  # type: ignore[union-attr]
    for k in ("frames",):
        for fr in reversed(ev.get(k) or []):
            m = _LOCATION.search(str(fr))
            if m:
                return f"candidate.py:{m.group(1)}"
    m = _LOCATION.search(f.observed)
    return f"candidate.py:{m.group(1)}" if m else None


def build(criteria: Sequence[CriterionResult]) -> list[Finding]:
    """One finding per cause over every criterion's feedback, errors first, in criterion order."""
    out: dict[str, Finding] = {}
    for c in criteria:
        for f in c.feedback:
            key = f.key or f"{c.id}:{f.observed}"
            cause, conf = _confidence(f)
            have = out.get(key)
            if have is None:
                out[key] = Finding(key=key, criteria=[c.title], severity=f.severity, observed=f.observed,
                                   expected=f.expected, suggestion=f.suggestion, cause=cause, confidence=conf,
                                   cases=list(f.cases), families=list(f.families),
                                   evidence={k: v for k, v in f.evidence.items() if k in _EVIDENCE_KEYS},
                                   location=location(f))
                continue
            if c.title not in have.criteria:
                have.criteria.append(c.title)
            have.also.append(f"{c.title}: {f.brief or f.observed.split(';')[0]}")
            have.cases += [x for x in f.cases if x not in have.cases]
            have.families = sorted({*have.families, *f.families})
            if have.location is None:
                have.location = location(f)
            if have.cause is None and cause is not None:
                have.cause, have.confidence = cause, conf
            if _SEVERITY_ORDER[f.severity] < _SEVERITY_ORDER[have.severity]:
                have.severity = f.severity
    return sorted(out.values(), key=lambda x: _SEVERITY_ORDER[x.severity])


_EVIDENCE_KEYS = ("case", "seed", "shape", "family", "hidden", "metric", "value", "reference", "rule", "location",
                  "margin", "gate", "finding", "static_rule", "static_line")


def excerpts(findings: Iterable[Finding], source: str, context: int = 2) -> dict[str, list[list[Any]]]:
    """The candidate's lines around each cited location: ``{"candidate.py:N": [[line_no, text], ...]}``."""
    lines = source.splitlines()
    out: dict[str, list[list[Any]]] = {}
    for f in findings:
        loc = f.location
        if not loc or loc in out:
            continue
        n = int(loc.rsplit(":", 1)[1])
        if not 1 <= n <= len(lines):
            continue
        lo, hi = max(1, n - context), min(len(lines), n + context)
        out[loc] = [[k, lines[k - 1]] for k in range(lo, hi + 1)]
    return out


def summarise(criteria: Sequence[CriterionResult], cases: Sequence[CaseResult], verdict: str,
              n_outputs: int) -> dict[str, Any]:
    """The verdict's scope and the headline figures: what ``pass`` covers, the cases, the wrong elements,
    the capped levels with what they would have been and why."""
    public = sum(not c.hidden for c in cases)
    failing = [c for c in cases if not c.correct]
    scope = (f"pass means correct on every case ({len(cases)} runs: {public} public, {len(cases) - public} hidden "
             f"shape × input family) and inside the numerical standard on each judged output; it does not cover "
             f"speed, hardware use, migration fidelity or code quality: those are the score")
    if verdict == "pass":
        line = f"PASS: {scope.removeprefix('pass means ')}"
    else:
        line = f"{verdict.upper()}: {len(failing)} of {len(cases)} cases fail" if failing else verdict.upper()
    capped = [{"criterion": c.title, "level": c.level, "would_be": c.uncapped_level, "why": c.capped_by}
              for c in criteria if c.capped_by and c.uncapped_level is not None and c.uncapped_level != c.level]
    wrong = [(int(m["count"]), int(m["total"])) for c in failing for m in [c.mismatch or {}]
             if isinstance(m.get("count"), int) and m.get("total")]
    outputs: dict[str, dict[str, int]] = {}
    for c in cases:
        for o in c.outputs:
            d = outputs.setdefault(o["name"], {"cases": 0, "correct": 0, "numerics_pass": 0, "numerics_judged": 0})
            d["cases"] += 1
            d["correct"] += bool(o.get("correct"))
            st = (o.get("numerics") or {}).get("status")
            if st:
                d["numerics_judged"] += 1
                d["numerics_pass"] += st == "pass"
    return {
        "verdict_line": line, "pass_covers": scope,
        "cases": len(cases), "failing_cases": len(failing),
        "wrong_elements": ({"min": min(wrong, key=lambda t: t[0] / t[1]), "max": max(wrong, key=lambda t: t[0] / t[1]),
                            "text": _wrong_text(wrong)} if wrong else None),
        "capped": capped,
        "outputs": outputs if n_outputs > 1 else {},
    }


def _wrong_text(wrong: list[tuple[int, int]]) -> str:
    lo = min(wrong, key=lambda t: t[0] / t[1])
    hi = max(wrong, key=lambda t: t[0] / t[1])
    return W.share(*lo) if lo == hi else f"{W.share(*lo)} to {W.share(*hi)}"
