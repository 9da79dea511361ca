"""Render the rule catalogue (``docs/analysis.md``) from the registry and the rules' docstrings.

Regenerate with ``python -m nkieval.analysis.docs > docs/analysis.md``; a test keeps the page in sync.
"""

from __future__ import annotations

from nkieval.analysis.registry import MIG_RULES, NKI_RULES
from nkieval.analysis.rule import Rule

_INTRO = """\
# Static analysis: rule catalogue

`nkieval.analysis` reads NKI kernels (Python `ast`) and the CUDA kernels they port
(tree-sitter-cuda) without executing either. It gives the review its evidence for
*Code quality & idiom* (NKI rules) and *Migration fidelity* (MIG rules).

```python
from nkieval.analysis import analyze_nki, parse_cuda, migration_fidelity, RULES

findings = analyze_nki(open("kernel.py").read(), "kernel.py", target="trn2")
summary = parse_cuda(open("kernel.cu").read())          # CudaSummary fact sheet
fidelity = migration_fidelity(summary, open("kernel.py").read())
for f in findings + fidelity:
    print(f.rule, f.severity, f.line, f.message, "->", f.suggestion)
```

`analyze_port(summary, source, filename=..., target=...)` returns both lists (the MIG list is None
without a summary) from one model of the kernel: the MIG rules read the NKI findings, so a caller
that wants both (the review does) parses the source and runs the NKI rules once. The model caches
each subtree's `ast.walk` on the node (`nkieval.analysis.nki.model.walk`), since the rules ask many
questions of the same function and loop bodies.

Command line: `nkieval lint KERNEL.py [--cuda KERNEL.cu] [--format text|json] [--target trn2]`
(exit status 1 when any finding is an error); `nkieval lint --list-rules`.

A finding is `Finding(rule, severity, message, line, col, suggestion, category, source)`;
`to_dict()` gives its JSON form. Severities: `error` (wrong on hardware or hidden shapes, or an
integrity violation), `warning` (a defect an NKI expert would ask to fix), `info` (a note).
Categories map onto rubric criteria: correctness, integrity, performance, idiom, api-version,
fidelity. Hardware limits quoted in messages come from `hardware/data/<target>.toml`.

This page is generated from the registry (`python -m nkieval.analysis.docs > docs/analysis.md`).
"""


def _table(rules: dict[str, Rule]) -> list[str]:
    out = ["| Id | Name | Severity | Category | Summary |", "|---|---|---|---|---|"]
    for r in rules.values():
        out.append(f"| [{r.id}](#{r.id.lower()}-{r.name}) | {r.name} | {r.severity} | {r.category} | "
                   f"{r.summary.replace('|', '&#124;')} |")
    return out


def _rule(r: Rule) -> list[str]:
    out = [f"### {r.id} {r.name}", "", f"*{r.severity}, {r.category}.* {r.summary}", ""]
    for title, body in r.sections().items():
        out += [f"#### {title}", "", body.strip(), ""]
    return out


def render_catalogue() -> str:
    """The full Markdown page."""
    lines = [_INTRO, "## NKI rules (kernel source)", "", *_table(NKI_RULES), "",
             "## MIG rules (CUDA → NKI migration fidelity)", "", *_table(MIG_RULES), "", "## Rule reference", ""]
    for r in [*NKI_RULES.values(), *MIG_RULES.values()]:
        lines += _rule(r)
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":  # pragma: no cover
    print(render_catalogue(), end="")
