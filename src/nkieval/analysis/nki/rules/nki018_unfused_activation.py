"""NKI018 unfused-activation: a scale or bias is applied in a separate instruction right before an activation.

## What it does
Flags `nisa.tensor_scalar` (multiply/add/subtract by a scalar or [P,1] operand), `nl.multiply`
or `nl.add` whose result is the input of the next `nisa.activation`/`nl.exp`/`nl.tanh`/... that
has no `scale`/`bias` of its own.

## Why is this bad
ScalarE computes `op(data * scale + bias)` in one pass. A separate multiply/add costs another
instruction and another pass over the tile; the performance guide reports about 3× lower latency
for the fused form.

## Example
```python
nisa.tensor_scalar(dst=shifted, data=x, op0=nl.subtract, operand0=row_max)
nisa.activation(dst=e, op=nl.exp, data=shifted)
```

## Use instead
```python
nisa.activation(dst=e, op=nl.exp, data=x, bias=neg_row_max)  # exp(x - max) in one instruction
```

## References
- NKI docs, performance guide Opt #6 (fuse scale/bias into the activation).
- NKI docs, `nki.isa.activation`.
"""

from __future__ import annotations

from collections.abc import Iterator

from nkieval.analysis.finding import Finding
from nkieval.analysis.nki.model import SourceModel, base_name
from nkieval.analysis.rule import make_rule

_SCALE_OPS = {"nl.multiply", "nl.add", "nl.subtract"}
_ACTIVATIONS = {"nl.exp", "nl.tanh", "nl.sigmoid", "nl.gelu", "nl.gelu_apprx_tanh", "nl.silu", "nl.relu", "nl.log",
                "nl.erf", "nl.softplus"}


def check(model: SourceModel) -> Iterator[Finding]:
    for f in model.nki_functions:
        produced: dict[str, int] = {}
        for c in f.calls:
            if c.qn == "nisa.tensor_scalar" and model.qualname(c.arg("op0", 2)) in _SCALE_OPS \
                    and c.arg("op1", 5) is None:
                d = base_name(c.arg("dst", 0))
                if d:
                    produced[d] = c.line
            elif c.qn in ("nl.multiply", "nl.add", "nl.subtract"):
                for t in c.assigned_to:
                    produced[t] = c.line
            elif c.qn == "nisa.activation" and c.arg("scale") is None and c.arg("bias") is None:
                src = base_name(c.arg("data", 2))
                if src in produced:
                    yield _finding(src, produced.pop(src), c)
            elif c.qn in _ACTIVATIONS and c.node.args:
                src = base_name(c.node.args[0])
                if src in produced:
                    yield _finding(src, produced.pop(src), c)


def _finding(src: str, line: int, c: object) -> Finding:
    return RULE.finding(
        f"`{src}` is scaled/shifted by a separate instruction (line {line}) just before this activation",
        c.line, c.col,  # type: ignore[attr-defined]
        "pass the multiplier as scale= and the offset as bias= of nisa.activation (one ScalarE pass)")


RULE = make_rule(__doc__, id="NKI018", name="unfused-activation", severity="info", category="performance",
                 check=check)
