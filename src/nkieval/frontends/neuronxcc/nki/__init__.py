"""``neuronxcc.nki`` (Beta 1): kernel decorators and launchers on nkieval's simulator."""

from nkieval.frontends.beta1.launch import (
    Beta1ModeError,
    Kernel,
    baremetal,
    benchmark,
    jit,
    last_result,
    profile,
    simulate_kernel,
    trace,
)
from nkieval.frontends.neuronxcc.nki import compiler, isa, language, typing
from nkieval.sim.errors import NkiValidationError

tensor = typing.tensor

__all__ = ["Beta1ModeError", "Kernel", "NkiValidationError", "baremetal", "benchmark", "compiler", "isa", "jit",
           "language", "last_result", "profile", "simulate_kernel", "tensor", "trace", "typing"]
