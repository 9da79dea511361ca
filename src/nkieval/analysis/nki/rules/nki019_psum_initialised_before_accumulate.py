"""NKI019 psum-initialised-before-accumulate: a PSUM accumulator is zeroed (memset / nl.zeros / tensor_copy) before matmuls accumulate into it.

## What it does
Flags PSUM tiles that are created with `nl.zeros`, or written by `nisa.memset`/`tensor_copy`,
and then used as the destination of `nc_matmul`.

## Why is this bad
PSUM accumulation needs no zeroing: the first matmul into a location overwrites it and later
ones accumulate (`accumulate=None`). On trn1/trn2 accumulating onto PSUM that was initialised by
memset or tensor_copy is undefined behaviour, and the extra instruction costs time anyway. It is
a habit carried over from CUDA, where the accumulator register must be zeroed.

## Example
```python
acc = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
for k in range(k_tiles):
    nisa.nc_matmul(dst=acc, stationary=a_k, moving=b_k)
```

## Use instead
```python
acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
for k in range(k_tiles):
    nisa.nc_matmul(dst=acc, stationary=a_k, moving=b_k)  # first write overwrites
```

## References
- NKI docs, `nki.isa.nc_matmul` (`accumulate=`; memset-initialised PSUM is UB on NeuronCore v2/v3).
- neuron-agentic-development common patterns ("memset of PSUM before the K loop"), via migration.md §2.2.
"""

from __future__ import annotations

from collections.abc import Iterator

from nkieval.analysis.finding import Finding
from nkieval.analysis.nki.model import SourceModel, base_name
from nkieval.analysis.rule import make_rule


def check(model: SourceModel) -> Iterator[Finding]:
    for f in model.nki_functions:
        psum = {a.name: a for a in f.allocs if a.buffer == "psum"}
        inited: dict[str, tuple[int, str]] = {a.name: (a.line, a.call.qn or "") for a in psum.values() if a.initialised}
        for c in f.calls:
            if c.qn in ("nisa.memset", "nisa.tensor_copy"):
                d = base_name(c.arg("dst", 0))
                if d in psum:
                    inited[d] = (c.line, c.qn)
            elif c.qn == "nisa.nc_matmul":
                d = base_name(c.arg("dst", 0))
                if d in inited:
                    line, how = inited.pop(d)
                    yield RULE.finding(
                        f"PSUM tile `{d}` is initialised by {how} (line {line}) and then accumulated into by "
                        f"nc_matmul: undefined on NeuronCore v2/v3 and an extra instruction everywhere",
                        c.line, c.col,
                        "allocate the accumulator with nl.ndarray and let the first matmul overwrite it "
                        "(accumulate=None), or pass accumulate=False on the first K tile")


RULE = make_rule(__doc__, id="NKI019", name="psum-initialised-before-accumulate", severity="warning",
                 category="correctness", check=check)
