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

import ast
from collections.abc import Iterator

from nkieval.analysis.finding import Finding
from nkieval.analysis.nki.model import PURE_BUILTINS, Access, Alloc, FunctionModel, SourceModel, walk
from nkieval.analysis.rule import make_rule


def _handed_on(f: FunctionModel) -> set[int]:
    """Nodes through which a tile may be written without the model seeing the write: arguments of the
    kernel's own helper functions (``_step(..., out[bi:bi + 1])``) and the tuples a ``for`` unpacks into
    aliases (``for w, dst in ((w_gate, gate), (w_up, up))``)."""
    out: set[int] = set()
    for c in f.calls:
        root = (c.qn or "").split(".")[0]
        if root and root not in ("nl", "nisa", "np", "numpy", "math") and c.qn not in PURE_BUILTINS:
            for a in [*c.node.args, *(k.value for k in c.node.keywords)]:
                out |= {id(n) for n in walk(a)}
    for node in walk(f.node):
        if isinstance(node, ast.For) and isinstance(node.iter, ast.Tuple | ast.List):
            out |= {id(n) for n in walk(node.iter)}
    return out


def _conditional(f: FunctionModel) -> set[int]:
    """Nodes that run only under a condition (an ``if`` body or a conditional expression's branch)."""
    out: set[int] = set()
    for node in walk(f.node):
        if isinstance(node, ast.If | ast.IfExp):
            for part in (node.body, node.orelse):
                for b in part if isinstance(part, list) else [part]:
                    out |= {id(n) for n in walk(b)}
    return out


def _written_later_in_loop(f: FunctionModel, alloc: Alloc, read: Access, conditional: set[int]) -> bool:
    """A read under a condition (``if c > 0:``, ``... if ti == 0 else carry``) in a loop that holds it but
    not the allocation, with a write to the tile later in that loop: the read sees the previous
    iteration's value (an unconditional read, ``acc = acc + part`` from the first iteration, is flagged)."""
    if id(read.node) not in conditional:
        return False
    carried = [lp for lp in read.loops if lp not in alloc.call.loops]
    return any(a.name == alloc.name and a.kind == "write" and a.order > read.order and set(carried) & set(a.loops)
               for a in f.accesses)


def check(model: SourceModel) -> Iterator[Finding]:
    for f in model.nki_functions:
        handed_on, conditional = _handed_on(f), _conditional(f)
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
                if acc.kind == "read" and (id(acc.node) in handed_on or _written_later_in_loop(f, alloc, acc, conditional)):
                    break  # written where the model cannot see it, or possibly by an earlier iteration
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
