"""Criterion "Reference is right": the reference against the numerics standard (its float64 oracle) on
every shape and family, its determinism and output types, and the statement against task.toml."""

from __future__ import annotations

import re

import numpy as np

from nkieval.tasks.audit.context import AuditContext
from nkieval.tasks.audit.model import CriterionAudit, Finding, level_of
from nkieval.tasks.schema import Task

#: Dtype words a statement may use, by the canonical dtype they name.
_DTYPE_WORDS = {
    "float32": ("fp32", "float32"), "bfloat16": ("bf16", "bfloat16"), "float16": ("fp16", "float16"),
    "float8_e4m3": ("fp8", "float8", "e4m3"), "float8_e5m2": ("fp8", "float8", "e5m2"), "int32": ("int32",),
    "int8": ("int8",),
}
_RECIPE_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "fp8_e4m3": "float8_e4m3",
                  "fp8_e5m2": "float8_e5m2", "tf32": "float32", "fp8": "float8_e4m3"}


_NEGATION = re.compile(r"\b(no|not|never|without|instead of|rather than|nor)\b[^.;:]{0,24}$")


def _negated(text: str, pos: int) -> bool:
    """Whether the word at ``pos`` is negated by what precedes it in its clause ("no bf16 or TF32")."""
    return bool(_NEGATION.search(text[max(0, pos - 40):pos]))


def statement_findings(task: Task) -> list[Finding]:
    """Where the statement and task.toml disagree: names, dtypes, params and dimension names it mentions."""
    fs: list[Finding] = []
    text = task.statement
    low = text.lower()
    for spec in (*task.inputs, *task.outputs):
        if not re.search(rf"\b{re.escape(spec.name)}\b", text):
            fs.append(Finding("reference", "warning", "statement-name",
                              f"the statement never names {'input' if spec in task.inputs else 'output'} "
                              f"`{spec.name}` of the signature", "every argument and output named as in task.toml",
                              f"say what `{spec.name}` is (shape, dtype, layout)", {"name": spec.name}))
    for k in task.params:
        if not re.search(rf"\b{re.escape(k)}\b", text):
            fs.append(Finding("reference", "warning", "statement-param",
                              f"the statement never mentions param `{k}` = {task.params[k]!r}",
                              "every scalar parameter stated with its value or range", f"state `{k}`"))
    declared = {s.dtype for s in (*task.inputs, *task.outputs)}
    recipe = task.numerics.recipe
    rdt = [recipe.get("accumulate"), recipe.get("output"), *(recipe.get("inputs") or [])]
    allowed = declared | {_RECIPE_DTYPES.get(str(x), str(x)) for x in rdt if x}
    allowed_words = {w for d in allowed for w in _DTYPE_WORDS.get(d, (d,))}
    for d, words in _DTYPE_WORDS.items():
        hit = [w for w in words if any(not _negated(low, m.start()) for m in re.finditer(rf"\b{w}\b", low))]
        if hit and not any(w in allowed_words for w in hit):
            fs.append(Finding("reference", "error", "statement-dtype",
                              f"the statement says {hit[0]} but no input, output or recipe precision is {d} "
                              f"(task.toml declares {', '.join(sorted(declared))})",
                              "the statement's dtypes are the signature's", "make them agree", {"word": hit[0]}))
    for spec in (*task.inputs, *task.outputs):
        if not any(re.search(rf"\b{w}\b", low) for w in _DTYPE_WORDS.get(spec.dtype, (spec.dtype,))):
            fs.append(Finding("reference", "info", "statement-dtype-missing",
                              f"the statement does not name {spec.name}'s dtype {spec.dtype}",
                              "each tensor's dtype stated", f"say that `{spec.name}` is {spec.dtype}"))
    symbols = {d for s in task.inputs for d in s.symbols()}
    for m in re.finditer(r"\[([A-Za-z_][A-Za-z0-9_]*(?:\s*,\s*[A-Za-z0-9_]+)+)\]", text):
        names = [x.strip() for x in m.group(1).split(",")]
        unknown = [x for x in names if re.fullmatch(r"[A-Z][A-Z0-9_]{0,3}", x) and x not in symbols]
        if unknown and not any(x in symbols for x in names):
            continue  # a bracket that is not a shape of this signature (e.g. an example)
        if unknown:
            fs.append(Finding("reference", "error", "statement-shape",
                              f"the statement's shape [{m.group(1)}] uses {', '.join(unknown)}, which is not a "
                              f"dimension of the signature ({', '.join(sorted(symbols))})",
                              "shapes in the statement use the signature's dimension names",
                              "rename the dimension or fix the signature", {"shape": m.group(1)}))
    return fs


