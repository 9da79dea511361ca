"""NKI002 uninitialised-read: a tile created by `nl.ndarray` is read before anything writes it.

## What it does
Follows each tile allocated with `nl.ndarray`/`nl.empty_like` in program order (loop bodies
once, in source order) and flags the first read that happens before any write (a `dst=`
operand, a DMA into it, an assignment to a slice, or a hand-off to a helper function).

## Why is this bad
`nl.ndarray` memory is uninitialised: on hardware it holds whatever the previous kernel left in
SBUF, and the simulators fill it with NaN. A kernel that "works" may be reading stale data that
happens to be right. The classic case is an accumulator that is never zeroed.

## Example
```python
acc = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
for i in range(n_tiles):
    nisa.tensor_tensor(dst=acc, data1=acc, data2=part, op=nl.add)  # acc read uninitialised
```

## Use instead
```python
acc = nl.zeros((128, 1), dtype=nl.float32, buffer=nl.sbuf)  # or nisa.memset(dst=acc, value=0.0)
```

## References
- NKI docs, `nki.language.ndarray` ("allocate, uninitialized").
- NKI docs, "NKI simulator": fresh allocations are filled with NaN sentinels.
"""

from __future__ import annotations

from collections.abc import Iterator

from nkieval.analysis.finding import Finding
from nkieval.analysis.nki.model import SourceModel
from nkieval.analysis.rule import make_rule


def check(model: SourceModel) -> Iterator[Finding]:
    for f in model.nki_functions:
        for alloc in f.allocs:
            if alloc.initialised:
                continue
            started = False
            for acc in f.accesses:
                if acc.name != alloc.name:
                    continue
                if acc.kind == "define":
                    if started:
                        break  # rebound: a new object from here on
                    if acc.line == alloc.line:
                        started = True
                    continue
                if not started or acc.kind == "meta":
                    continue
                if acc.kind == "read":
                    yield RULE.finding(
                        f"tile `{alloc.name}` (nl.ndarray at line {alloc.line}, uninitialised) is read here "
                        f"before anything writes it; its contents are undefined (NaN in the simulator)",
                        acc.line, acc.col,
                        f"write `{alloc.name}` first (nisa.memset, a DMA, or an instruction's dst=), or allocate "
                        f"it with nl.zeros if a zero start is intended")
                break


RULE = make_rule(__doc__, id="NKI002", name="uninitialised-read", severity="error", category="correctness",
                 check=check)
