"""``nki.benchmark``-style latency results, backed by the performance model (marked as an estimate).

Beta-1's ``@nki.benchmark`` exposes ``kernel.benchmark_result.nc_latency.get_latency_percentile(p)``
(µs, p ∈ {0, 1, 10, 25, 50, 90, 99, 100}). Without hardware the front end calls
:func:`latency_percentiles` on the simulated trace. The model is deterministic, so every
percentile is the same point estimate; the uncertainty band is given separately instead of
pretending to be run-to-run spread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nkieval.perf.estimate import PerfEstimate, estimate
from nkieval.sim.trace import Trace

PERCENTILES = (0, 1, 10, 25, 50, 90, 99, 100)


class LatencyPercentileError(ValueError):
    """A percentile outside the ones ``nki.benchmark`` reports."""


@dataclass(frozen=True)
class LatencyEstimate:
    """Estimated NeuronCore latency (µs) with the ``nc_latency`` interface of ``nki.benchmark``."""

    latency_us: float
    low_us: float
    high_us: float
    target: str
    model_version: str
    is_estimate: bool = True

    def get_latency_percentile(self, percentile: int) -> float:
        """The estimated latency in µs (identical for every percentile: the model is deterministic)."""
        if percentile not in PERCENTILES:
            raise LatencyPercentileError(f"percentile {percentile} is not one of {PERCENTILES} (nki.benchmark reports "
                                         "only these)")
        return self.latency_us

    def percentiles(self) -> dict[int, float]:
        return {p: self.latency_us for p in PERCENTILES}

    def to_dict(self) -> dict[str, Any]:
        return {"estimate": True, "latency_us": self.latency_us, "interval_us": [self.low_us, self.high_us],
                "percentiles_us": {str(k): v for k, v in self.percentiles().items()}, "target": self.target,
                "model_version": self.model_version}


def latency_percentiles(trace_or_estimate: Trace | PerfEstimate, target: str | None = None) -> LatencyEstimate:
    """Latency percentiles (µs) of a kernel from its trace (or an existing estimate)."""
    est = trace_or_estimate if isinstance(trace_or_estimate, PerfEstimate) else estimate(trace_or_estimate, target)
    lo, hi = est.interval_ns
    return LatencyEstimate(est.total_time_ns / 1e3, lo / 1e3, hi / 1e3, est.target, est.model_version)
