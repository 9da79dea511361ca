"""Validation errors and the catalogue of hardware rules the simulator enforces.

Every rule has a stable id; an error names the instruction, the operand and the rule, and
quotes the numbers (``tensor_tensor: data1 partition dimension 256 exceeds maximum 128``).
``NkiValidationError`` subclasses ``AssertionError`` because the reference NKI simulator
raises assertions, so code written against it catches ours too.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    id: str
    title: str
    why: str


RULES: dict[str, Rule] = {
    r.id: r
    for r in (
        Rule("partition-limit", "partition dimension of an on-chip operand must be <= 128",
             "SBUF and PSUM have 128 partitions; one instruction drives at most 128 lanes."),
        Rule("partition-mismatch", "operands must have matching partition counts",
             "Vector/Scalar/GpSimd lanes map one partition each; inputs and output must line up."),
        Rule("shape-mismatch", "operands must have matching element counts / shapes",
             "An engine streams the same number of elements per partition from every operand."),
        Rule("buffer", "operand is in a memory the instruction cannot access",
             "e.g. the Tensor engine reads SBUF and writes PSUM; DMA never touches PSUM; GpSimd never touches PSUM."),
        Rule("dtype", "dtype not supported by this instruction or engine",
             "Engines support a fixed set of formats per operand (e.g. fp32 matmul inputs must pair with fp32)."),
        Rule("matmul-limit", "nc_matmul operand sizes exceed the PE array or PSUM bank",
             "stationary is at most [128, 128]; moving free size at most 512 (one 2 KiB PSUM bank) on v2/v3."),
        Rule("psum-bank", "a PSUM write must stay inside one 2 KiB bank per partition (v2/v3)",
             "The PE array writes one PSUM bank per matmul on NeuronCore-v2/v3."),
        Rule("psum-alignment", "manually placed PSUM tensors must start on a 2 KiB bank",
             "PSUM addresses are bank-aligned."),
        Rule("generation", "feature not available on the selected NeuronCore generation",
             "Instructions and modes are gated by generation (trn1=v2, trn2=v3, trn3=v4)."),
        Rule("out-of-bounds", "access outside a tensor or its storage",
             "Indices and access patterns must stay inside the tensor."),
        Rule("sbuf-capacity", "live SBUF allocations exceed the per-partition SBUF size",
             "SBUF is 192/224/256 KiB per partition on v2/v3/v4; the compiler would have to spill or fail."),
        Rule("psum-capacity", "live PSUM allocations exceed the 16 KiB (8 banks) per partition",
             "PSUM has 8 banks of 2 KiB per partition."),
        Rule("indexing", "illegal indexing or view",
             "On-chip tensors keep the partition dim first and stay at least 2-D; views must be expressible as access patterns."),
        Rule("argument", "illegal argument value",
             "The instruction's documented argument domain."),
        Rule("instruction-limit", "free size or count outside the instruction's documented range",
             "e.g. bn_stats free size <= 512, max8 needs 8..16384 elements per partition."),
        Rule("simulator-only", "operation runs in simulation but not on hardware",
             "e.g. nl.divide, fmod, mod are not hardware instructions (NKI release notes 0.4)."),
        Rule("psum-accumulate", "PSUM accumulation pattern undefined on hardware",
             "Accumulating onto PSUM that no matmul wrote (never written, or written by memset/copy on v2/v3) is undefined."),
        Rule("kernel", "kernel launch or return rule",
             "Kernel arguments and results are HBM tensors; outputs are shared_hbm; LNC degree 1 or 2."),
        Rule("uninitialized", "read of memory never written",
             "Fresh allocations hold garbage on hardware; the simulator fills them with NaN / 4."),
    )
}


class NkiValidationError(AssertionError):
    """A kernel broke a hardware or API rule. Fields carry the facts; ``str()`` is the message."""

    def __init__(
        self,
        message: str,
        *,
        instruction: str | None = None,
        operand: str | None = None,
        rule: str | None = None,
        location: str | None = None,
    ) -> None:
        if rule is not None and rule not in RULES:
            raise KeyError(f"unknown rule id {rule!r}")
        self.instruction = instruction
        self.operand = operand
        self.rule = rule
        self.location = location
        self.detail = message
        super().__init__(self._format())

    def _format(self) -> str:
        head = f"{self.instruction}: " if self.instruction else ""
        tail = f" [rule {self.rule}]" if self.rule else ""
        loc = f" (at {self.location})" if self.location else ""
        return f"{head}{self.detail}{tail}{loc}"

    def with_location(self, location: str | None) -> NkiValidationError:
        if location and not self.location:
            self.location = location
            self.args = (self._format(),)
        return self

    def to_dict(self) -> dict[str, str | None]:
        return {
            "message": str(self),
            "instruction": self.instruction,
            "operand": self.operand,
            "rule": self.rule,
            "location": self.location,
        }


class NkiSimulatorWarning(UserWarning):
    """Code that runs in simulation but is wrong or undefined on hardware."""

    def __init__(self, message: str, *, rule: str, instruction: str | None = None, location: str | None = None):
        self.rule = rule
        self.instruction = instruction
        self.location = location
        head = f"{instruction}: " if instruction else ""
        loc = f" (at {location})" if location else ""
        super().__init__(f"{head}{message} [rule {rule}]{loc}")


def fail(instruction: str | None, message: str, *, rule: str, operand: str | None = None) -> NkiValidationError:
    """Build (not raise) a validation error; the caller raises it so tracebacks stay short."""
    return NkiValidationError(message, instruction=instruction, operand=operand, rule=rule)


def warn(message: str, *, rule: str, instruction: str | None = None, location: str | None = None) -> None:
    warnings.warn(NkiSimulatorWarning(message, rule=rule, instruction=instruction, location=location), stacklevel=3)