def audit(ctx: AuditContext) -> CriterionAudit:
    from nkieval.review.adapters import numerics_judge, numerics_prepare
    from nkieval.review.stages.judge import oracle_of
    from nkieval.sim.dtypes import to_dtype
    from nkieval.tasks.inputs import is_random
    from nkieval.tasks.loader import load_reference, reference_outputs

    task = ctx.task
    fs: list[Finding] = []
    fn = load_reference(task)
    oracle = oracle_of(task) if task.numerics.op == "reference" else None
    bounds: dict[str, float] = {}
    checked = 0
    shared = ctx.prepared_checks()  # the reviews' own prepared checks: built once for the audit and its reviews
    for c in ctx.all_cases():
        if c.outputs is None:
            fs.append(Finding("reference", "error", "reference-raises",
                              f"reference.py raised on {c.label} ({_dims(c.dims)}): {c.error}",
                              "the reference computes every declared shape and family",
                              "fix the reference (or drop the family from [inputs])", {"case": c.label}))
            continue
        outs = c.outputs
        if len(outs) != len(task.outputs):
            fs.append(Finding("reference", "error", "reference-outputs",
                              f"reference.py returned {len(outs)} output(s) on {c.label}, the signature declares "
                              f"{len(task.outputs)}", "one array per declared output", "fix the reference"))
            continue
        again = reference_outputs(task, fn, c.inputs)
        for spec, o, o2 in zip(task.outputs, outs, again):
            if tuple(o.shape) != spec.concrete(c.dims) or o.dtype != to_dtype(spec.dtype).storage:
                fs.append(Finding("reference", "error", "reference-type",
                                  f"reference output {spec.name} on {c.label} is {o.dtype}{list(o.shape)}, the "
                                  f"signature says {spec.dtype}{list(spec.concrete(c.dims))}",
                                  "outputs in the declared shape and dtype", "fix the reference or the signature"))
            elif not np.array_equal(np.asarray(o, np.float64), np.asarray(o2, np.float64), equal_nan=True):
                fs.append(Finding("reference", "error", "reference-nondeterministic",
                                  f"reference output {spec.name} differs between two calls on {c.label}",
                                  "a deterministic reference", "seed or remove the randomness in reference.py"))
        try:
            pc = shared.get(c.label) or numerics_prepare(task, c.inputs, c.family, is_random(c.family), oracle,
                                                         c.dims)[0]
        except Exception as e:  # a task the numerics standard cannot judge: well_formed names the op problem
            fs.append(Finding("reference", "error", "numerics-unavailable",
                              f"the numerics standard cannot judge {c.label}: {type(e).__name__}: {e}",
                              "a numerics op (or oracle) the standard can evaluate on every case",
                              "fix [numerics] or the oracle", {"case": c.label}))
            break
        if pc is None:
            continue
        verdict, _ = numerics_judge(pc, np.asarray(outs[0]), diagnose=False)
        checked += 1
        m = (verdict or {}).get("metrics") or {}
        allowed = m.get("max_abs_err_allowed")
        if isinstance(allowed, int | float):
            bounds[c.label] = float(allowed)
        if verdict and verdict.get("status") == "fail":
            fs.append(Finding("reference", "error", "reference-vs-oracle",
                              f"the reference's {task.outputs[0].name} fails the numerics standard against the "
                              f"float64 oracle on {c.label} ({_dims(c.dims)}): {verdict.get('explanation', '')[:300]}",
                              "the reference within the standard's bound for its recipe on every case",
                              "compute the reference in float64 and round once, or fix the oracle/recipe",
                              {"case": c.label, "max_abs_err": m.get("max_abs_err"), "allowed": allowed}))
    ctx.notes["numeric_bounds"] = bounds
    fs += statement_findings(task)
    cuda_fs, cuda_meas = cuda_agreement(ctx)
    fs += cuda_fs
    n_err = sum(f.severity == "error" for f in fs)
    summary = (f"reference meets the numerics standard on {checked} case(s)" if not n_err else
               f"{n_err} problem(s): " + "; ".join(sorted({f.rule for f in fs if f.severity == 'error'})))
    return CriterionAudit("reference", "Reference is right", 2.0, level_of(fs), summary, fs,
                          {"cases_checked": checked, "cuda": cuda_meas})


def _dims(d: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in d.items())


#: executor seconds the CUDA agreement check may spend (smallest cases first; every family of a shape)
CUDA_BUDGET_S = 10.0
#: cases larger than this (elements of inputs and outputs) are left to the GPU benchmark
CUDA_MAX_ELEMENTS = 400_000


