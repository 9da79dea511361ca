"""``--redact-hidden``: the review without its hidden shapes and input seeds, for feedback meant for the model.

A model trained on its feedback must not learn the hidden shapes (they are there to catch kernels fitted
to the public ones) or the seeds (a fresh secret seed per review keeps the inputs from being learned).
The redacted copy drops them from every case, every feedback line and finding, and the summary: a hidden
case keeps its label (``hidden-0/normal``), its input family and its verdict.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from nkieval.review import wording as W
from nkieval.review.model import Review

HIDDEN_SHAPE = "hidden shape"
SEED = "seed hidden"


def _patterns(r: Review) -> list[tuple[re.Pattern[str], str]]:
    subs: list[tuple[str, str]] = []
    for c in r.cases:
        if c.hidden and c.shape:
            subs.append((", ".join(f"{k}={v}" for k, v in c.shape.items()), HIDDEN_SHAPE))
        subs.append((f"seed {c.seed}", SEED))
        subs.append((str(c.seed), "<seed>"))
    subs.append((f"seed {r.seed}", SEED))
    pats = [(re.compile(re.escape(a)), b) for a, b in sorted(set(subs), key=lambda t: -len(t[0])) if a]
    return pats


def _hidden_sizes(r: Review) -> set[str]:
    """Element counts and last indices of hidden outputs, as the feedback prints them."""
    out: set[str] = set()
    for c in r.cases:
        if not c.hidden:
            continue
        for o in c.outputs:
            t = (o.get("mismatch") or {}).get("total")
            if isinstance(t, int) and t > 1:
                out.add(W.num(t))
        m = c.mismatch or {}
        if isinstance(m.get("total"), int) and m["total"] > 1:
            out.add(W.num(m["total"]))
    return out


def _text(s: str, pats: list[tuple[re.Pattern[str], str]], sizes: set[str], hidden_lead: bool) -> str:
    for p, rep in pats:
        s = p.sub(rep, s)
    if hidden_lead:  # a line that quotes a hidden case: its element counts and indices give the shape away
        for n in sorted(sizes, key=len, reverse=True):
            s = re.sub(rf"(?<![\d,.]){re.escape(n)}(?![\d,])", "<n>", s)
        s = re.sub(r"\[\d+(?:, \d+)*\]", "[…]", s)
        s = re.sub(r"\brows [^;]*", "rows […]", s)
    return s


def _walk(v: Any, fn: Any) -> Any:
    if isinstance(v, str):
        return fn(v)
    if isinstance(v, dict):
        return {k: _walk(x, fn) for k, x in v.items() if k not in ("seed", "shape", "stdout_tail", "stderr_tail")}
    if isinstance(v, list):
        return [_walk(x, fn) for x in v]
    return v


def redact_hidden(r: Review) -> Review:
    """A copy of ``r`` without hidden shapes and seeds (the original is unchanged)."""
    out = copy.deepcopy(r)
    pats, sizes = _patterns(r), _hidden_sizes(r)
    hidden = {c.case for c in r.cases if c.hidden}

    def lead_hidden(ev: dict[str, Any], text: str) -> bool:
        return ev.get("case") in hidden or any(text.startswith(h) for h in hidden)

    for crit in out.criteria:
        for f in crit.feedback:
            h = lead_hidden(f.evidence, f.observed)
            f.observed, f.expected, f.suggestion = (_text(x, pats, sizes, h) for x in
                                                    (f.observed, f.expected, f.suggestion))
            f.evidence = _walk(f.evidence, lambda s, h=h: _text(s, pats, sizes, h))
        crit.summary = _text(crit.summary, pats, sizes, True)
        crit.evidence = _walk(crit.evidence, lambda s: _text(s, pats, sizes, True))
    for fd in out.findings:
        h = lead_hidden(fd.evidence, fd.observed)
        fd.observed, fd.expected, fd.suggestion = (_text(x, pats, sizes, h) for x in
                                                   (fd.observed, fd.expected, fd.suggestion))
        fd.also = [_text(x, pats, sizes, True) for x in fd.also]
        fd.evidence = _walk(fd.evidence, lambda s, h=h: _text(s, pats, sizes, h))
    for c in out.cases:
        c.seed = 0
        if c.hidden:
            c.shape = {}
            if c.mismatch:
                c.mismatch = {k: v for k, v in c.mismatch.items() if k in ("kind", "output", "count")}
            for o in c.outputs:
                if o.get("mismatch"):
                    o["mismatch"] = {k: v for k, v in o["mismatch"].items() if k != "total"}
            if c.numerics:
                c.numerics = {k: c.numerics.get(k) for k in ("status", "margin", "deciding_gate")}
        c.error = _walk(c.error, lambda s, h=c.hidden: _text(s, pats, sizes, h))
    out.seed = 0
    out.verdict_message = _text(out.verdict_message, pats, sizes, True)
    out.summary = _walk(out.summary, lambda s: _text(s, pats, sizes, True))
    out.summary["redacted"] = "hidden shapes and input seeds are withheld (seed fields read 0)"
    return out
