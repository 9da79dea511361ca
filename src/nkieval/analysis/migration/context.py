"""What MIG rules compare: the CUDA fact sheet and NKI-side facts extracted once from the port.

NKI facts are computed from the shared :class:`SourceModel` and the NKI rules' own findings, so a
migration finding can cite the same evidence (line numbers, rule ids) as the code-quality review.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from functools import cached_property

from nkieval.analysis.cuda.summary import CudaSummary, KernelInfo
from nkieval.analysis.finding import Finding
from nkieval.analysis.nki.helpers import DMA_LOADS, HBM_BUFFERS, MATMULS, dma_src, matmul_operands
from nkieval.analysis.nki.model import CallSite, SourceModel, base_name, walk

EXP_OPS = {"nl.exp"}
ACT_CALLS = {"nisa.activation", "nisa.activation_reduce", "nisa.activate2"}

#: Loops that visit every index of their one argument, one per iteration.
_EVERY_INDEX_LOOPS = frozenset({"range", "nl.affine_range", "nl.sequential_range", "nl.static_range"})


@dataclass
class MigrationContext:
    cuda: CudaSummary
    nki: SourceModel
    nki_findings: list[Finding] = field(default_factory=list)

    # -- CUDA side ----------------------------------------------------------------------
    def cuda_kernel_with(self, predicate: object) -> KernelInfo | None:
        """The first CUDA kernel for which ``predicate(kernel)`` is true."""
        return next((k for k in self.cuda.kernels if predicate(k)), None)  # type: ignore[operator]

    # -- NKI side -----------------------------------------------------------------------
    def findings_of(self, rule_id: str) -> list[Finding]:
        return [f for f in self.nki_findings if f.rule == rule_id]

    @cached_property
    def calls(self) -> list[CallSite]:
        return [c for f in self.nki.nki_functions for c in f.calls]

    @cached_property
    def referenced(self) -> dict[str, int]:
        """Qualified names referenced anywhere (``nl.gelu`` as a call or as an ``op=``), first line."""
        out: dict[str, int] = {}
        for node in walk(self.nki.tree):
            if isinstance(node, ast.Attribute):
                qn = self.nki.qualname(node)
                if qn and qn.split(".")[0] in ("nl", "nisa"):
                    out.setdefault(qn, node.lineno)
        return out

    def op_of(self, c: CallSite) -> str | None:
        for key, pos in (("op", None), ("op0", None)):
            v = c.arg(key, pos)
            if v is not None:
                return self.nki.qualname(v)
        return None

    @cached_property
    def has_tail_handling(self) -> bool:
        """A ``min()`` clamp, a Beta 1 ``mask=``, remainder arithmetic on a runtime size (``n % p``, or
        ``n - bulk`` next to ``n // p``; not in an assert), or a loop over every index of a runtime size
        (``for i in range(n)``: one row per iteration has no ragged tail)."""
        for f in self.nki.nki_functions:
            asserted = {id(n) for a in walk(f.node) if isinstance(a, ast.Assert) for n in walk(a)}

            def runtime(e: ast.AST, shape_names: set[str] = f.shape_names) -> bool:
                return any(isinstance(n, ast.Name) and n.id in shape_names for n in walk(e))

            floordiv = any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.FloorDiv) and runtime(n.left)
                           and id(n) not in asserted for n in walk(f.node))
            for node in walk(f.node):
                if isinstance(node, ast.For) and isinstance(node.iter, ast.Call) and not node.iter.keywords \
                        and self.nki.qualname(node.iter.func) in _EVERY_INDEX_LOOPS and len(node.iter.args) == 1 \
                        and isinstance(node.iter.args[0], ast.Name) and node.iter.args[0].id in f.shape_names:
                    return True
                if floordiv and isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub) \
                        and id(node) not in asserted and runtime(node.left) and runtime(node.right):
                    return True
                if isinstance(node, ast.Call) and self.nki.qualname(node.func) == "min":
                    return True
                if isinstance(node, ast.keyword) and node.arg == "mask":
                    return True
                if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and id(node) not in asserted \
                        and any(isinstance(n, ast.Name) and n.id in f.shape_names for n in walk(node.left)):
                    return True
        return False

    @cached_property
    def max_reduction(self) -> CallSite | None:
        for c in self.calls:
            if c.qn in ("nisa.tensor_reduce", "nisa.tensor_scalar_reduce", "nisa.select_reduce",
                        "nisa.range_select") and any(
                    self.nki.qualname(a) in ("nl.maximum", "nl.max") for a in
                    [*c.node.args, *(k.value for k in c.node.keywords)]):
                return c
            if c.qn in ("nl.max", "nisa.max8", "nl.softmax"):
                return c
        return None

    @cached_property
    def exp_call(self) -> CallSite | None:
        for c in self.calls:
            if c.qn in EXP_OPS or c.qn == "nisa.exponential":
                return c
            if c.qn in ACT_CALLS and self.op_of(c) == "nl.exp":
                return c
        return None

    @cached_property
    def matmuls(self) -> list[CallSite]:
        return [c for c in self.calls if c.qn in MATMULS]

    def alloc_dtype(self, name: str | None) -> str | None:
        for f in self.nki.nki_functions:
            a = f.alloc_of(name or "")
            if a is not None:
                return a.dtype
        return None

    def matmul_input_dtypes(self) -> set[str]:
        out: set[str] = set()
        for c in self.matmuls:
            for op in matmul_operands(c):
                d = self.alloc_dtype(base_name(op))
                if d:
                    out.add(d)
        return out

    @cached_property
    def hbm_readbacks(self) -> list[CallSite]:
        """DMAs that read from a tensor the kernel allocated in HBM (its own output)."""
        out = []
        for f in self.nki.nki_functions:
            outputs = {a.name for a in f.allocs if a.buffer in HBM_BUFFERS}
            for c in f.calls:
                if c.qn in DMA_LOADS and base_name(dma_src(c)) in outputs:
                    out.append(c)
        return out
