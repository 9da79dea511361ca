"""Simulator options: one frozen dataclass, documented defaults, validated values."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Literal

#: what ``SimOptions.exact`` may name
EXACT_SOURCES = frozenset({"functions", "alu", "matmul", "reduce"})


@dataclass(frozen=True, kw_only=True)
class SimOptions:
    """How the simulator behaves.

    Attributes:
        precise_fp: True (default, like ``NKI_PRECISE_FP=1``) stores bf16/fp8 with their real
            precision; False stores every float format as fp32 (``NKI_PRECISE_FP=0``).
        fp8_overflow: ``"saturate"`` (default) clamps values beyond a narrow format's max to
            ±max, the engines' behaviour for cFP8 outputs; ``"ieee"`` keeps ml_dtypes'
            conversion (±inf where the format has inf, NaN otherwise).
        float_to_int: how a float value written to an integer dtype is converted: ``"rne"``
            (default) rounds to nearest, ties to even, as the hardware and ``nki.simulate`` since
            NKI 0.6 (release notes 0.6.0, "fp32-to-integer casts match hardware"); ``"truncate"``
            rounds toward zero, NumPy's conversion, which the Beta-1 simulator and ``nki.simulate``
            before 0.6 used. Both saturate to the destination's range and read NaN as 0.
        capacity_check: ``"error"`` (default) raises when live SBUF/PSUM allocations exceed
            the target's per-partition size, or a tile is placed (``address=``, direct
            allocation) past its end; ``"warn"`` only warns; ``"off"`` skips it.
        simulator_only: what to do with operations that run only in simulation
            (``nl.divide`` …): ``"warn"`` (default), ``"error"`` or ``"allow"``.
        record_trace: record every instruction (needed by the performance model).
        fill_uninitialized: fill fresh allocations with NaN (floats) / 4 (ints).
        compute_values: False makes a *record-only* run: every instruction checks its operands, is traced and
            changes the simulator's state (allocations, PSUM accumulation flags, registers) as usual, but no
            element value is computed or stored, and memory reads as zeros. The instruction stream, the trace and
            every check that does not depend on element values are those of a computing run; recording a
            program (nkieval.sim.program) and estimating performance need nothing more.
        max_instructions: stop the run with an ``instruction-budget`` error once the kernel
            issues more instructions than this (all programs of the launch together); None
            (default) means no limit. A runaway kernel then fails at once with a specific
            verdict instead of running to a wall-clock timeout.
        time_limit_s: stop the run with a ``time-budget`` error once it has run this many wall-clock
            seconds (checked at every instruction and device-loop iteration); None (default): no limit.
            A harness that runs a program in its own process bounds it with this, where a child
            process would be killed.
        max_bytes: stop the run with a ``memory-budget`` error when a new tensor would take the
            bytes its live tensors hold (HBM tensors it made, live on-chip tiles) past this; None
            (default): no limit. The in-process counterpart of a child's address-space limit.
        emit_warnings: False keeps the run's warnings off Python's warning stream: they are only
            recorded on the trace (``trace.warnings``), for a harness that reports them itself.
        exact: which of the engines' fp32 computations run in fp64 instead, rounded to the destination once
            per instruction, to measure what their rounding contributes to a result (the review re-runs a
            port with one at a time): ``"functions"`` (the unary functions: ``exp``, ``rsqrt``, ``tanh`` …
            evaluated on fp64 operands), ``"alu"`` (the ALU's add, subtract, multiply, divide, power left in
            fp64: an instruction chaining two, ``(x * s) + b``, rounds once, where it writes),
            ``"matmul"`` (``nc_matmul``'s contraction), ``"reduce"`` (the
            Vector engine's ``tensor_reduce`` sum over the free axis; the engines' accumulator registers stay
            fp32). Empty (default): every engine computes in fp32. Not a hardware behaviour.
    """

    precise_fp: bool = True
    fp8_overflow: Literal["saturate", "ieee"] = "saturate"
    float_to_int: Literal["rne", "truncate"] = "rne"
    capacity_check: Literal["error", "warn", "off"] = "error"
    simulator_only: Literal["warn", "error", "allow"] = "warn"
    record_trace: bool = True
    fill_uninitialized: bool = True
    compute_values: bool = True
    max_instructions: int | None = None
    time_limit_s: float | None = None
    max_bytes: int | None = None
    emit_warnings: bool = True
    exact: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.time_limit_s is not None and (isinstance(self.time_limit_s, bool)
                                              or not isinstance(self.time_limit_s, int | float)
                                              or not self.time_limit_s > 0):
            raise ValueError(f"SimOptions.time_limit_s must be a positive number or None, but got "
                             f"{self.time_limit_s!r}")
        if self.max_bytes is not None and (isinstance(self.max_bytes, bool) or not isinstance(self.max_bytes, int)
                                           or self.max_bytes < 1):
            raise ValueError(f"SimOptions.max_bytes must be a positive int or None, but got {self.max_bytes!r}")
        if self.max_instructions is not None and (isinstance(self.max_instructions, bool)
                                                  or not isinstance(self.max_instructions, int)
                                                  or self.max_instructions < 1):
            raise ValueError(f"SimOptions.max_instructions must be a positive int or None, but got "
                             f"{self.max_instructions!r}")
        if not (isinstance(self.exact, frozenset) and self.exact <= EXACT_SOURCES):
            raise ValueError(f"SimOptions.exact must be a frozenset of {sorted(EXACT_SOURCES)}, but got {self.exact!r}")
        for name, allowed in (
            ("fp8_overflow", ("saturate", "ieee")),
            ("float_to_int", ("rne", "truncate")),
            ("capacity_check", ("error", "warn", "off")),
            ("simulator_only", ("warn", "error", "allow")),
        ):
            if getattr(self, name) not in allowed:
                raise ValueError(f"SimOptions.{name} must be one of {allowed}, but got {getattr(self, name)!r}")

    @classmethod
    def from_env(cls, **overrides: object) -> SimOptions:
        """Defaults, with ``NKI_PRECISE_FP`` read from the environment, then ``overrides``."""
        base = cls(precise_fp=os.environ.get("NKI_PRECISE_FP", "1") != "0")
        return replace(base, **overrides) if overrides else base  # type: ignore[arg-type]
