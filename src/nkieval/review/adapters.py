"""The review's only contact with nkieval.numerics, nkieval.perf and nkieval.analysis.

Each adapter returns ``(result, None)``, or ``(None, reason)`` when the *input* gives nothing to
judge (a task without an oracle, an estimate without a positive time). A judge component that is
missing or raises fails closed: :class:`~nkieval.review.verdict.JudgeError` naming the component,
which makes the review a harness error (exit 3, retry) — never a pass, never a "not assessed"
criterion that leaves the rest to decide, never the candidate's fault.
Keeping every cross-package call in this one file is what lets those packages change their
signatures without the pipeline noticing anywhere else.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from nkieval.review.verdict import JudgeError
from nkieval.tasks.schema import Task, TaskError


def _import(*candidates: str) -> tuple[Any | None, str | None]:
    """First importable ``module:attr`` of ``candidates``."""
    errors = []
    for spec in candidates:
        mod, attr = spec.split(":")
        try:
            return getattr(importlib.import_module(mod), attr), None
        except (ImportError, AttributeError) as e:
            errors.append(f"{spec} ({type(e).__name__})")
    return None, "not available in this build: " + ", ".join(errors)


def _is_request_error(e: Exception) -> bool:
    """An error ``nkieval.numerics`` documents as a malformed request (unknown op, bad recipe, unknown dtype)."""
    names = ("nkieval.numerics.oracle:UnknownOpError", "nkieval.numerics.recipe:RecipeError",
             "nkieval.numerics.formats:UnknownDtypeError")
    kinds = tuple(k for k in (_import(n)[0] for n in names) if isinstance(k, type))
    return isinstance(e, kinds)


def numerics_available() -> tuple[bool, str | None]:
    fn, why = _import("nkieval.numerics:check")
    if fn is None:
        raise JudgeError("numerics", str(why))
    return True, None


def numerics_operands(task: Task, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """The op's operands from the kernel inputs: ``numerics.op_params.operands`` may transpose (``"a_t.T"``)."""
    names = task.numerics.op_params.get("operands")
    if not names:
        return [inputs[t.name] for t in task.inputs]
    out = []
    for n in names:
        if n.endswith(".T"):
            out.append(np.asarray(inputs[n[:-2]]).T)
        else:
            out.append(inputs[n])
    return out


def numerics_prepare(task: Task, inputs: Mapping[str, np.ndarray], family: str, random_family: bool,
                     oracle: Callable[..., Any] | None, dims: Mapping[str, int], *, keep_blocks: bool = False,
                     variants: Sequence[Any] = (), recipe: Mapping[str, Any] | None = None
                     ) -> tuple[Any | None, str | None]:
    """``nkieval.numerics.PreparedCheck`` for one case's inputs (candidate-independent), or why not.

    ``keep_blocks=True`` keeps the oracle and bounds in memory for judging many outputs, the
    generic path's refined magnitudes included (built here, once, rather than by the first
    failing output's check: they depend on the inputs only).
    ``variants`` (reference.py's known wrong formulas, ``tasks.load_reference_variants``) are
    tried by the diagnosis of a failing output (of a registered op too). ``recipe`` replaces the task's (a
    later output judged in its own dtype).
    """
    prepared, why = _import("nkieval.numerics:PreparedCheck")
    if prepared is None:
        raise JudgeError("numerics", str(why))
    params = {k: v for k, v in task.numerics.op_params.items() if k != "operands"}
    params.update({k: v for k, v in task.params.items() if k not in params})
    fam = family if family == "integers" else ("random" if random_family else None)
    recipe = task.numerics.recipe if recipe is None else recipe
    try:
        if task.numerics.op == "reference":
            if oracle is None:
                raise TaskError("the task's numerics op is 'reference' but reference.py defines no oracle()")
            k = task.numerics.k
            kk = int(dims[k]) if isinstance(k, str) else k
            args = [inputs[t.name] for t in task.inputs]
            variant_cls, _ = _import("nkieval.numerics:Variant")
            vs = [variant_cls(v.id, v.cause, v.action, lambda *a, _f=v.fn: _f(*a, **task.params))
                  for v in variants] if variant_cls is not None else []
            pc = prepared(args, lambda *a: oracle(*a, **task.params), recipe, input_family=fam,
                          keep_blocks=keep_blocks, k=kk,
                          multilinear=bool(task.numerics.op_params.get("multilinear", False)), variants=vs)
        else:
            pc = prepared(numerics_operands(task, inputs), _op_with_variants(task, inputs, variants), recipe,
                          input_family=fam, keep_blocks=keep_blocks, **params)
        if keep_blocks:
            pc.materialise(refined=True)
    except TaskError:
        raise  # a malformed task: exit 2
    except Exception as e:  # a numerics bug is the judge's failure: fail closed
        if _is_request_error(e):  # the task's numerics spec (op, recipe, dtypes) is malformed: exit 2
            raise TaskError(f"the task's [numerics] is not a valid request: {type(e).__name__}: {e}",
                            where="task.toml:numerics", rule="numerics") from e
        raise JudgeError("numerics", f"nkieval.numerics raised {type(e).__name__}: {e}") from e
    return pc, None


