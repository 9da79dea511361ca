"""Simulate the calibration kernels, estimate them, and compare with the published figures.

Used by benchmarks/perf_validate.py (published shapes), benchmarks/perf_fit.py (parameter
fitting on ratios within one source) and the tests (reduced shapes). Needs the ``nki`` shim.
"""

from __future__ import annotations

import math
import os
import pickle
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from nkieval.perf.calibration import published
from nkieval.perf.compiler import CompilerOptions
from nkieval.perf.estimate import PerfEstimate, estimate
from nkieval.perf.schedule import SchedulePolicy
from nkieval.sim.trace import Trace


@dataclass(frozen=True)
class StepResult:
    label: str
    kernel: str
    published: float
    predicted_ns: float
    bound_published: str
    bound_predicted: str
    resource_predicted: str
    hfu_published: float | None
    hfu_predicted: float
    spill_bytes: int = 0  # estimated SBUF spill traffic (saves + reloads), not in predicted_ns


@dataclass(frozen=True)
class LadderResult:
    name: str
    source: str
    steps: tuple[StepResult, ...]

    def step_ratios(self) -> list[tuple[str, float, float, float]]:
        """(step pair, published speedup, predicted speedup, |log error|) of consecutive steps."""
        out = []
        for a, b in zip(self.steps, self.steps[1:]):
            pub = a.published / b.published
            pred = a.predicted_ns / b.predicted_ns
            out.append((f"{a.label} -> {b.label}", pub, pred, abs(math.log(pred / pub))))
        return out

    def rank_ok(self) -> bool:
        order_pub = sorted(range(len(self.steps)), key=lambda k: -self.steps[k].published)
        order_pred = sorted(range(len(self.steps)), key=lambda k: -self.steps[k].predicted_ns)
        return order_pub == order_pred

    def bounds_ok(self) -> bool:
        return all(s.bound_published == s.bound_predicted for s in self.steps)


def _rng_inputs(shape: dict[str, Any], scale: int) -> tuple[np.ndarray, ...]:
    import ml_dtypes

    dt = ml_dtypes.bfloat16 if shape.get("dtype", "bfloat16") == "bfloat16" else np.dtype(shape["dtype"])
    rng = np.random.default_rng(0)
    if "rows" in shape:  # LayerNorm: x [rows, cols]; gamma, beta pre-broadcast to [128, cols]
        r, c = max(1, shape["rows"] // scale), max(1, shape["cols"] // scale)
        x = rng.standard_normal((r, c), dtype=np.float32).astype(dt)
        g = np.tile(rng.standard_normal((1, c), dtype=np.float32), (128, 1)).astype(dt)
        b = np.tile(rng.standard_normal((1, c), dtype=np.float32), (128, 1)).astype(dt)
        return x, g, b
    m, k, n = shape["M"] // scale, shape["K"] // scale, shape["N"] // scale
    lhsT = rng.standard_normal((k, m), dtype=np.float32).astype(dt)
    rhs = rng.standard_normal((k, n), dtype=np.float32).astype(dt)
    return lhsT, rhs


def simulate(kernel_name: str, args: tuple, target: str, **kwargs: Any) -> Trace:
    """Run a calibration kernel on the simulator and return its trace."""
    import nki

    from nkieval.perf.calibration import kernels
    from nkieval.sim.options import SimOptions

    kern = getattr(kernels, kernel_name)
    # some published tutorial kernels over-subscribe SBUF at their published shapes (the real compiler spills):
    # capacity is a warning here, kept in the trace and not printed, and the estimate's spill figures say how much
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"kernel: tiles live at once need")
        nki.simulate(kern, target=target, options=SimOptions(capacity_check="warn"))(*args, **kwargs)
    return nki.last_result().trace


def kernels_version(names: list[str]) -> str:
    """Short hash of the named calibration kernels' source: cached traces are keyed on it, so an
    edited kernel is re-simulated (and editing an unrelated kernel keeps the cache)."""
    import hashlib
    import inspect

    from nkieval.perf.calibration import kernels

    src = "".join(inspect.getsource(getattr(getattr(kernels, n), "fn", getattr(kernels, n))) for n in sorted(names))
    return hashlib.sha1(src.encode()).hexdigest()[:10]


def ladder_traces(name: str, scale: int = 1, cache_dir: str | None = None) -> list[Trace]:
    """Traces of every step of ladder ``name`` at its published shape divided by ``scale``."""
    lad = published()["ladders"][name]
    kv = kernels_version([st["kernel"] for st in lad["steps"]])
    # the shape is part of the key too: a ladder whose published shape is corrected is simulated again
    shape_key = "-".join(f"{k}{v}" for k, v in sorted(lad["shape"].items()))
    traces = []
    args = None
    for step in lad["steps"]:
        path = (os.path.join(cache_dir, f"{name}-{step['kernel']}-{shape_key}-s{scale}-{kv}.pkl") if cache_dir
                else None)
        if path and os.path.exists(path):
            with open(path, "rb") as fh:
                traces.append(Trace.from_dict(pickle.load(fh)))
            continue
        if args is None:
            args = _rng_inputs(lad["shape"], scale)
        tr = simulate(step["kernel"], args, lad["target"])
        if path:
            os.makedirs(cache_dir, exist_ok=True)
            with open(path, "wb") as fh:
                pickle.dump(tr.to_dict(), fh)
        traces.append(tr)
    return traces


