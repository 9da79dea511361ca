"""NKI013 fp32-matmul-inputs: matmul operands are fp32 tiles where bf16 would usually do.

## What it does
Flags `nc_matmul`/`nl.matmul` operands whose tiles were allocated as `nl.float32`. A performance
note, not an error: some tasks need fp32 inputs.

## Why is this bad
TensorE runs fp32 matmuls at a quarter of the bf16 rate (cost factor `mm_fp32_factor` in the
hardware data). PSUM accumulates in fp32 either way, so bf16 inputs with fp32 accumulation are
the usual recipe; the numerics standard decides whether the task allows it.

## Example
```python
lhs = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
nisa.nc_matmul(dst=acc, stationary=lhs, moving=rhs)
```

## Use instead
```python
lhs = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.sbuf)  # DMA casts fp32 -> bf16
nisa.nc_matmul(dst=acc, stationary=lhs, moving=rhs)            # fp32 accumulation in PSUM
```

## References
- NKI docs, Trainium architecture guide: fp32 at 1/4 of bf16 TensorE throughput.
- hardware/data/trn*.toml, fact `mm_fp32_factor`.
"""

from __future__ import annotations

from collections.abc import Iterator

from nkieval.analysis.finding import Finding
from nkieval.analysis.nki.helpers import MATMULS, fact_value, matmul_operands
from nkieval.analysis.nki.model import SourceModel, base_name
from nkieval.analysis.rule import make_rule


def check(model: SourceModel) -> Iterator[Finding]:
    factor = fact_value(model.target, "mm_fp32_factor") or 4
    for f in model.nki_functions:
        for c in f.calls:
            if c.qn not in MATMULS:
                continue
            fp32 = []
            for op in matmul_operands(c):
                a = f.alloc_of(base_name(op) or "")
                if a is not None and a.dtype in ("float32", "fp32"):
                    fp32.append(a.name)
            if fp32:
                yield RULE.finding(
                    f"matmul operand(s) {', '.join(f'`{n}`' for n in fp32)} are fp32: TensorE runs fp32 "
                    f"{factor}x slower than bf16 on {model.target.name}", c.line, c.col,
                    "load the operands as nl.bfloat16 (PSUM still accumulates in fp32) unless the task's "
                    "precision recipe requires fp32 inputs")


RULE = make_rule(__doc__, id="NKI013", name="fp32-matmul-inputs", severity="info", category="performance",
                 check=check)
