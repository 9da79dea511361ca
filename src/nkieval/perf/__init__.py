"""Performance model: estimate how a simulated NKI kernel would run on a NeuronCore.

``estimate(trace, target)`` schedules the simulator's instruction trace on a model of the
target's engines, DMA queues and memories and returns a :class:`PerfEstimate` with the Neuron
profiler's metrics, a stall breakdown, the critical path, a roofline bound and a bottleneck
class. Every number is an estimate: it carries the model version and the parameters it rests
on (documented, derived, fitted or assumed; see docs/perf.md).
"""

from nkieval.perf.costs import COST_RULES, Cost, cost_rule
from nkieval.perf.estimate import MODEL_VERSION, PerfEstimate, Uncertainty, estimate
from nkieval.perf.latency import LatencyEstimate, latency_percentiles
from nkieval.perf.params import PerfParamError, PerfParams, load_params
from nkieval.perf.schedule import Schedule, ScheduleError, SchedulePolicy
from nkieval.perf.timeline import text_summary, to_perfetto, write_perfetto

__all__ = [
    "COST_RULES",
    "MODEL_VERSION",
    "Cost",
    "LatencyEstimate",
    "PerfEstimate",
    "PerfParamError",
    "PerfParams",
    "Schedule",
    "ScheduleError",
    "SchedulePolicy",
    "Uncertainty",
    "cost_rule",
    "estimate",
    "latency_percentiles",
    "load_params",
    "text_summary",
    "to_perfetto",
    "write_perfetto",
]
