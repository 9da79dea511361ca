"""NKI004 partition-dim-exceeds-limit: an SBUF/PSUM tile is allocated with more partitions than the hardware has.

## What it does
Flags `nl.ndarray`/`nl.zeros`/... on `nl.sbuf` or `nl.psum` whose first (partition) dimension is
known statically and exceeds the target's partition count (128 on trn1/trn2/trn3).

## Why is this bad
Dimension 0 of an on-chip tile is the partition axis; it maps to the 128 lanes of every engine
and to the 128 SBUF/PSUM partitions. A larger tile cannot exist: the compiler (and the
simulator) rejects it. It usually means a CUDA block size was copied as a tile size.

## Example
```python
t = nl.ndarray((256, 512), dtype=nl.float32, buffer=nl.sbuf)
```

## Use instead
```python
P = nl.tile_size.pmax  # 128
t = nl.ndarray((P, 512), dtype=nl.float32, buffer=nl.sbuf)  # loop over 128-row tiles
```

## References
- NKI docs, "Tiling overview", tile constraint TC#1 (P ≤ 128).
- hardware/data/trn*.toml, fact `partitions`.
"""

from __future__ import annotations

from collections.abc import Iterator

from nkieval.analysis.finding import Finding
from nkieval.analysis.nki.model import SourceModel
from nkieval.analysis.rule import make_rule


def check(model: SourceModel) -> Iterator[Finding]:
    limit = int(model.target.partitions)
    for f in model.nki_functions:
        for a in f.allocs:
            if a.buffer not in ("sbuf", "psum") or not a.shape:
                continue
            p = model.int_value(a.shape[0], f)
            if p is not None and p > limit:
                yield RULE.finding(
                    f"`{a.name}` is allocated in {a.buffer.upper()} with {p} partitions; {model.target.name} "
                    f"has {limit} (dimension 0 of an on-chip tile is the partition axis)",
                    a.line, a.call.col,
                    f"tile that dimension in chunks of nl.tile_size.pmax ({limit}) and loop over the chunks")


RULE = make_rule(__doc__, id="NKI004", name="partition-dim-exceeds-limit", severity="error",
                 category="correctness", check=check)