def cuda_agreement(ctx: AuditContext) -> tuple[list[Finding], dict[str, object]]:
    """The reference against the task's ``kernel.cu`` run by the CUDA executor (:mod:`nkieval.cuda`) on the
    review's own cases, smallest first within :data:`CUDA_BUDGET_S`: every output within the task's
    tolerance (``|cuda - ref| <= atol + rtol * |ref|``), as the review's differential check compares a port."""
    import time

    task = ctx.task
    if task.cuda_file is None:
        return [], {"status": "no kernel.cu"}
    from nkieval.cuda import CudaError, ExecutorTimeout, Unsupported, run_task_cuda

    cases = [c for c in ctx.all_cases() if c.outputs is not None]
    size = {c.label: sum(int(np.prod(s.concrete(c.dims))) for s in (*task.inputs, *task.outputs)) for c in cases}
    order = sorted((c for c in cases if size[c.label] <= CUDA_MAX_ELEMENTS), key=lambda c: size[c.label])
    fs: list[Finding] = []
    checked: list[str] = []
    t0 = time.process_time()
    for c in order:
        left = CUDA_BUDGET_S - (time.process_time() - t0)
        if left <= 0:
            break
        try:
            gpu, _ = run_task_cuda(task, c.inputs, c.dims, time_limit_s=max(1.0, left))
        except ExecutorTimeout:
            break
        except Unsupported as e:
            fs.append(Finding("reference", "info", "cuda-not-assessed",
                              f"kernel.cu could not be run by the CUDA executor: {e}",
                              "reference and CUDA source agree",
                              "run benchmarks/suite_cuda_gpu.py on a GPU, or keep kernel.cu in the executor's subset"))
            return fs, {"status": "unsupported", "cases": checked}
        except CudaError as e:
            fs.append(Finding("reference", "error", "cuda-fails",
                              f"kernel.cu fails on {c.label} ({_dims(c.dims)}): {e}",
                              "the CUDA source the port is judged against runs on every declared shape",
                              "fix kernel.cu (or the shapes it is given)", {"case": c.label}))
            return fs, {"status": "fails", "cases": checked}
        checked.append(c.label)
        for spec, g, r in zip(task.outputs, gpu, c.outputs or []):
            worst = _tolerance_ratio(np.asarray(g, np.float64), np.asarray(r, np.float64), task.rtol, task.atol)
            if worst is not None and worst[0] > 1.0:
                ratio, idx, gv, rv = worst
                fs.append(Finding("reference", "error", "reference-vs-cuda",
                                  f"reference.py and kernel.cu disagree on {spec.name} for {c.label} "
                                  f"({_dims(c.dims)}): at {list(idx)} CUDA gives {gv:.4g}, the reference {rv:.4g} "
                                  f"({ratio:.3g}x the task's tolerance)",
                                  "the reference computes what the CUDA source computes, within the tolerance",
                                  "fix whichever of reference.py and kernel.cu is wrong (a port is judged against "
                                  "both)", {"case": c.label, "output": spec.name, "tolerance_ratio": ratio}))
                return fs, {"status": "disagree", "cases": checked}
    if not checked:
        fs.append(Finding("reference", "info", "cuda-not-assessed",
                          "the reference was not compared with kernel.cu: no case fits the executor's budget",
                          "reference and CUDA source agree", "run benchmarks/suite_cuda_gpu.py on a GPU"))
        return fs, {"status": "not assessed", "cases": checked}
    fs.append(Finding("reference", "info", "cuda-agreement",
                      f"reference.py and kernel.cu (CUDA executor) agree within the task's tolerance on "
                      f"{len(checked)} case(s): {', '.join(checked[:6])}" + (" ..." if len(checked) > 6 else ""),
                      "reference and CUDA source agree", "nothing"))
    return fs, {"status": "agree", "cases": checked}


def _tolerance_ratio(g: np.ndarray, r: np.ndarray, rtol: float, atol: float
                     ) -> tuple[float, tuple[int, ...], float, float] | None:
    """The largest difference in units of the task's tolerance (as the review's differential check measures
    a port against the CUDA kernel), where it is and both values; infinite for a shape mismatch; None for
    empty outputs."""
    from nkieval.review.stages.differential import tolerance_ratios

    if g.size != r.size:
        return (float("inf"), (), float("nan"), float("nan"))
    if not g.size:
        return None
    g = g.reshape(r.shape)
    _, ratio = tolerance_ratios(r, g, rtol, atol)
    j = int(np.argmax(ratio))
    idx = tuple(int(x) for x in np.unravel_index(j, r.shape))
    return (float(ratio.reshape(-1)[j]), idx, float(g.reshape(-1)[j]), float(r.reshape(-1)[j]))
