"""The port's side of a GPU-vs-port difference: the candidate's recorded program replayed on the ablation case's
inputs with one of the simulator's rounding sources removed at a time (the counterpart of :mod:`nkieval.cuda.ablate`,
which re-runs the CUDA kernel).

The port ablations (each offered only where the program has what it removes):

* ``port_precision``: the port's on-chip bf16/fp16/fp8 tiles (SBUF, PSUM) allocated as fp32 instead (the recorded
  program rewritten: each such allocation's dtype, and its views' dtype, byte offsets and strides); the inputs and
  outputs in HBM keep their dtypes, so only the intermediates' roundings go. (``SimOptions(precise_fp=False)``
  cannot do it for a recorded program: its views carry the byte strides of the storage recorded);
* ``port_functions``: the engines' unary functions (``exp``, ``rsqrt``, ``tanh``, ``gelu`` …) evaluated in fp64
  and rounded once (``SimOptions(exact={"functions"})``);
* ``port_alu``: an instruction's chained ALU operations (``scalar_tensor_tensor``, ``tensor_scalar`` with two
  operators: ``(x * s) + b``) rounded once, where it writes, not after each (``SimOptions(exact={"alu"})``);
* ``port_matmul``: ``nc_matmul``'s contraction in fp64, rounded to fp32 once per instruction (PSUM still adds
  the instructions' results in fp32);
* ``port_reduce``: the Vector engine's ``tensor_reduce`` sums in fp64, rounded once.

A share is measured as on the GPU side: ``1 - |GPU - port_a|^2 / |GPU - port|^2`` summed over the output's
elements; the two sides' shares are ranked together (independent sources add in squares).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: what each port ablation removes, as a report names it
PORT_WHAT = {"port_precision": "bf16/fp8 intermediates",
             "port_functions": "fp32 activation functions (exp, rsqrt, ...)",
             "port_alu": "fp32 rounding between an instruction's two ALU operations",
             "port_matmul": "fp32 matmul contraction",
             "port_reduce": "fp32 engine reductions"}
#: seconds per review for the port's replays, half the GPU side's: the GPU's runs are kept with the case's data for
#: the task's next review, the port's depend on the candidate and run every review. Counted in the seconds of
#: :func:`replay_cost_s`, a model of a replay's CPU on the development machine, never a clock: which ablations a
#: report has must not depend on the machine or its load (the same candidate, task and seed, the same report)
PORT_ABLATION_BUDGET_S = 1.0
#: a replay's CPU per instruction and per element of its case's inputs and outputs, fitted on the port replays of
#: 46 built-in candidates of 16 tasks (thread-by-thread ports of ~1,800 instructions cost ~0.12 s, fused kernels of
#: ~20 instructions over ~300,000 elements 0.003-0.02 s): measured / modelled median 0.98, range 0.79-3.7 (the
#: largest: mamba_selective_scan's expert, 405 instructions of scans over 285,000 elements)
REPLAY_S_PER_INSTRUCTION = 65e-6
REPLAY_S_PER_ELEMENT = 25e-9
#: modelled seconds of one replay past which the port has no ablations at all (a case this large would spend the
#: budget on one ablation, and its replays' wall-clock limit would be all that bounds them)
MAX_REPLAY_S = 4.0
_INSTRUCTION_EVENT = re.compile(r'\["i",')


class PortReplaySafetyNet(RuntimeError):
    """A port ablation's replay ran past its case's wall-clock limit: the machine, not the candidate, is at fault
    (the port's own replay of the same program on the same case passed within it, and the ablations are budgeted
    by a model of their cost). Leaving the ablation out would make the report depend on the machine, so the
    review fails instead: a harness error (``nkieval review`` exits 3: retry)."""
#: unary functions whose fp32 evaluation rounds more than once or not correctly (the others are exact in fp32:
#: a copy, a sign, a max)
_ROUNDING_FUNCTIONS = frozenset({"exp", "log", "sqrt", "rsqrt", "sin", "cos", "tan", "arctan", "tanh", "sigmoid",
                                 "silu", "silu_dx", "gelu", "gelu_dx", "gelu_apprx_tanh", "gelu_apprx_sigmoid",
                                 "gelu_apprx_sigmoid_dx", "mish", "softplus", "erf", "erf_dx"})
_LOW_FLOATS = re.compile(r'"(bfloat16|float16|float8_e4m3\w*|float8_e5m2\w*|tfloat32)"')
_OP = re.compile(r'"op"\s*:\s*"(\w+)"')


@dataclass(frozen=True)
class PortAblation:
    """One replay: the program run with these :class:`~nkieval.sim.options.SimOptions` overrides."""

    name: str  # a key of PORT_WHAT
    overrides: Mapping[str, Any] = field(default_factory=dict)
    #: replay :func:`widened_program` of the program (its on-chip low-precision tiles in fp32)
    widened: bool = False

    @property
    def what(self) -> str:
        return PORT_WHAT[self.name]


def port_ablations(program_text: str) -> list[PortAblation]:
    """The port ablations that remove something the recorded program (its JSON text) does, in the order of
    :data:`PORT_WHAT`."""
    body = program_text  # (the names are looked for in the text: a program of a large shape is megabytes of JSON)
    ops = set(_OP.findall(body))
    out = []
    if _LOW_FLOATS.search(body) and widened_program(program_text) is not None:
        out.append(PortAblation("port_precision", {}, widened=True))
    if ops & _ROUNDING_FUNCTIONS:
        out.append(PortAblation("port_functions", {"exact": frozenset({"functions"})}))
    if '"op1"' in body and ops & {"add", "subtract", "multiply", "divide", "power"}:
        out.append(PortAblation("port_alu", {"exact": frozenset({"alu"})}))
    if '"nc_matmul"' in body:
        out.append(PortAblation("port_matmul", {"exact": frozenset({"matmul"})}))
    if '"tensor_reduce"' in body and "add" in ops:
        out.append(PortAblation("port_reduce", {"exact": frozenset({"reduce"})}))
    return out


#: bytes per element of the low-precision dtypes a recorded program names
_ITEMSIZE = {"bfloat16": 2, "float16": 2, "float8_e4m3": 1, "float8_e4m3fn": 1, "float8_e5m2": 1}
_ON_CHIP = ("sbuf", "psum")


@functools.lru_cache(maxsize=4)
def widened_program(program_text: str) -> str | None:
    """The recorded program with its on-chip bf16/fp16/fp8 allocations made fp32: the allocation event's dtype,
    and every view of such an allocation with dtype fp32 and its byte offset and strides scaled to 4-byte elements
    (``nkieval.sim.program.codec.widen_allocations``). None when there is none (or the
    text is not a program)."""
    from nkieval.sim.program.codec import widen_allocations

    try:
        doc = json.loads(program_text)
        if not widen_allocations(doc, _ITEMSIZE, _ON_CHIP):
            return None
    except (ValueError, KeyError, IndexError, TypeError):
        return None
    return json.dumps(doc, separators=(",", ":"))


def replay_cost_s(program_text: str, n_instructions: int | None, elements: int) -> float:
    """A replay's modelled CPU seconds: ``n_instructions`` (the port's own run of the case: the judge's count,
    device loops included), or, unknown, the program's instruction events (each loop body once), and the elements
    of the case's inputs and outputs. A function of the program and the case only, so the budget it is spent
    against decides the same on every machine."""
    n = n_instructions if n_instructions is not None else len(_INSTRUCTION_EVENT.findall(program_text))
    return n * REPLAY_S_PER_INSTRUCTION + elements * REPLAY_S_PER_ELEMENT


def port_runs(program_text: str, inputs: Mapping[str, np.ndarray], params: Mapping[str, Any], target: str,
              like: list[np.ndarray], variants: list[PortAblation], limits: Any,
              budget_s: float = PORT_ABLATION_BUDGET_S, n_instructions: int | None = None
              ) -> dict[str, list[np.ndarray]]:
    """Each ablation's outputs: the program replayed on ``inputs`` with its options, the first always and the
    others while the modelled seconds spent (:func:`replay_cost_s` per replay, ``n_instructions`` the port's own
    run's count on these inputs) are below ``budget_s``; none past :data:`MAX_REPLAY_S` for one replay. A replay
    that fails or runs past its instruction or memory budget is left out; one past its wall-clock limit raises
    :class:`PortReplaySafetyNet`. ``like``: the port's own outputs on these inputs, whose dtypes the ablated
    outputs are rounded to (an fp32-stored bf16 output would otherwise differ by its own rounding)."""
    from dataclasses import replace

    from nkieval.review.executor import PROGRAMS, replay_options
    from nkieval.sim.errors import NkiValidationError
    from nkieval.sim.program import replay_program

    cost = replay_cost_s(program_text, n_instructions,
                         sum(int(np.size(x)) for x in inputs.values()) + sum(int(np.size(x)) for x in like))
    if not variants or cost > MAX_REPLAY_S:
        return {}
    progs: dict[bool, Any] = {}
    for wide in sorted({a.widened for a in variants}):
        text = widened_program(program_text) if wide else program_text
        try:
            # (the review's own program is in the judge's cache already; the widened one is used once here, and
            # kept out of that cache, where it would push out a program of the review's)
            progs[wide] = None if text is None else PROGRAMS.get(text) if not wide else _compiled(text)
        except Exception:  # (a program the judge cannot parse: nothing to replay)
            progs[wide] = None
    base = replay_options(limits, traced=False)
    out: dict[str, list[np.ndarray]] = {}
    spent = 0.0
    for a in variants:
        prog = progs.get(a.widened)
        if spent >= budget_s:
            break
        if prog is None:
            continue
        spent += cost
        try:
            res = replay_program(prog, list(inputs.values()), dict(params), target=target,
                                 options=replace(base, **a.overrides))
            got = res.outputs if isinstance(res.outputs, tuple | list) else [res.outputs]
            out[a.name] = [np.asarray(g).astype(np.asarray(w).dtype) for g, w in zip(got, like)]
        except NkiValidationError as e:
            if e.rule == "time-budget":
                raise PortReplaySafetyNet(f"the port ablation {a.name}'s replay ran past its case's time limit "
                                          f"({limits.timeout_s:g} s): a slow or stalled machine, a harness "
                                          "fault (retry)") from e
        except Exception:  # (whatever else stops a replay, a count or a fault the same on any machine: that
            pass           # ablation only)
    return out


def _compiled(text: str) -> Any:
    from nkieval.sim.program import Program, compile_program

    prog = Program.from_json(text.encode())
    compile_program(prog)
    return prog