def _op_with_variants(task: Task, inputs: Mapping[str, np.ndarray], variants: Sequence[Any]) -> Any:
    """A registered op's name, or, when reference.py declares known wrong formulas, its spec with them: each is
    called on the task's own inputs in float64 (the op's operands may be fewer or in another order), so the
    diagnosis can name the formula a failing output follows, as for a ``reference`` op."""
    if not variants:
        return task.numerics.op
    from dataclasses import replace

    get_op, _ = _import("nkieval.numerics:get_op")
    variant_cls, _ = _import("nkieval.numerics:Variant")
    if get_op is None or variant_cls is None:
        return task.numerics.op
    args = [inputs[t.name] for t in task.inputs]

    def on_task_inputs(fn: Callable[..., Any]) -> Callable[..., Any]:
        return lambda *_operands, **_op_params: fn(*(np.asarray(a, dtype=np.float64) for a in args), **task.params)

    return replace(get_op(task.numerics.op),
                   variants=tuple(variant_cls(v.id, v.cause, v.action, on_task_inputs(v.fn)) for v in variants))


def numerics_judge(prepared: Any, actual: np.ndarray, *, diagnose: bool = True
                   ) -> tuple[dict[str, Any] | None, str | None]:
    """Judge one output with a :func:`numerics_prepare` result; the verdict as a dict, or why not.

    ``diagnose=False`` skips naming likely causes of a failure (the verdict is the same).
    """
    try:
        v = prepared.check(actual, worst_k=3, diagnose=diagnose)
    except Exception as e:  # a numerics bug is the judge's failure: fail closed
        raise JudgeError("numerics", f"nkieval.numerics raised {type(e).__name__}: {e}") from e
    return numerics_dict(v), None


def numerics_check(prepared: Any, actual: np.ndarray, lean: bool = False) -> tuple[Any | None, str | None]:
    """The verdict object for one output without naming likely causes (see :func:`numerics_diagnose`);
    ``lean``: a pass's report-only statistics left out (the brief review; ``PreparedCheck.check``)."""
    try:
        return prepared.check(actual, worst_k=3, diagnose=False, lean=lean), None
    except Exception as e:  # a numerics bug is the judge's failure: fail closed
        raise JudgeError("numerics", f"nkieval.numerics raised {type(e).__name__}: {e}") from e


def numerics_diagnose(prepared: Any, actual: np.ndarray, verdict: Any, hint: str | None = None
                      ) -> tuple[Any | None, str | None]:
    """``verdict`` (from :func:`numerics_check`) with the likely causes of a failure named, or why
    not. ``hint``: a finding id to try first (``PreparedCheck.diagnose``)."""
    try:
        return prepared.diagnose(actual, verdict, hint=hint), None
    except Exception as e:  # a wrong diagnosis could hide a failing case's verdict: fail closed
        raise JudgeError("numerics", f"nkieval.numerics diagnosis raised {type(e).__name__}: {e}") from e


def numerics_dict(verdict: Any) -> dict[str, Any]:
    """A verdict as the report stores it."""
    d = verdict.to_dict()
    d["explanation"] = getattr(verdict, "explanation", "")
    return d


def numerics_verdict(task: Task, actual: np.ndarray, inputs: Mapping[str, np.ndarray], family: str,
                     random_family: bool, oracle: Callable[..., Any] | None,
                     dims: Mapping[str, int]) -> tuple[dict[str, Any] | None, str | None]:
    """Run ``nkieval.numerics.check`` on one output; the verdict as a dict, or why not."""
    pc, why = numerics_prepare(task, inputs, family, random_family, oracle, dims)
    if pc is None:
        return None, why
    return numerics_judge(pc, actual)


def perf_estimate(trace: Any, target: str) -> tuple[dict[str, Any] | None, str | None]:
    """``nkieval.perf.estimate(trace, target).to_dict()``, or why not."""
    est, why = _import("nkieval.perf:estimate")
    if est is None:
        raise JudgeError("perf", str(why))
    try:
        from nkieval.hardware import get_target

        res = est(trace, get_target(target))
        d = res.to_dict() if hasattr(res, "to_dict") else dict(res)
    except Exception as e:
        raise JudgeError("perf", f"nkieval.perf.estimate raised {type(e).__name__}: {e}") from e
    if isinstance(d.get("total_time_ns"), int | float):
        t = float(d["total_time_ns"]) * 1e-9
    else:
        t = d.get("total_time_s", d.get("total_time"))
    if not isinstance(t, int | float) or t <= 0:
        return None, "nkieval.perf.estimate returned no positive total time"
    # Keep the report small: the headline numbers, not the per-instruction tables.
    keep = {k: d[k] for k in ("model_version", "mode", "total_time_ns", "instructions", "summary", "utilization",
                              "bottleneck", "uncertainty", "compiler") if k in d}
    keep["_total_time"] = float(t)
    sched = getattr(res, "schedule", None)
    if isinstance(getattr(sched, "cores", None), int):
        keep["cores"] = sched.cores  # the NeuronCores the estimate spreads the programs over (physics check)
        keep["timeline"] = timeline_bins(sched)
    return keep, None


