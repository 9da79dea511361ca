"""MIG005 math-function-mismatch: the port uses a different approximation of a function than the CUDA kernel.

## What it does
Compares GELU forms: CUDA's exact erf GELU (`0.5 x (1 + erf(x/√2))`) against an NKI port that
uses `gelu_apprx_tanh`/`gelu_apprx_sigmoid` or builds the tanh form, and CUDA's tanh
approximation (`0.044715`, `√(2/π)`) against a port using the erf-based `nl.gelu`/`nl.erf`.

## Why is this bad
The two GELUs differ by up to ~1e-3 absolute — far above fp32 tolerances and visible in bf16 for
large activations. Whichever the CUDA kernel (the contract of record) computes, the port must
compute the same function; otherwise "correct within tolerance" depends on luck with the inputs.

## Example
```python
# CUDA: 0.5f * v * (1.0f + erff(v * 0.70710678f))
nisa.activation(dst=y, op=nl.gelu_apprx_tanh, data=x)
```

## Use instead
```python
nisa.activation(dst=y, op=nl.gelu, data=x)  # erf-based GELU, as in the CUDA source
```

## References
- migration.md §1.3 ("Math intrinsics" row) and §5.2 criterion F3.
- nki-api.md §4.8 (activation functions).
"""

from __future__ import annotations

from collections.abc import Iterator

from nkieval.analysis.finding import Finding
from nkieval.analysis.migration.context import MigrationContext
from nkieval.analysis.rule import make_rule

_TANH_FORMS = ("nl.gelu_apprx_tanh", "nl.gelu_apprx_sigmoid")
_ERF_FORMS = ("nl.gelu", "nl.erf")


def check(ctx: MigrationContext) -> Iterator[Finding]:
    refs = ctx.referenced
    erf = ctx.cuda_kernel_with(lambda k: "erf_gelu" in k.patterns)
    if erf is not None:
        for q in (*_TANH_FORMS, "nl.tanh"):
            if q in refs and (q != "nl.tanh" or "nl.gelu" not in refs):
                yield RULE.finding(
                    f"CUDA `{erf.name}` computes the exact erf GELU (line {erf.line}); the port uses `{q}`, an "
                    f"approximation that differs by up to ~1e-3", refs[q], 0,
                    "use the erf-based nl.gelu activation")
                break
    tanh = ctx.cuda_kernel_with(lambda k: "tanh_gelu" in k.patterns)
    if tanh is not None:
        for q in _ERF_FORMS:
            if q in refs:
                yield RULE.finding(
                    f"CUDA `{tanh.name}` computes the tanh-approximated GELU (line {tanh.line}); the port uses "
                    f"`{q}` (exact erf form), a different function", refs[q], 0,
                    "use nl.gelu_apprx_tanh to match the CUDA approximation")
                break


RULE = make_rule(__doc__, id="MIG005", name="math-function-mismatch", severity="warning", category="fidelity",
                 check=check)
