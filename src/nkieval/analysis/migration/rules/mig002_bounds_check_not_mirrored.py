"""MIG002 bounds-check-not-mirrored: the CUDA kernel guards its index range, the NKI port has no ragged-tail handling.

## What it does
When the CUDA kernel compares an index against a size parameter (`if (i < n)`, `col < cols`,
loop bounds on `n`), checks that the NKI port handles partial tiles: a `min()`-clamped slice,
a Beta 1 `mask=`, or remainder arithmetic. Reports the port's own NKI003 findings with the CUDA
guard they fail to mirror, an error when there is no tail handling at all, and a warning when the
port replaces the guard by an assert that narrows the domain (NKI009).

## Why is this bad
The CUDA guard says the kernel supports every size. A port that only supports multiples of the
tile size computes the wrong region (or crashes) on exactly the shapes that the guard was written
for — which is what hidden test shapes exercise.

## Example
```python
# CUDA: if (i < n) out[i] = a[i] + b[i];
for t in range(n // 128):
    ...
```

## Use instead
```python
for t in range(math.ceil(n / 128)):
    rows = min(128, n - t * 128)
    ...
```

## References
- migration.md §1.3 ("Bounds guard" row) and §5.2 criterion F2.
- NKI docs, "Tiling overview".
"""

from __future__ import annotations

from collections.abc import Iterator

from nkieval.analysis.finding import Finding
from nkieval.analysis.migration.context import MigrationContext
from nkieval.analysis.rule import make_rule


def check(ctx: MigrationContext) -> Iterator[Finding]:
    k = ctx.cuda_kernel_with(lambda k: any(b.bound_params for b in k.bounds_checks))
    if k is None or not ctx.nki.kernels:
        return
    guard = next(b for b in k.bounds_checks if b.bound_params)
    cite = f"CUDA `{k.name}` guards `{guard.lhs} {guard.op} {guard.rhs}` (line {guard.line})"
    tails = ctx.findings_of("NKI003")
    for t in tails:
        yield RULE.finding(f"{cite}, but the port does not: {t.message}", t.line, t.col, t.suggestion)
    narrowing = ctx.findings_of("NKI009")
    for n in narrowing:
        yield RULE.finding(f"{cite} and so supports every size; the port instead asserts the size away: "
                           f"{n.message}", n.line, n.col, n.suggestion, severity="warning")
    if not tails and not narrowing and not ctx.has_tail_handling:
        kern = ctx.nki.kernels[0]
        yield RULE.finding(
            f"{cite}; the NKI port has no ragged-tail handling (no min()-clamped slice, mask= or remainder "
            f"arithmetic), so sizes that are not multiples of its tile size are not covered",
            kern.node.lineno, kern.node.col_offset + 1,
            "clamp the last tile of every guarded dimension: size = min(T, n - i * T), slice [0:size]")


RULE = make_rule(__doc__, id="MIG002", name="bounds-check-not-mirrored", severity="error", category="fidelity",
                 check=check)
