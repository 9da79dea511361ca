"""Physics as an integrity check: a run that beats what the hardware can do is not a fast kernel.

Two checks on the traced (largest) case, each a violation sentence giving both figures, made only when
that case returned every output element written (:func:`fully_written`: a kernel that skips part of
the work is fast because it is wrong, an ordinary ``fail``):

* **Roofline.** The performance estimate must not beat the task's roofline lower bound on the
  target: the bytes every correct kernel must move across HBM (each input read once, each output
  written once) at the target's HBM bandwidth per NeuronCore, and the task's FLOPs (``[perf] flops``)
  at the PE array's fastest rate for any dtype (the smallest ``*_adjusted_flops_factor`` of the
  target: a kernel that quantises its operands still meets the bound); the larger of the two,
  divided over the NeuronCores the estimate schedules. The trace's own roofline
  (``nkieval.perf``'s ``roofline_lower_bound_ns``: the bytes and FLOPs the kernel's instructions
  actually move and execute) is a bound too. Tasks whose access is data-dependent (tags
  :data:`DATA_DEPENDENT_TAGS`: a gather reads only the rows it is asked for, a mixture of experts
  only the routed experts' weights and FLOPs) count their outputs' bytes and the trace's own
  roofline only.
* **Output bytes.** Every byte of every output must be written by an instruction: a traced case
  whose outputs read back fully written (no ``unwritten`` mismatch) while the trace moves fewer bytes
  into an output allocation than the output's size had its outputs filled by something else.

Tolerance: a violation needs ``estimate < TOLERANCE x bound``. The estimate is a model (integer
cycles, per-transfer fixed costs rounded, floating point); its own roofline is computed from the
same bandwidths, so an honest trace never lands below it, but the 5 % margin keeps model noise
from ever turning a fast honest kernel into an integrity failure. A hack's gain is not 5 %: a
kernel whose outputs are produced outside the trace does next to none of the work. Over the
built-in tasks every expert and baseline estimate is at least 1.2x its task bound on every target.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nkieval.tasks.schema import Task

#: estimate < TOLERANCE x bound is a violation (see the module docstring)
TOLERANCE = 0.95
#: Task tags whose kernels may legitimately read only part of an input, or run only part of the dense FLOPs.
DATA_DEPENDENT_TAGS = frozenset({"gather", "indirect-dma", "paged-kv-cache", "moe", "sparse"})


def task_bound_ns(task: Task, dims: Mapping[str, int], target: str, cores: int = 1) -> dict[str, float]:
    """The task's roofline lower bound on ``target`` (ns) and its parts: memory, compute, bytes, FLOPs."""
    from nkieval.hardware import get_target
    from nkieval.perf.costs import pe_peak_flops_per_ns
    from nkieval.perf.params import load_params

    p = load_params(get_target(target))
    rd, wr = task.compulsory_bytes(dims)
    data_dependent = bool(DATA_DEPENDENT_TAGS & set(task.tags))
    nbytes = wr if data_dependent else rd + wr
    cores = max(1, int(cores))
    mem = nbytes / (float(p.hbm_core_bw_bytes_per_ns) * cores)
    flops = 0.0 if data_dependent else float(task.model_flops(dims) or 0.0)
    factors = [1.0]
    for k in ("fp8_adjusted_flops_factor", "mx_adjusted_flops_factor", "fp32_adjusted_flops_factor"):
        try:
            factors.append(float(getattr(p, k)))
        except (AttributeError, KeyError, TypeError, ValueError):
            pass
    fastest = max(1e-9, min(factors))
    comp = flops * fastest / (pe_peak_flops_per_ns(p) * cores) if flops else 0.0
    return {"bound_ns": max(mem, comp), "memory_ns": mem, "compute_ns": comp, "bytes": float(nbytes),
            "flops": flops, "cores": float(cores)}


def roofline_violation(task: Task, dims: Mapping[str, int], target: str, perf: Mapping[str, Any] | None
                       ) -> str | None:
    """A sentence when the candidate's estimate beats the roofline bound (both figures), else None."""
    if not perf:
        return None
    t = perf.get("total_time_ns")
    if not isinstance(t, int | float):
        tt = perf.get("_total_time")
        t = float(tt) * 1e9 if isinstance(tt, int | float) else None
    if t is None:
        return None
    cores = perf.get("cores")
    b = task_bound_ns(task, dims, target, int(cores) if isinstance(cores, int) else 1)
    own = (perf.get("summary") or {}).get("roofline_lower_bound_ns")
    bound, what = b["bound_ns"], (f"the task's roofline: {b['bytes'] / 1e6:.3f} MB across HBM"
                                  + (f" and {b['flops'] / 1e9:.3f} GFLOP" if b["flops"] else ""))
    if isinstance(own, int | float) and own > bound:
        bound, what = float(own), "the trace's own roofline (the bytes and FLOPs its instructions move)"
    if bound > 0 and t < TOLERANCE * bound:
        shape = ", ".join(f"{k}={v}" for k, v in dims.items())
        return (f"estimated {t / 1e3:.3f} us on {target} ({shape}) is below the physical lower bound "
                f"{bound / 1e3:.3f} us ({what}; a violation is below {TOLERANCE:.0%} of it)")
    return None


def output_writes(trace: Any, task: Task, dims: Mapping[str, int]) -> list[dict[str, Any]]:
    """Per output: its size and the most bytes the trace writes into one kernel-allocated HBM tensor of
    its shape and dtype (None when no such allocation exists, e.g. a reshaped view: not checked)."""
    from nkieval.sim.dtypes import to_dtype

    written: dict[int, int] = {}
    for r in trace.records:
        for o in r.operands:
            if o.buffer == "hbm" and "w" in o.mode:
                written[o.alloc] = written.get(o.alloc, 0) + int(o.nbytes)
    out = []
    for spec in task.outputs:
        shape = tuple(spec.concrete(dims))
        size = to_dtype(spec.dtype).itemsize
        for d in shape:
            size *= d
        allocs = [a for a in trace.allocations.values()
                  if a.buffer == "hbm" and not a.kernel_arg and tuple(a.shape) == shape and a.dtype == spec.dtype]
        best = max((written.get(a.id, 0) for a in allocs), default=None)
        out.append({"output": spec.name, "bytes": size, "written_bytes": best})
    return out


def fully_written(case: Any) -> bool:
    """Whether the traced case returned every output element written, in its declared shape and dtype.

    Both physics checks apply only then: a kernel that leaves elements unwritten did less than the
    task's work, so its fast estimate is an ordinary bug (``fail``, with its own message), not physics.
    """
    if case is None or case.status != "ok":
        return False
    return (case.mismatch or {}).get("kind") not in ("unwritten", "shape", "dtype")


def output_bytes_violations(writes: list[dict[str, Any]] | None, case: Any) -> list[str]:
    """Outputs the traced case reports fully written while the trace writes fewer bytes into them."""
    if not writes or not fully_written(case):
        return []
    return [f"{case.case}: output {w['output']} is {w['bytes']} bytes but the kernel's instructions write only "
            f"{w['written_bytes']} bytes into it: its values did not come from the trace"
            for w in writes if isinstance(w.get("written_bytes"), int) and w["written_bytes"] < w["bytes"]]
