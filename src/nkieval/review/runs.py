"""What a candidate run is given and what comes back, case by case: shared by the sandbox (the candidate's own
process, for trusted code) and the judge's executor (recorded programs replayed in the judge's process)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from nkieval.sim.program.codec import DEFAULT_MAX_INSTRUCTIONS

if TYPE_CHECKING:
    from nkieval.review.sandbox import SealedInput

#: Case statuses and what each means (reports quote these ids).
STATUSES: dict[str, str] = {
    "ok": "ran and returned outputs",
    "rule-violation": "broke a hardware/API rule (NkiValidationError)",
    "exception": "raised an exception",
    "import-error": "the candidate file failed to import or lacks the kernel entry point",
    "timeout": "exceeded the wall-clock limit and was killed",
    "memory-limit": "exceeded the memory limit",
    "crash": "the process died without reporting (os._exit, signal, interpreter crash)",
    "bad-output": "returned something other than HBM tensors the kernel wrote",
    "instruction-limit": "issued more instructions than the task allows",
    "not-run": "not run because the candidate could not start",
    "infra-error": "the harness itself failed (retryable)",
    "bad-program": "the tracer sent a program the judge refuses (only a tampered tracer does)",
    "sandbox-violation": "the candidate did something the sandbox forbids (a blocked system call)",
}

#: the fields of a failed run's record that reports quote
ERROR_FIELDS = ("error_type", "message", "frames", "rule", "instruction", "operand", "location", "stdout_tail",
                 "stderr_tail")


@dataclass
class CaseJob:
    """One run of the candidate: its inputs and params (the child never sees anything else)."""

    label: str
    inputs: dict[str, np.ndarray]
    params: dict[str, Any]
    n_outputs: int
    want_trace: bool = True
    #: ``npzio.dumps(inputs)`` when the caller already has it (the review's case cache)
    packed: bytes | None = None
    #: the same bytes sealed (:func:`seal_input`): the forked child maps them, no file is written
    sealed: SealedInput | None = None


@dataclass
class CaseRun:
    """What came back from one case: status, outputs (arrays), the trace (``Trace.to_compact`` text,
    evidence case only), timings, error facts."""

    label: str
    status: str
    outputs: list[np.ndarray] = field(default_factory=list)
    trace_json: str | None = None
    #: the evidence case's trace as the judge's own replay made it (no text to parse); ``trace_json`` is what a
    #: candidate's process wrote instead
    trace: Any = None
    sim_s: float = 0.0
    wall_s: float = 0.0
    n_instructions: int | None = None
    error: dict[str, Any] = field(default_factory=dict)
    warnings: list[dict[str, Any]] = field(default_factory=list)
    #: per output, the mask of elements no instruction wrote (None: all written); None when unknown
    unwritten: list[np.ndarray | None] | None = None
    #: child-side seconds around the simulation: reading the inputs, and everything after
    #: ``run_kernel`` returned (checks, unwritten masks, writing outputs and the trace)
    load_s: float = 0.0
    post_s: float = 0.0
    #: the child's start-up before its first case (only on that case's run)
    setup_s: float = 0.0

    @property
    def traced(self) -> bool:
        """Whether the run brought its instruction trace back."""
        return self.trace is not None or bool(self.trace_json)

    def parsed_trace(self, max_items: int) -> Any:
        """The run's :class:`~nkieval.sim.trace.Trace`: the judge's own, or the text a child wrote, parsed
        (``max_items`` bounds what that text may hold; a malformed text raises what the parser raises)."""
        if self.trace is not None:
            return self.trace
        from nkieval.sim.trace import Trace

        return Trace.from_compact(self.trace_json or "", max_items=max_items)


@dataclass(frozen=True)
class SandboxLimits:
    timeout_s: float = 60.0
    memory_mb: int = 4096
    max_instructions: int = DEFAULT_MAX_INSTRUCTIONS
    #: extra seconds for a fresh child to import the candidate before its first case
    startup_s: float = 20.0


def skipped(label: str, hung: str) -> CaseRun:
    """A case not run because case ``hung`` timed out before it (a kernel that hangs on one shape almost always
    hangs on the next)."""
    return CaseRun(label, "not-run", error={"message": f"skipped: case {hung} timed out"})
