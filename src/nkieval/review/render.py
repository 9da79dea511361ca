"""The review in Markdown and HTML, from Jinja2 templates (``review/templates``), and the suite dashboard.

The templates only lay out; every figure and sentence comes from the review (the scorers' feedback, the
findings, the summary) through :func:`view`, which rounds numbers to 3 significant digits once. The HTML is
one self-contained file: inline CSS and inline SVG pictures (:mod:`nkieval.review.charts`), no script,
no font, nothing fetched from the network.

Why Jinja2: the Markdown and the HTML show the same sections, and a template keeps each layout in one
readable file instead of hundreds of string concatenations; it is a small pure-Python library with
autoescaping for the HTML.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from nkieval.review import charts
from nkieval.review import wording as W
from nkieval.review.model import CONFIDENCE_WORDS, REPORT_VERSION, Review


@cache
def _env(kind: str) -> Any:
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("nkieval.review", "templates"),
                             autoescape=kind == "html", trim_blocks=True, lstrip_blocks=True,
                             keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    env.filters["num"] = W.num
    return env


def _level(c: Any) -> str:
    if c.level is None:
        return "—"
    if c.uncapped_level is not None and c.uncapped_level != c.level:
        return f"{c.level}/4 (capped; {c.uncapped_level}/4 uncapped)"
    return f"{c.level}/4"


def _case_result(cs: Any) -> str:
    if cs.status != "ok":
        return "—"
    res = "correct" if cs.correct else (cs.mismatch or {}).get("kind", cs.status)
    m = cs.mismatch or {}
    if not cs.correct and isinstance(m.get("count"), int) and m.get("total"):
        res += f" ({100.0 * m['count'] / m['total']:.3g}% of {m.get('output')})"
    if cs.numerics:
        res += f"; numerics {cs.numerics.get('status')} (margin {W.num(cs.numerics.get('margin'))})"
    return res


def _outputs(cs: Any) -> str:
    if len(cs.outputs) < 2:
        return ""
    parts = []
    for o in cs.outputs:
        mark = "ok" if o.get("correct") else (o.get("mismatch") or {}).get("kind", "wrong")
        n = o.get("numerics") or {}
        if n.get("status"):
            mark += f", numerics {n['status']} ({W.num(n.get('margin'))})"
        parts.append(f"{o['name']}: {mark}")
    return "; ".join(parts)


def _evidence(f: Any) -> str:
    """What the finding's text does not already say: the candidate line and the rule it cites."""
    ev = f.evidence
    parts = [f"{k} {ev[k]}" for k in ("location", "rule") if ev.get(k) is not None and str(ev[k]) not in f.observed]
    return "; ".join(parts)


def view(r: Review) -> dict[str, Any]:
    """What the templates show, with numbers already worded."""
    assessed = sum(c.level is not None for c in r.criteria)
    findings, notes = [], []
    for i, f in enumerate(r.findings, 1):
        if f.severity == "info":  # no defect: a note (a static finding the runs contradict, an inconclusive gate)
            notes.append(f"{' + '.join(f.criteria)}: {f.observed} ({f.suggestion})")
            continue
        findings.append({
            "n": i, "criteria": " + ".join(f.criteria), "severity": f.severity, "observed": f.observed,
            "expected": f.expected, "suggestion": f.suggestion, "also": f.also,
            "confidence": CONFIDENCE_WORDS.get(f.confidence or "", "") if f.cause or f.confidence == "measured"
            else "", "cause": f.cause,
            "cases": len(f.cases), "families": ", ".join(f.families), "evidence": _evidence(f),
            "location": f.location, "excerpt": r.excerpts.get(f.location or "", []),
            "line": int(f.location.rsplit(":", 1)[1]) if f.location else None,
        })
    perf = r.performance if "candidate" in r.performance else {}
    cand = perf.get("candidate") or {}
    summ = cand.get("summary") or {}
    roof = summ.get("roofline_lower_bound_ns")
    bars = charts.time_bars([
        ("roofline bound", roof * 1e-9 if isinstance(roof, int | float) else None, "bound"),
        ("expert", (perf.get("solution") or {}).get("_total_time"), "expert"),
        ("baseline", (perf.get("baseline") or {}).get("_total_time"), "baseline"),
        ("this candidate", cand.get("_total_time"), "candidate"),
    ], f"Estimated time on {r.target} against the roofline bound")
    tl = charts.timeline(cand.get("timeline"), f"Engine and DMA activity over the estimate ({r.hardware.get('case')})")
    hist_case = next((c for c in r.cases if c.numerics and c.numerics.get("status") == "fail"),
                     next((c for c in r.cases if c.numerics), None))
    hist = charts.histogram(((hist_case.numerics or {}).get("metrics") or {}).get("ulp_histogram")
                            if hist_case else None,
                            f"Numerics error distribution, {hist_case.case}" if hist_case else "")
    return {
        "r": r, "assessed": assessed, "findings": findings, "notes": notes, "schema_version": REPORT_VERSION,
        "criteria": [{"title": c.title, "level": _level(c), "raw_level": c.level, "weight": W.num(float(c.weight)),
                      "summary": c.summary, "capped_by": c.capped_by, "id": c.id} for c in r.criteria],
        "cases": [{"case": cs.case, "shape": ", ".join(f"{k}={v}" for k, v in cs.shape.items()) or
                   ("hidden" if cs.hidden else ""), "family": cs.family, "status": cs.status,
                   "result": _case_result(cs), "outputs": _outputs(cs), "instructions": cs.instructions or "—",
                   "correct": cs.correct}
                  for cs in r.cases],
        "multi_output": any(len(cs.outputs) > 1 for cs in r.cases),
        "summary": r.summary, "score": f"{r.score:.1f}",
        "charts": {"roofline": bars, "timeline": tl, "histogram": hist},
    }


def to_markdown(r: Review) -> str:
    """The review as Markdown (``templates/review.md.j2``)."""
    return _env("md").get_template("review.md.j2").render(**view(r))


def to_html(r: Review) -> str:
    """The review as one self-contained HTML page (``templates/review.html.j2``)."""
    return _env("html").get_template("review.html.j2").render(**view(r))


def suite_html(matrix: Any) -> str:
    """The suite dashboard: the headline rates, one row per task, and the misses (``templates/suite.html.j2``)."""
    s = matrix.summary()
    by_task: dict[str, dict[str, Any]] = {}
    recs = {r["key"]: r for r in matrix.records}
    for o in matrix.outcomes:
        t = by_task.setdefault(o.task, {"task": o.task, "level": o.level, "expert": [], "baseline": [],
                                        "flawed": [], "ok": True})
        rec = recs.get(o.key, {})
        b, sol = rec.get("time_s"), rec.get("solution_time_s")
        speedup = f"{b / sol:.2g}x" if o.role == "baseline" and isinstance(b, int | float) and \
            isinstance(sol, int | float) and sol else None
        t[o.role].append({"key": o.key, "target": o.target, "ok": o.ok, "detail": o.detail,
                          "score": rec.get("score"), "verdict": rec.get("verdict"), "speedup": speedup})
        t["ok"] = t["ok"] and o.ok
    rows = sorted(by_task.values(), key=lambda t: (t["level"], t["task"]))
    return _env("html").get_template("suite.html.j2").render(s=s, rows=rows)
