"""MIG003 accumulator-downgraded: the CUDA kernel accumulates in fp32 (or fp64), the NKI port in bf16/fp16.

## What it does
When the CUDA kernel keeps a `float`/`double` accumulator (a sum, a dot product, a running
max), flags NKI accumulation targets in 16-bit types: PSUM matmul destinations, reduction results
(`reduce_res=`, `tensor_reduce` destinations), and tiles that are added into themselves.

## Why is this bad
Accumulating thousands of terms in bf16 (8 mantissa bits) loses most of the result's precision;
the CUDA author chose a wider accumulator for that reason. It is also a known precision-downgrade
shortcut. Trainium accumulates in fp32 at no cost: PSUM is fp32, and VectorE/ScalarE compute in
fp32 internally, so only the destination dtype decides.

## Example
```python
acc = nl.ndarray((128, 512), dtype=nl.bfloat16, buffer=nl.psum)
nisa.nc_matmul(dst=acc, stationary=a_k, moving=b_k)
```

## Use instead
```python
acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)  # cast once when storing
```

## References
- migration.md §5.2 criterion F4 ("accumulation at least as precise as CUDA's").
- anchors-eval.md §3 A.8 (precision downgrade).
"""

from __future__ import annotations

from collections.abc import Iterator

from nkieval.analysis.finding import Finding
from nkieval.analysis.migration.context import MigrationContext
from nkieval.analysis.nki.model import base_name
from nkieval.analysis.rule import make_rule

_LOW = {"bfloat16", "float16", "fp16", "bf16", "float8_e4m3", "float8_e5m2", "tfloat32"}
_REDUCE_DST = {"nisa.tensor_reduce": ("dst", 0), "nisa.activation_reduce": ("reduce_res", None),
               "nisa.tensor_scalar_reduce": ("reduce_res", None), "nisa.activation": ("reduce_res", None)}


def check(ctx: MigrationContext) -> Iterator[Finding]:
    k = ctx.cuda_kernel_with(lambda k: any(a.dtype in ("float", "double") for a in k.accumulators)
                             or any(c.name == "fill_fragment" or "accumulator" in c.text for c in k.tensor_core))
    if k is None:
        return
    acc = next((a for a in k.accumulators if a.dtype in ("float", "double")), None)
    cite = (f"CUDA `{k.name}` accumulates `{acc.name}` in {acc.dtype} (line {acc.line})" if acc
            else f"CUDA `{k.name}` accumulates its tensor-core fragments in float")
    seen: set[str] = set()
    for c in ctx.calls:
        targets: list[tuple[str | None, str]] = []
        if c.qn == "nisa.nc_matmul":
            targets.append((base_name(c.arg("dst", 0)), "matmul accumulator"))
        elif c.qn in _REDUCE_DST:
            key, pos = _REDUCE_DST[c.qn]
            targets.append((base_name(c.arg(key, pos)), "reduction result"))
        elif c.qn == "nisa.tensor_tensor" and ctx.nki.qualname(c.arg("op", 3)) == "nl.add":
            d = base_name(c.arg("dst", 0))
            if d in (base_name(c.arg("data1", 1)), base_name(c.arg("data2", 2))):
                targets.append((d, "running sum"))
        for name, what in targets:
            dt = ctx.alloc_dtype(name)
            if name and dt in _LOW and name not in seen:
                seen.add(name)
                yield RULE.finding(f"{cite}; the port's {what} `{name}` is {dt}", c.line, c.col,
                                   f"allocate `{name}` as nl.float32 and cast once when the result is stored")


RULE = make_rule(__doc__, id="MIG003", name="accumulator-downgraded", severity="error", category="fidelity",
                 check=check)
