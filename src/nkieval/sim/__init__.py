"""The NKI CPU simulator: tensors & views, dtypes & casts, validation, ISA semantics, trace."""

from nkieval.sim.errors import RULES, NkiSimulatorWarning, NkiValidationError
from nkieval.sim.options import SimOptions
from nkieval.sim.runner import RunResult, run_kernel
from nkieval.sim.trace import Trace, TraceRecord

__all__ = ["RULES", "NkiSimulatorWarning", "NkiValidationError", "RunResult", "SimOptions", "Trace", "TraceRecord",
           "run_kernel"]
