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
             "Indices and access patterns must stay inside the tensor (an .ap() view past it is an error where an "
             "instruction uses it, not where it is made)."),
        Rule("sbuf-capacity", "tiles live at once (first to last access) exceed the per-partition SBUF size",
             "SBUF is 192/224/256 KiB per partition on v2/v3/v4; the compiler would have to spill or fail."),
        Rule("psum-capacity", "tiles live at once (first to last access) exceed the 16 KiB (8 banks) per partition",
             "PSUM has 8 banks of 2 KiB per partition."),
        Rule("indexing", "illegal indexing or view",
             "On-chip tensors keep the partition dim first and stay at least 2-D; views must be expressible as access "
             "patterns; an indirect view (.ap(vector_offset=...), vector_select) is resolved by a DMA as it is made."),
        Rule("argument", "illegal argument value",
             "The instruction's documented argument domain."),
        Rule("instruction-limit", "free size or count outside the instruction's documented range",
             "e.g. bn_stats free size <= 512, max8 needs 8..16384 elements per partition."),
        Rule("simulator-only", "operation runs in simulation but not on hardware",
             "e.g. nl.divide, fmod, mod are not hardware instructions in the current API (NKI release notes "
             "0.4); Beta-1 kernels compiled them."),
        Rule("psum-accumulate", "PSUM accumulation pattern undefined on hardware",
             "Accumulating onto PSUM that no matmul wrote (never written, or written by memset/copy on v2/v3) is undefined."),
        Rule("onezero-hint", "a one/zero hint on an fp32 matmul operand that holds other values",
             "is_stationary_onezero / is_moving_onezero let the PE skip the fp32 passes other values need (up to "
             "2x faster, nki.isa.nc_matmul); an operand with other values would give an undefined result, and the "
             "performance model would credit a speed-up the kernel did not earn."),
        Rule("kernel", "kernel launch or return rule",
             "Kernel arguments and results are HBM tensors; outputs are shared_hbm; LNC degree 1 or 2."),
        Rule("uninitialized", "read of memory never written",
             "Fresh allocations hold garbage on hardware; the simulator fills them with NaN / 4."),
        Rule("unsupported", "API that nkieval does not model yet",
             "The documentation does not define its semantics well enough to simulate; nkieval refuses the call "
             "instead of guessing. This is a gap in nkieval, not a fault of the kernel."),
        Rule("instruction-budget", "the kernel issued more instructions than the run allows",
             "A harness bounds a run with SimOptions.max_instructions (the review pipeline sets it from the task's "
             "limits) so a kernel that loops without bound stops at once with this verdict, not at a wall-clock "
             "timeout."),
        Rule("time-budget", "the run took longer than it is allowed",
             "A harness that replays a program in its own process bounds the run with SimOptions.time_limit_s "
             "(the review sets it to the case's time limit), where a child process would be killed."),
        Rule("memory-budget", "the run's live tensors would exceed the bytes it is allowed",
             "A harness that replays a program in its own process bounds it with SimOptions.max_bytes (the "
             "review sets it to the case's memory limit), where a child process would hit its address-space "
             "limit."),
        Rule("trace-time-value", "the kernel's Python reads a value that only the device holds",
             "A kernel is traced from its inputs' shapes and dtypes (as the NKI compiler traces it) and its "
             "instructions run later on the data: tensor and register values do not exist while the Python runs."),
        Rule("trace-argument", "a value that no NKI instruction takes was passed to one",
             "Instructions take tensors, registers, scalars, numbers, dtypes, operators and enums; a recorded "
             "program can carry nothing else."),
        Rule("loop-dependency", "iterations of a parallel (affine_range) loop write the same element",
             "Beta-1 affine_range iterations may run in any order; only associative PSUM accumulation is allowed."),
        Rule("race", "the two programs of an LNC-2 pair touch the same shared elements with no synchronisation between",
             "The two cores run at the same time and nothing orders their DMAs but core_barrier or sendrecv: a "
             "store over the other program's stores or reads (with other values), or a read of its stores, has an "
             "outcome that depends on timing. The simulator runs the programs access by access, one order the "
             "hardware can give."),
    )
}


