"""The HTML report's pictures as inline SVG, drawn from the review's own figures (no plotting library:
three small charts do not justify one, and the report must open offline).

* :func:`time_bars`: the estimate against the roofline bound and the reference kernels;
* :func:`timeline`: busy fraction per engine and DMA over time (``adapters.timeline_bins``);
* :func:`histogram`: the numerics error distribution in ULPs (``metrics.ulp_histogram``).

Each returns an ``<svg>`` string (or ``""`` when there is nothing to draw); text is escaped.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from nkieval.review import wording as W

_FONT = 'font-family="system-ui, sans-serif" font-size="11"'
_COLOURS = {"candidate": "#c0392b", "expert": "#27ae60", "baseline": "#7f8c8d", "bound": "#2c3e50"}
_ENGINE_COLOURS = {"tensor": "#8e44ad", "vector": "#2980b9", "scalar": "#16a085", "gpsimd": "#d35400",
                   "sync": "#7f8c8d", "dma": "#c0392b"}


def time_bars(rows: Sequence[tuple[str, float | None, str]], title: str) -> str:
    """Horizontal bars of times in microseconds: ``rows`` are (label, seconds, colour key)."""
    rows = [(lab, t, k) for lab, t, k in rows if isinstance(t, int | float) and t > 0]
    if not rows:
        return ""
    w, left, bar, gap = 560, 170, 18, 8
    h = 28 + len(rows) * (bar + gap)
    tmax = max(t for _, t, _ in rows)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img" '
             f'aria-label="{escape(title)}" class="chart" data-chart="roofline">',
             f'<text x="0" y="14" {_FONT} font-weight="600">{escape(title)}</text>']
    for i, (lab, t, k) in enumerate(rows):
        y = 24 + i * (bar + gap)
        bw = max(1.0, (w - left - 90) * t / tmax)
        parts.append(f'<text x="0" y="{y + 13}" {_FONT}>{escape(lab)}</text>')
        parts.append(f'<rect x="{left}" y="{y}" width="{bw:.1f}" height="{bar}" fill="{_COLOURS.get(k, "#555")}"/>')
        parts.append(f'<text x="{left + bw + 4:.1f}" y="{y + 13}" {_FONT}>{W.num(t * 1e6)} µs</text>')
    parts.append("</svg>")
    return "".join(parts)


def timeline(tl: Mapping[str, Any] | None, title: str) -> str:
    """One row per engine (and DMA): each column's shade is the fraction of that time slice it is busy."""
    if not tl or not tl.get("tracks"):
        return ""
    tracks: Mapping[str, Sequence[float]] = tl["tracks"]
    bins = int(tl.get("bins") or len(next(iter(tracks.values()))))
    w, left, row, gap = 620, 60, 16, 4
    cw = (w - left) / bins
    h = 40 + len(tracks) * (row + gap)
    span_us = float(tl.get("span_ns") or 0) / 1e3
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img" '
             f'aria-label="{escape(title)}" class="chart" data-chart="timeline">',
             f'<text x="0" y="14" {_FONT} font-weight="600">{escape(title)}</text>']
    for i, (name, vals) in enumerate(tracks.items()):
        y = 22 + i * (row + gap)
        col = _ENGINE_COLOURS.get(name, "#555")
        parts.append(f'<text x="0" y="{y + 12}" {_FONT}>{escape(name)}</text>')
        parts.append(f'<rect x="{left}" y="{y}" width="{w - left}" height="{row}" fill="#f2f2f2"/>')
        for k, v in enumerate(vals):
            if v > 0:
                parts.append(f'<rect x="{left + k * cw:.1f}" y="{y}" width="{cw + 0.3:.1f}" height="{row}" '
                             f'fill="{col}" fill-opacity="{min(1.0, 0.15 + 0.85 * v):.2f}"/>')
    y = 22 + len(tracks) * (row + gap) + 10
    parts.append(f'<text x="{left}" y="{y}" {_FONT}>0</text>')
    parts.append(f'<text x="{w}" y="{y}" {_FONT} text-anchor="end">{W.num(span_us)} µs</text>')
    parts.append("</svg>")
    return "".join(parts)


def histogram(hist: Mapping[str, int] | None, title: str) -> str:
    """Bars of element counts per ULP-error bucket (log scale of counts)."""
    if not hist:
        return ""
    items = [(k, int(v)) for k, v in hist.items() if isinstance(v, int | float) and v > 0]
    if not items:
        return ""
    w, h, bottom, top = 620, 190, 40, 22
    bw = min(48.0, (w - 40) / len(items))
    cmax = math.log10(max(v for _, v in items) + 1)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img" '
             f'aria-label="{escape(title)}" class="chart" data-chart="histogram">',
             f'<text x="0" y="14" {_FONT} font-weight="600">{escape(title)}</text>']
    for i, (k, v) in enumerate(items):
        bh = (h - bottom - top) * math.log10(v + 1) / cmax if cmax else 0
        x = 40 + i * bw
        parts.append(f'<rect x="{x:.1f}" y="{h - bottom - bh:.1f}" width="{max(1.0, bw - 2):.1f}" height="{bh:.1f}" '
                     f'fill="#2980b9"><title>{escape(k)} ULP: {v} elements</title></rect>')
        if i % max(1, len(items) // 8) == 0:
            parts.append(f'<text x="{x:.1f}" y="{h - bottom + 14}" {_FONT}>{escape(k.split("-")[0])}</text>')
    parts.append(f'<text x="40" y="{h - 6}" {_FONT}>error in ULPs of the output format (log-scaled counts)</text>')
    parts.append("</svg>")
    return "".join(parts)
