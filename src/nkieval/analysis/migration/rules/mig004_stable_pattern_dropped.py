"""MIG004 stable-pattern-dropped: a numerically stable formulation in the CUDA kernel is missing from the NKI port.

## What it does
- CUDA subtracts the row maximum before `expf` (safe softmax, or an online softmax with running
  max): flags an NKI port that exponentiates without any max reduction.
- CUDA computes variance about the mean (two-pass) or with Welford's update: flags an NKI port
  that has no `bn_stats`/`bn_aggr`, no `nl.var`, and no subtraction at all (the one-pass
  E[x²] − E[x]² form).

## Why is this bad
Without the max subtraction `exp` overflows to inf for logits above ~88 (fp32) and the softmax
returns NaN; the one-pass variance cancels catastrophically when the mean is large compared with
the spread. The CUDA code was written this way on purpose; the port must keep it.

## Example
```python
nisa.activation(dst=e, op=nl.exp, data=logits)  # CUDA: expf(x - row_max)
```

## Use instead
```python
nisa.tensor_reduce(dst=neg_max, op=nl.maximum, data=logits, axis=1, negate=True)
nisa.activation(dst=e, op=nl.exp, data=logits, bias=neg_max)
```

## References
- numerics.md (stable softmax and variance); migration.md §5.2 criterion F3.
- NKI docs, `nki.isa.bn_stats` / `bn_aggr`.
"""

from __future__ import annotations

from collections.abc import Iterator

from nkieval.analysis.finding import Finding
from nkieval.analysis.migration.context import MigrationContext
from nkieval.analysis.rule import make_rule

_SUBTRACT = {"nl.subtract"}


def check(ctx: MigrationContext) -> Iterator[Finding]:
    soft = ctx.cuda_kernel_with(lambda k: {"max_subtraction", "online_softmax"} & set(k.patterns))
    if soft is not None and ctx.exp_call is not None and ctx.max_reduction is None:
        c = ctx.exp_call
        yield RULE.finding(
            f"CUDA `{soft.name}` subtracts the row maximum before expf (line {soft.line}); the port exponentiates "
            f"without any max reduction, so large logits overflow to inf and the result becomes NaN",
            c.line, c.col, "reduce the row max (tensor_reduce op=nl.maximum, negate=True) and pass it as "
                           "bias= of the exp activation")
    var = ctx.cuda_kernel_with(lambda k: {"two_pass_variance", "welford"} & set(k.patterns))
    if var is not None:
        stable = any(q in ctx.referenced for q in ("nisa.bn_stats", "nisa.bn_aggr", "nl.var"))
        subtracts = any(q in ctx.referenced for q in _SUBTRACT) or any(
            ctx.op_of(c) == "nl.subtract" for c in ctx.calls)
        if not stable and not subtracts and ctx.nki.kernels:
            kern = ctx.nki.kernels[0]
            which = "Welford's update" if "welford" in var.patterns else "two passes (mean first, then squared deviations)"
            yield RULE.finding(
                f"CUDA `{var.name}` computes the variance with {which} (line {var.line}); the port never subtracts "
                f"the mean before squaring (one-pass E[x^2] - E[x]^2), which cancels catastrophically",
                kern.node.lineno, kern.node.col_offset + 1,
                "use nisa.bn_stats + nisa.bn_aggr, or subtract the mean before squaring")


RULE = make_rule(__doc__, id="MIG004", name="stable-pattern-dropped", severity="error", category="fidelity",
                 check=check)
