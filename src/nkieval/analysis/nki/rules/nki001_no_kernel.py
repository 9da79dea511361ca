"""NKI001 no-kernel: the file defines no NKI kernel.

## What it does
Flags a file with no function decorated with `@nki.jit` (or a Beta 1 launcher such as
`@nki.baremetal`) and no function that calls `nki.language`/`nki.isa` at all.

## Why is this bad
There is nothing to evaluate: the computation, if any, happens somewhere other than on the
NeuronCore engines (for example in NumPy on the host).

## Example
```python
import numpy as np

def softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)
```

## Use instead
```python
@nki.jit
def softmax(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    ...  # nisa/nl instructions on SBUF tiles
    return out
```

## References
- NKI docs, `nki.jit` API page and "NKI language guide".
"""

from __future__ import annotations

from collections.abc import Iterator

from nkieval.analysis.finding import Finding
from nkieval.analysis.nki.model import SourceModel
from nkieval.analysis.rule import make_rule


def check(model: SourceModel) -> Iterator[Finding]:
    if not model.kernels:
        yield RULE.finding(
            f"{model.filename} defines no @nki.jit kernel and no function calls nki.language/nki.isa",
            1, 0, "write the computation as an @nki.jit kernel built from nl/nisa instructions")


RULE = make_rule(__doc__, id="NKI001", name="no-kernel", severity="error", category="correctness", check=check)