#: columns of the report's engine/DMA timeline picture
TIMELINE_BINS = 120


def timeline_bins(sched: Any, bins: int = TIMELINE_BINS) -> dict[str, Any]:
    """The estimate's schedule in ``bins`` equal time slices: per compute engine (and all DMA queues together,
    as ``dma``), the fraction of each slice it is busy, rounded to 2 digits; core 0 only. A few hundred
    numbers: the report draws its engine/DMA timeline from them (the Perfetto JSON has every slice)."""
    start = np.asarray(sched.start, dtype=np.float64)
    end = np.asarray(sched.end, dtype=np.float64)
    span = float(end.max()) if end.size else 0.0
    out: dict[str, Any] = {"bins": bins, "span_ns": span, "tracks": {}}
    if span <= 0:
        return out
    width = span / bins
    edges = np.arange(bins + 1) * width
    tracks: dict[str, list[int]] = {}
    for i, t in enumerate(sched.track):
        if "/" in t and not t.startswith("nc0/"):
            continue
        name = t.rpartition("/")[2]
        tracks.setdefault("dma" if name.startswith("dma") else name, []).append(i)
    order = ["tensor", "vector", "scalar", "gpsimd", "sync", "dma"]
    for name in sorted(tracks, key=lambda n: (order.index(n) if n in order else 9, n)):
        idx = np.asarray(tracks[name])
        s0, e0 = start[idx], end[idx]
        if name == "dma":  # the union of the queues' busy intervals
            o = np.argsort(s0, kind="stable")
            s0, e0 = s0[o], np.maximum.accumulate(e0[o])
            first = np.flatnonzero(np.r_[True, s0[1:] > e0[:-1]])
            last = np.r_[first[1:] - 1, s0.size - 1]
            s0, e0 = s0[first], e0[last]
        busy = np.zeros(bins)
        k0 = np.minimum(bins - 1, (s0 // width).astype(np.int64))
        k1 = np.minimum(bins - 1, (e0 // width).astype(np.int64))
        one = k0 == k1
        np.add.at(busy, k0[one], (e0 - s0)[one])
        for x, y, i0, i1 in zip(s0[~one], e0[~one], k0[~one], k1[~one]):
            for k in range(int(i0), int(i1) + 1):
                busy[k] += max(0.0, min(y, edges[k + 1]) - max(x, edges[k]))
        out["tracks"][name] = [round(float(x), 2) for x in np.clip(busy / width, 0.0, 1.0)]
    return out


_CUDA_CACHE: dict[str, Any] = {}


def _cuda_summary(parse: Callable[[str], Any], cuda_source: str) -> Any:
    """The CUDA summary of a task's kernel.cu, parsed once per process (it never changes)."""
    summary = _CUDA_CACHE.get(cuda_source)
    if summary is None:
        summary = _CUDA_CACHE[cuda_source] = parse(cuda_source)
    return summary


Findings = tuple[list[dict[str, Any]] | None, str | None]


def static_findings(source: str, target: str, cuda_source: str | None) -> tuple[Findings, Findings]:
    """The NKI rules' findings on the candidate and the migration rules' findings against the task's
    CUDA source (``(None, None)`` without one), each ``(findings, None)`` or ``(None, reason)``.

    One model of the candidate serves both (``nkieval.analysis.analyze_port``): the migration
    rules read the NKI findings, so running them separately would parse the source and run
    every NKI rule twice.
    """
    port, why = _import("nkieval.analysis:analyze_port")
    parse, why2 = _import("nkieval.analysis:parse_cuda")
    if port is None or parse is None:
        raise JudgeError("analysis", str(why or why2))
    summary, mig_why = None, None
    if cuda_source is not None:
        try:
            summary = _cuda_summary(parse, cuda_source)
        except Exception as e:  # the task's CUDA source is trusted: its parse failing is the judge's
            raise JudgeError("analysis", f"nkieval.analysis.parse_cuda raised {type(e).__name__}: {e}") from e
    try:
        nki, mig = port(summary, source, filename="candidate.py", target=target)
    except Exception as e:
        raise JudgeError("analysis", f"nkieval.analysis raised {type(e).__name__}: {e}") from e
    nki_found: Findings = ([f.to_dict() for f in nki], None)
    if cuda_source is None:
        return nki_found, (None, None)
    return nki_found, ((None, mig_why) if mig is None else ([f.to_dict() for f in mig], None))