def evaluate_ladder(name: str, traces: list[Trace], params: dict[str, Any] | None = None,
                    policy: SchedulePolicy | None = None, compiler: CompilerOptions | None = None) -> LadderResult:
    """Estimate each step's trace and pair it with the published figure."""
    lad = published()["ladders"][name]
    steps = []
    for step, tr in zip(lad["steps"], traces):
        est = estimate(tr, lad["target"], params=params, policy=policy, compiler=compiler)
        steps.append(StepResult(
            label=step["label"], kernel=step["kernel"], published=float(step["value"]),
            predicted_ns=est.total_time_ns, bound_published=step.get("bound", ""), bound_predicted=est.bottleneck.bound,
            resource_predicted=est.bottleneck.resource, hfu_published=step.get("hfu"),
            hfu_predicted=est.summary["hfu_estimated_percent"], spill_bytes=_spill_bytes(est)))
    return LadderResult(name, lad["source"], tuple(steps))


@dataclass(frozen=True)
class HeldOutStep:
    label: str
    bound_published: str | None
    bound_predicted: str
    resource_predicted: str
    active_published: dict[str, float]  # engine -> published active % (classification ladders)
    active_predicted: dict[str, float]
    published: float | None
    predicted_ns: float
    spill_bytes: int = 0  # estimated SBUF spill traffic (saves + reloads), not in predicted_ns


def evaluate_held_out(name: str, traces: list[Trace], policy: SchedulePolicy | None = None) -> list[HeldOutStep]:
    """Estimate each step of a held-out ladder (no parameter is fitted on these; report only)."""
    lad = published()["ladders"][name]
    out = []
    for step, tr in zip(lad["steps"], traces):
        est = estimate(tr, lad["target"], policy=policy)
        util = est.utilization
        pub_act = {k: float(step[k]) for k in ("tensor", "dma", "vector") if k in step}
        out.append(HeldOutStep(
            label=step["label"], bound_published=step.get("bound"), bound_predicted=est.bottleneck.bound,
            resource_predicted=est.bottleneck.resource, active_published=pub_act,
            active_predicted={k: 100.0 * float(util.get(k, 0.0)) for k in ("tensor", "dma", "vector")},
            published=float(step["value"]) if "value" in step else None, predicted_ns=est.total_time_ns,
            spill_bytes=_spill_bytes(est)))
    return out


def _spill_bytes(est: Any) -> int:
    return int(est.summary["spill_save_bytes"] + est.summary["spill_reload_bytes"])


def geomean_abs_log_error(results: list[LadderResult]) -> tuple[float, float]:
    """(geometric-mean |log ratio error| (as exp(mean |log|) - 1 is not used: the mean of |log|), worst)."""
    errs = [e for r in results for *_, e in r.step_ratios()]
    return (sum(errs) / len(errs) if errs else 0.0), (max(errs) if errs else 0.0)


# -- micro-results ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MicroResult:
    name: str
    claim: str
    published: float
    predicted: float
    tolerance: float

    @property
    def ok(self) -> bool:
        return abs(math.log(self.predicted / self.published)) <= self.tolerance


def _span(est: PerfEstimate, engine: str) -> float:
    s = est.schedule
    idx = [i for i in range(len(s)) if s.track[i] == engine]
    return max(s.end[i] for i in idx) - min(s.start[i] for i in idx)


def micro_results(params: dict[str, Any] | None = None,
                  compiler: CompilerOptions | None = None) -> list[MicroResult]:
    """Reproduce the performance guide's micro-results with our kernels."""
    import ml_dtypes

    pub = published()["micro"]
    out: list[MicroResult] = []
    x = np.random.default_rng(0).standard_normal((128, 512), dtype=np.float32)

    def est(kernel: str, args: tuple, target: str, **kw: Any) -> PerfEstimate:
        return estimate(simulate(kernel, args, target, **kw), target, params=params, compiler=compiler)

    m = pub["fused_activation"]
    r = _span(est("act_three_ops", (x,), m["target"]), "scalar") / _span(est("act_fused", (x,), m["target"]), "scalar")
    out.append(MicroResult("fused_activation", m["claim"], m["ratio"], r, m["tolerance"]))
    m = pub["partition_vectorization"]
    r = _span(est("reduce_two_halves", (x,), m["target"]), "vector") / _span(est("reduce_full", (x,), m["target"]),
                                                                          "vector")
    out.append(MicroResult("partition_vectorization", m["claim"], m["ratio"], r, m["tolerance"]))
    m = pub["dependent_scalar_chain"]
    e = est("scalar_chain", (np.ones((1, 1), np.float32),), m["target"])
    st = [e.schedule.start[i] for i in range(len(e.schedule)) if e.schedule.track[i] == "scalar"]
    out.append(MicroResult("dependent_scalar_chain", m["claim"], m["value_ns"], (st[-1] - st[0]) / (len(st) - 1),
                           m["tolerance"]))
    m = pub["matvec_short_moving"]
    mat = np.random.default_rng(1).standard_normal((128, 128), dtype=np.float32).astype(ml_dtypes.bfloat16)
    vec = np.ones((128, 1), dtype=ml_dtypes.bfloat16)
    ii = []
    for short_moving in (False, True):
        e = est("matvec", (mat, vec), m["target"], short_moving=short_moving)
        st = [e.schedule.start[i] for i in range(len(e.schedule)) if e.schedule.track[i] == "tensor"]
        ii.append((st[-1] - st[0]) / (len(st) - 1))
    out.append(MicroResult("matvec_short_moving", m["claim"], m["ratio"], ii[0] / ii[1], m["tolerance"]))
    m = pub["dma_32k_one_engine"]
    row = np.ones((1, 16384), dtype=ml_dtypes.bfloat16)
    e = est("dma_row", (row,), m["target"])
    s = e.schedule
    i = next(iter(s.dma_slot))
    out.append(MicroResult("dma_32k_one_engine", m["claim"], m["value_ns"], s.end[i] - s.dma_slot[i], m["tolerance"]))
    return out
