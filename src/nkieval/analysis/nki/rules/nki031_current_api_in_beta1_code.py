"""NKI031 current-api-in-beta1-code: a Beta 1 (`neuronxcc.nki`) kernel uses APIs that only exist in the current `nki` package.

## What it does
In files that import `neuronxcc.nki`, flags destination-passing `nisa.*(dst=...)` calls,
`nl.fori_loop`, `nl.while_loop`, `nl.dynamic_range`, `nisa.dma_compute`, `nki.simulate` and
`nc_matmul(accumulate=...)`.

## Why is this bad
Beta 1 instructions return their result; `dst=` and the runtime-loop APIs arrived with NKI 0.2+.
Mixing the two generations compiles under neither. The review reports a version mismatch.

## Example
```python
import neuronxcc.nki.isa as nisa
nisa.tensor_copy(dst=t, src=x)
```

## Use instead
```python
import neuronxcc.nki.isa as nisa
t = nisa.tensor_copy(x)          # or port the whole kernel to `import nki`
```

## References
- NKI migration guide; nki-api.md §1.1–1.2.
"""

from __future__ import annotations

from collections.abc import Iterator

from nkieval.analysis.finding import Finding
from nkieval.analysis.nki.model import SourceModel
from nkieval.analysis.rule import make_rule

CURRENT_ONLY = {"nl.fori_loop", "nl.while_loop", "nl.dynamic_range", "nisa.dma_compute", "nki.simulate"}


def check(model: SourceModel) -> Iterator[Finding]:
    if model.api not in ("beta1", "mixed"):
        return
    for f in model.functions:
        for c in f.calls:
            qn = c.qn or ""
            if qn in CURRENT_ONLY:
                yield RULE.finding(f"`{qn}` exists only in the current nki package (0.2+), not in neuronxcc.nki",
                                   c.line, c.col, "port the whole kernel to `import nki` or use the Beta 1 form")
            elif qn.startswith("nisa.") and c.has_kwarg("dst"):
                yield RULE.finding(f"`{qn}(dst=...)` is the current destination-passing style; Beta 1 nisa "
                                   f"calls return their result", c.line, c.col,
                                   "use `t = nisa.<op>(...)` in Beta 1, or port the kernel to `import nki`")
            elif qn == "nisa.nc_matmul" and c.has_kwarg("accumulate"):
                yield RULE.finding("`nc_matmul(accumulate=...)` arrived in NKI 0.3", c.line, c.col,
                                   "in Beta 1 accumulate with `psum_tile += nisa.nc_matmul(...)`")


RULE = make_rule(__doc__, id="NKI031", name="current-api-in-beta1-code", severity="warning", category="api-version",
                 check=check)
