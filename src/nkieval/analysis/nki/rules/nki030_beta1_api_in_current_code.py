"""NKI030 beta1-api-in-current-code: a kernel written for the current `nki` package uses Beta 1 (`neuronxcc.nki`) APIs.

## What it does
In files that import `nki` (NKI 0.2+), flags constructs that only exist in Beta 1: `nl.arange`,
`nl.mgrid`, `nl.par_dim`, `nl.spmd_dim`, `nl.nc`, `nl.atomic_rmw`, `nki.simulate_kernel`,
`@nki.baremetal`/`benchmark`/`profile`, `mask=` arguments, `@nki.jit(mode=...)`, value-returning
`nisa.*` calls (`t = nisa.tensor_copy(x)`), and NumPy ufuncs passed as `op=`.

## Why is this bad
These were removed in the 0.2/0.3 API: the current compiler rejects them (`mode=` it ignores, so a
Beta-1 launch mode silently stops meaning what it did). The simulator may still accept some, so a
kernel can pass simulated tests and fail to compile. The review marks it as a version mismatch,
not as wrong code.

## Example
```python
import nki.isa as nisa
t = nisa.tensor_copy(x_tile)                 # Beta 1 value style
y = nl.load(x[i_p, i_f], mask=(i_p < n))    # Beta 1 mask
```

## Use instead
```python
t = nl.ndarray(x_tile.shape, dtype=x_tile.dtype, buffer=nl.sbuf)
nisa.tensor_copy(dst=t, src=x_tile)
rows = min(128, n - i * 128)
nisa.dma_copy(dst=y[0:rows], src=x[i * 128:i * 128 + rows])
```

## References
- NKI migration guide (Beta 1 → Beta 2 → 0.3); nki-api.md §1.2–1.3.
- migration.md §5.1 ("version awareness: mark it version mismatch").
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from nkieval.analysis.finding import Finding
from nkieval.analysis.nki.model import SourceModel, walk
from nkieval.analysis.rule import make_rule

BETA1_ONLY: dict[str, str] = {
    "nl.arange": "integer slices (t[0:n]) or nl.ds",
    "nl.mgrid": "integer slices (t[0:p, 0:f])",
    "nl.par_dim": "put the partition dimension first; block dimensions were removed",
    "nl.spmd_dim": "kernel[2] for LNC=2",
    "nl.nc": "kernel[2] for LNC=2",
    "nl.atomic_rmw": "nisa.dma_compute",
    "nl.loop_reduce": "an explicit accumulation",
    "nl.all_reduce": "nki.collectives",
    "nl.static_cast": "nisa.tensor_copy into a tile of the target dtype",
    "nki.simulate_kernel": "nki.simulate(kernel)(*args)",
    "nki.baremetal": "@nki.jit",
    "nki.benchmark": "@nki.jit and the profiler",
    "nki.profile": "@nki.jit and the profiler",
    "nisa.tensor_copy_dynamic_src": "nisa.tensor_copy with .ap(scalar_offset=...)",
    "nisa.tensor_copy_dynamic_dst": "nisa.tensor_copy with .ap(scalar_offset=...)",
}
_VALUE_OK = {"nisa.get_nc_version", "nisa.get_nc_sub_version", "nisa.register_alloc", "nisa.nc_version"}


def check(model: SourceModel) -> Iterator[Finding]:
    if model.api not in ("current", "mixed"):
        return
    for node in walk(model.tree):
        if isinstance(node, ast.Attribute):
            qn = model.qualname(node)
            if qn in BETA1_ONLY:
                yield RULE.finding(f"`{qn}` is Beta 1 (neuronxcc.nki) API, removed from the current nki package",
                                   node.lineno, node.col_offset + 1, f"use {BETA1_ONLY[qn]}")
    for f in model.functions:
        for c in f.calls:
            qn = c.qn or ""
            if qn.split(".")[0] in ("nl", "nisa") and c.has_kwarg("mask"):
                yield RULE.finding(f"`mask=` on `{qn}` is Beta 1 API; masks were removed in NKI 0.2",
                                   c.line, c.col, "clamp the slice with min() instead")
            if qn.startswith("nisa.") and c.assigned_to and not c.has_kwarg("dst") and qn not in _VALUE_OK:
                yield RULE.finding(f"`{qn}` is used in the Beta 1 value-returning style; current nisa "
                                   f"instructions write into a dst= tile", c.line, c.col,
                                   f"allocate the result with nl.ndarray and call {qn}(dst=..., ...)")
            for kw in c.node.keywords:
                if kw.arg in ("op", "op0", "op1", "reduce_op") and (model.qualname(kw.value) or "").startswith("np."):
                    yield RULE.finding(f"NumPy ufunc `{ast.unparse(kw.value)}` passed as {kw.arg}= (Beta 1 "
                                       f"style)", c.line, c.col, "pass the nl.* operator (e.g. nl.add)")
        for dec in f.node.decorator_list:
            if isinstance(dec, ast.Call) and model.qualname(dec.func) == "nki.jit":
                for kw in dec.keywords:
                    # (mode= is ignored since NKI 0.3: the framework is told from the arguments. The NKI Library
                    # still writes mode="auto"/"trace", which meant a plain @nki.jit anyway: not flagged.)
                    if kw.arg == "mode" and not (isinstance(kw.value, ast.Constant)
                                                 and kw.value.value in ("auto", "trace")):
                        yield RULE.finding(f"`@nki.jit({kw.arg}=...)` is deprecated and ignored since NKI 0.3 (a "
                                           "Beta-1 launch mode no longer selects how the kernel runs)", dec.lineno,
                                           dec.col_offset + 1,
                                           "use plain @nki.jit; pick the target with NEURON_PLATFORM_TARGET_OVERRIDE")


RULE = make_rule(__doc__, id="NKI030", name="beta1-api-in-current-code", severity="warning", category="api-version",
                 check=check)