#: One real message per rule (checked against the simulator by tests/sim/test_validation.py).
EXAMPLES: dict[str, str] = {
    "partition-limit": "tensor_tensor: data1 partition dimension 256 exceeds maximum 128",
    "partition-mismatch": "tensor_tensor: number of partitions mismatch: dst[128, 64] has 128, data2[64, 64] has 64",
    "shape-mismatch": "tensor_tensor: elements per partition mismatch: dst[128, 64] has 64, data2[128, 32] has 32",
    "buffer": "dma_copy: expected operand 'src' to be in address space 'hbm|sbuf', but got a tensor in 'psum' "
              "instead (DMA cannot access PSUM; copy PSUM to SBUF with tensor_copy first)",
    "dtype": "nc_matmul: stationary dtype int8 is not a Tensor-engine input type (float8_e4m3, float8_e5m2, "
             "bfloat16, float16, tfloat32, float32)",
    "matmul-limit": "nc_matmul: moving free size 1024 exceeds maximum 512 on trn2",
    "psum-bank": "nc_matmul: dst bytes [1024, 3072) per partition cross a 2048-byte PSUM bank boundary; one matmul "
                 "output must stay in one bank (512 fp32 elements)",
    "psum-alignment": "ndarray: PSUM address 1024 is not aligned to a 2048-byte bank",
    "generation": "dma_transpose: not available on trn1 (NeuronCore-v2); needs trn2 (NeuronCore-v3) or later",
    "out-of-bounds": "dma_copy: index 16384 is out of bounds for axis 0 with size 16384 (indirect src index 256 at row 1, of 256 rows)",
    "sbuf-capacity": "kernel: tiles live at once need 262144 bytes per partition of SBUF, exceeding the "
                     "229376-byte SBUF partition (live ranges, first to last access, at instruction 1); 2 live: "
                     "big1[128, 32768] float32 131072 B @ kernel.py:3, …",
    "psum-capacity": "kernel: tiles live at once need 18432 bytes per partition of PSUM, exceeding the 16384-byte "
                     "PSUM partition (live ranges, first to last access, at instruction 8); 9 live: acc0[128, 512] "
                     "float32 2048 B @ kernel.py:4, …",
    "indexing": "reshape of an on-chip tensor cannot change the partition dimension (128 -> 64)",
    "argument": "tensor_reduce: cannot reduce along the partition dimension (axis 0); use nc_transpose, a ones "
                "matmul or tensor_partition_reduce",
    "instruction-limit": "bn_stats: data has 1024 elements per partition, exceeding bn_stats_fmax 512; split it into "
                         "512-element chunks and combine with bn_aggr",
    "simulator-only": "tensor_tensor: nl.divide is not a hardware instruction: it runs in simulation but fails on "
                      "device",
    "psum-accumulate": "nc_matmul: accumulate=True onto PSUM written by a non-matmul instruction (memset/copy) is "
                       "undefined on NeuronCore-v2/v3",
    "onezero-hint": "nc_matmul: is_moving_onezero=True but moving[128, 512] holds values other than 0 and 1 "
                    "(0.5 at [0, 0]): the hint lets the PE skip the fp32 passes such values need, so the result "
                    "would be undefined on hardware; drop the hint or pass an operand of zeros and ones",
    "kernel": "kernel: kernel returned NkiTensor(t2[128, 64], float32, sbuf): outputs must be HBM tensors "
              "allocated with buffer=nl.shared_hbm",
    "uninitialized": "tensor_copy: reads SBUF tensor 't2'[128, 64] before anything wrote it (garbage on hardware; "
                     "NaN / 4 sentinels in the simulator)",
    "unsupported": "alloc_tiles: element_shape (256, 64) spans 2 tiles of 128 along the partition dimension; the "
                   "documented 'dense rank-two capacity layout' that stacks them in SBUF/PSUM is not specified "
                   "precisely enough to simulate",
}
#: How each non-plain-error rule is reported (default: an error).
REPORTED_AS: dict[str, str] = {
    "simulator-only": 'warning; an error with `SimOptions(simulator_only="error")`, silent with "allow"',
    "psum-accumulate": "warning (the kernel runs; hardware behaviour is undefined)",
    "race": "warning, once per shared tensor and kind (a store over stores, a read of stores, a store over reads); "
            "the run goes on in its one order",
    "uninitialized": "warning, once per allocation (reads see NaN / 4 sentinels; a tile read after another tile "
                     "placed at its address wrote there sees that tile's values, as on hardware)",
    "sbuf-capacity": 'error; a warning with `SimOptions(capacity_check="warn")`, skipped with "off"',
    "psum-capacity": 'error; a warning with `SimOptions(capacity_check="warn")`, skipped with "off"',
    "instruction-budget": "error, only when `SimOptions(max_instructions=N)` is set (default: no limit)",
    "time-budget": "error, only when `SimOptions(time_limit_s=S)` is set (default: no limit)",
    "memory-budget": "error, only when `SimOptions(max_bytes=N)` is set (default: no limit)",
    "unsupported": "error (`NkiUnsupportedError`, also a `NotImplementedError`, so compatibility reports blame "
                   "nkieval, not the kernel)",
}


def rules_markdown() -> str:
    """docs/rules.md, generated from RULES and EXAMPLES (a test keeps the file in sync)."""
    lines = [
        "# Validation rules",
        "",
        "Every hardware or API rule the simulator enforces has a stable id. An error",
        "(`NkiValidationError`, an `AssertionError`) or warning (`NkiSimulatorWarning`) names the",
        "instruction, the operand, the rule and the numbers, and ends with `[rule <id>] (at file:line)`.",
        "",
        "Generated from `nkieval.sim.errors.RULES` by `nkieval.sim.errors.rules_markdown()`;",
        "`tests/sim/test_validation.py` shows every message and keeps this file in sync.",
        "",
    ]
    for r in RULES.values():
        kind = REPORTED_AS.get(r.id, "error")
        lines += [f"## `{r.id}`", "", f"**What:** {r.title}.", "", f"**Why:** {r.why}", "", f"**Raised as:** {kind}",
                  ""]
        if r.id in EXAMPLES:
            lines += ["**Example:**", "", "```text", f"{EXAMPLES[r.id]} [rule {r.id}]", "```", ""]
    return "\n".join(lines)


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


class NkiUnsupportedError(NkiValidationError, NotImplementedError):
    """A documented API that nkieval does not model yet (rule ``unsupported``): the kernel may be
    fine; the simulator cannot run it."""

    def __init__(self, message: str, *, instruction: str | None = None, operand: str | None = None,
                 location: str | None = None) -> None:
        super().__init__(message, instruction=instruction, operand=operand, rule="unsupported", location=location)


class NkiIndexError(NkiValidationError, IndexError):
    """An index out of bounds at run time (rule ``out-of-bounds``): also an ``IndexError``, which NumPy and the
    reference simulator raise there (its message starts as NumPy's)."""

    def __init__(self, message: str, *, instruction: str | None = None, operand: str | None = None,
                 location: str | None = None) -> None:
        super().__init__(message, instruction=instruction, operand=operand, rule="out-of-bounds", location=location)


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
