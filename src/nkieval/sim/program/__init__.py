"""Trace, then execute: a kernel recorded as a program over symbolic tensors, and that program replayed.

On Trainium a kernel's Python runs at compile time and emits an instruction stream; the data lives on the
device. The review does the same. :func:`record_program` runs a kernel on inputs that carry only shapes and
dtypes (their values are zeros and mean nothing) and records what it *asks the machine to do*: allocations,
frees, instructions with their operands as views of allocations, device-side constructs (registers, scalars,
runtime-indexed views, device loops) and the tensors it returns. :func:`replay_program` executes such a
program with real inputs on the same simulator (the same instruction functions the eager front ends call), so
only the replay produces outputs and the trace.

A program is data: a versioned JSON document (:mod:`.codec`), validated before it runs (:mod:`.validate`):
every name it uses comes from the simulator's own registries, every view is checked against the bounds of its
allocation, and its sizes are bounded.
"""

from nkieval.sim.program.codec import PROGRAM_FORMAT, PROGRAM_VERSION, Program, ProgramError
from nkieval.sim.program.record import ArgSpec, record_program
from nkieval.sim.program.replay import compile_program, is_static, replay_program

__all__ = ["PROGRAM_FORMAT", "PROGRAM_VERSION", "ArgSpec", "Program", "ProgramError", "compile_program",
           "is_static", "record_program", "replay_program"]
