"""NKI012 matmul-on-vector-engine: a contraction is computed as an element-wise multiply followed by a sum.

## What it does
Flags an element-wise product of two different tensors (`nisa.tensor_tensor(op=nl.multiply)` or
`nl.multiply`) whose result is then summed (`nisa.tensor_reduce(op=nl.add)`, `nl.sum`,
`tensor_scalar_reduce`) — a dot product done on VectorE, the shape of a literal port of a CUDA
inner-product loop. Squares (`x * x`, as in a norm) are not flagged.

## Why is this bad
TensorE, a 128×128 systolic array, delivers over 90% of a NeuronCore's FLOPs; VectorE processes
one element per lane per cycle. A contraction on VectorE is one to two orders of magnitude slower
and needs an extra pass over the data.

## Example
```python
nisa.tensor_tensor(dst=prod, data1=q_tile, data2=k_tile, op=nl.multiply)
nisa.tensor_reduce(dst=score, op=nl.add, data=prod, axis=1)
```

## Use instead
```python
# contraction dim on the partition axis of both operands
nisa.nc_matmul(dst=score_psum, stationary=q_t, moving=k_t)
```

## References
- NKI docs, performance guide Opt #8 and Trainium architecture guide (TensorE).
- migration.md §5.5, example feedback line I3.
"""

from __future__ import annotations

from collections.abc import Iterator

from nkieval.analysis.finding import Finding
from nkieval.analysis.nki.model import SourceModel, base_name
from nkieval.analysis.rule import make_rule

_REDUCES = {"nisa.tensor_reduce", "nl.sum", "nisa.tensor_scalar_reduce"}


def check(model: SourceModel) -> Iterator[Finding]:
    for f in model.nki_functions:
        products: dict[str, int] = {}
        for c in f.calls:
            if c.qn == "nisa.tensor_tensor" and model.qualname(c.arg("op", 3)) == "nl.multiply":
                a, b = base_name(c.arg("data1", 1)), base_name(c.arg("data2", 2))
                d = base_name(c.arg("dst", 0))
                if a and b and a != b and d:
                    products[d] = c.line
            elif c.qn == "nl.multiply" and len(c.node.args) >= 2:
                a, b = base_name(c.node.args[0]), base_name(c.node.args[1])
                if a and b and a != b:
                    for t in c.assigned_to:
                        products[t] = c.line
            elif c.qn in _REDUCES:
                data = base_name(c.arg("data", 2 if c.qn == "nisa.tensor_reduce" else 0))
                if c.qn == "nisa.tensor_scalar_reduce":
                    data = base_name(c.arg("data", 1))
                op = model.qualname(c.arg("op", 1)) if c.qn == "nisa.tensor_reduce" else "nl.add"
                if c.qn == "nisa.tensor_scalar_reduce":
                    op = model.qualname(c.arg("reduce_op", 4))
                if data in products and op == "nl.add":
                    yield RULE.finding(
                        f"element-wise product `{data}` (line {products[data]}) is summed here: a dot product "
                        f"computed on VectorE instead of TensorE", c.line, c.col,
                        "lay the contraction dimension on the partition axis of both operands and use "
                        "nisa.nc_matmul (or nl.matmul), accumulating in PSUM")


RULE = make_rule(__doc__, id="NKI012", name="matmul-on-vector-engine", severity="warning",
                 category="performance", check=check)
