"""Load a task directory, its reference, and check the whole task (``nkieval task check``).

The reference is trusted code and runs in the harness process; candidates never do (see
nkieval.review.sandbox). Checks go beyond the schema: the reference's signature must match
the declared inputs and params, its output must have the declared shape and dtype on every
shape, it must be deterministic, and every candidate file named by the task must define the
kernel entry point.
"""

from __future__ import annotations

import ast
import inspect
import runpy
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from nkieval.tasks.schema import Task, TaskError, parse_task, read_toml

BUILTIN_ROOT = Path(__file__).resolve().parent / "builtin"
#: the CUDA port acceptance set: our own CUDA kernels, faithful and flawed NKI ports (docs/suite.md)
PORTS_ROOT = Path(__file__).resolve().parent / "ports"
#: task sets by name (``nkieval suite run --set``)
TASK_SETS = {"builtin": BUILTIN_ROOT, "ports": PORTS_ROOT}


def load_task(path: str | Path) -> Task:
    """Parse and validate ``path/task.toml`` (or a built-in task id) into a :class:`Task`.

    Raises:
        TaskError: naming the file, key and rule that was broken.
    """
    directory = resolve_task_dir(path)
    task = parse_task(read_toml(directory / "task.toml"), directory)
    _check_reference_signature(task)
    for label, p in candidate_files(task).items():
        _check_entry_point(p, task.kernel, label)
    return task


def resolve_task_dir(path: str | Path) -> Path:
    """A directory with a task.toml, or the id of a built-in task."""
    p = Path(path)
    if (p / "task.toml").is_file():
        return p.resolve()
    if not p.exists():
        for root in TASK_SETS.values():
            if (root / str(path) / "task.toml").is_file():
                return (root / str(path)).resolve()
    if p.is_dir():
        raise TaskError(f"no task.toml in {p}", where=str(p), rule="missing-file")
    raise TaskError(f"{path!r} is neither a task directory nor a built-in task id "
                    f"(built-in: {', '.join(builtin_ids()) or 'none'})", where=str(path), rule="missing-file")


def builtin_ids() -> list[str]:
    return set_ids("builtin")


def set_ids(name: str) -> list[str]:
    """The task ids of task set ``name`` (a key of :data:`TASK_SETS`)."""
    root = TASK_SETS[name]
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / "task.toml").is_file())


def port_tasks() -> list[Task]:
    """The CUDA port acceptance set (``tasks/ports``), loaded."""
    return [load_task(PORTS_ROOT / t) for t in set_ids("ports")]


def builtin_tasks() -> list[Task]:
    return [load_task(BUILTIN_ROOT / t) for t in builtin_ids()]


def candidate_files(task: Task) -> dict[str, Path]:
    """Every NKI source the task ships: baseline, solution and flawed candidates, by label."""
    out: dict[str, Path] = {}
    if task.baseline_file:
        out["baseline"] = task.baseline_file
    if task.solution_file:
        out["solution"] = task.solution_file
    for i, fl in enumerate(task.flawed):
        p = (task.directory / fl.file).resolve()
        if not p.is_file():
            raise TaskError(f"flawed candidate {fl.file!r} is missing", where=f"task.toml:flawed[{i}].file",
                            rule="missing-file")
        out[f"flawed:{Path(fl.file).stem}"] = p
    return out


def _run_reference(task: Task) -> dict[str, Any]:
    """reference.py's namespace, executed fresh; a file that does not parse or whose top-level code raises
    is the task's fault: :class:`TaskError` naming the line."""
    where = task.reference_file.name
    try:
        return runpy.run_path(str(task.reference_file), run_name=f"nkieval_task_{task.id}_reference")
    except SyntaxError as e:
        raise TaskError(f"reference.py does not parse: {e.msg} (line {e.lineno})", where=f"{where}:{e.lineno}",
                        rule="reference") from None
    except (Exception, SystemExit) as e:  # the task author's top-level code
        line = next((fs.lineno for fs in reversed(traceback.extract_tb(e.__traceback__))
                     if Path(fs.filename) == task.reference_file), None)
        raise TaskError(f"reference.py raised {type(e).__name__} while loading: {e}",
                        where=f"{where}:{line}" if line else where, rule="reference") from None


def load_reference(task: Task) -> Callable[..., Any]:
    """The ``reference`` function of reference.py (executed fresh, never shared with candidates)."""
    ns = _run_reference(task)
    fn = ns.get("reference")
    if not callable(fn):
        raise TaskError("reference.py must define a function `reference(*inputs, **params)`",
                        where=task.reference_file.name, rule="reference")
    return fn


@dataclass(frozen=True)
class ReferenceVariant:
    """A known wrong formula declared in reference.py's ``VARIANTS`` (what a flawed kernel may compute).

    ``fn`` takes the reference's arguments and returns the op's output (float64); the numerics
    diagnosis names ``cause`` when evaluating it reproduces a failing output. ``outputs`` gives the same
    flaw's formula for outputs after the first (output name -> function, same arguments), so a later output
    the flaw also changes gets the same cause.
    """

    id: str
    cause: str
    action: str
    fn: Callable[..., Any]
    outputs: Mapping[str, Callable[..., Any]] = field(default_factory=dict)


def load_reference_variants(task: Task) -> list[ReferenceVariant]:
    """reference.py's optional ``VARIANTS = {id: {"cause": str, "action": str, "fn": callable}}``, each with an
    optional ``"outputs": {later output name: callable}``."""
    ns = _run_reference(task)
    raw = ns.get("VARIANTS", {})
    where = f"{task.reference_file.name}:VARIANTS"
    if not isinstance(raw, dict):
        raise TaskError(f"VARIANTS must be a dict of id -> {{cause, action, fn}}, not {type(raw).__name__}",
                        where=where, rule="reference-variants")
    out = []
    for vid, d in raw.items():
        if not isinstance(vid, str) or not isinstance(d, dict):
            raise TaskError(f"VARIANTS[{vid!r}] must map a string id to a dict with cause, action and fn",
                            where=where, rule="reference-variants")
        missing = [k for k in ("cause", "action", "fn") if k not in d]
        unknown = sorted(set(d) - {"cause", "action", "fn", "outputs"})
        if missing or unknown:
            raise TaskError(f"VARIANTS[{vid!r}] " + (f"lacks {missing}" if missing else f"has unknown keys {unknown}"),
                            where=where, rule="reference-variants")
        if not isinstance(d["cause"], str) or not isinstance(d["action"], str) or not callable(d["fn"]):
            raise TaskError(f"VARIANTS[{vid!r}]: cause and action must be strings and fn a function", where=where,
                            rule="reference-variants")
        out.append(ReferenceVariant(vid, d["cause"], d["action"], d["fn"], _variant_outputs(task, vid, d, where)))
    return out


def _variant_outputs(task: Task, vid: str, d: dict[str, Any], where: str) -> dict[str, Callable[..., Any]]:
    raw = d.get("outputs", {})
    later = [o.name for o in task.outputs[1:]]
    if not isinstance(raw, dict) or not all(isinstance(k, str) and callable(f) for k, f in raw.items()):
        raise TaskError(f"VARIANTS[{vid!r}]['outputs'] must map later output names to functions", where=where,
                        rule="reference-variants")
    stray = sorted(set(raw) - set(later))
    if stray:
        raise TaskError(f"VARIANTS[{vid!r}]['outputs'] names {stray}, not outputs after the first ({later})",
                        where=where, rule="reference-variants")
    return dict(raw)


def _check_reference_signature(task: Task) -> None:
    fn = load_reference(task)
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as e:
        raise TaskError(f"reference has no Python signature to check against the declared inputs ({e})",
                        where=task.reference_file.name, rule="reference-signature") from None
    params = [p for p in sig.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD,
                                                                 p.KEYWORD_ONLY)]
    names = [p.name for p in params]
    want = [t.name for t in task.inputs]
    if names[: len(want)] != want:
        raise TaskError(f"reference{sig} does not take the declared inputs {want} first (in order)",
                        where=task.reference_file.name, rule="reference-signature")
    rest = set(names[len(want):])
    missing = set(task.params) - rest
    if missing:
        raise TaskError(f"reference{sig} lacks declared param(s) {sorted(missing)}", where=task.reference_file.name,
                        rule="reference-signature")
    extra = [p.name for p in params[len(want):] if p.name not in task.params and p.default is p.empty]
    if extra:
        raise TaskError(f"reference{sig} has required parameter(s) {extra} the task does not declare",
                        where=task.reference_file.name, rule="reference-signature")


def _check_entry_point(path: Path, kernel: str, label: str) -> None:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except SyntaxError as e:
        raise TaskError(f"{label} does not parse: {e.msg} (line {e.lineno})", where=path.name,
                        rule="candidate") from None
    except (ValueError, OSError) as e:  # not UTF-8 text, a NUL byte, unreadable
        raise TaskError(f"{label} is not readable Python source: {e}", where=path.name, rule="candidate") from None
    if not any(isinstance(n, ast.FunctionDef) and n.name == kernel for n in tree.body):
        raise TaskError(f"{label} does not define the kernel entry point `{kernel}` at top level", where=path.name,
                        rule="candidate")


def reference_outputs(task: Task, fn: Callable[..., Any], inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Call the reference; always return a list of arrays in the declared output order."""
    out = fn(*[inputs[t.name] for t in task.inputs], **task.params)
    outs = list(out) if isinstance(out, tuple | list) else [out]
    return [np.asarray(o) for o in outs]


def numerics_op_problem(task: Task) -> str | None:
    """Why the task's numerics op cannot be judged (unknown op, no oracle), or None."""
    if task.numerics.op == "reference":
        ns = _run_reference(task)
        if not callable(ns.get("oracle")):
            return "numerics.op is 'reference' but reference.py defines no oracle()"
        if task.numerics.k is None:
            return "numerics.op is 'reference' but numerics.k (the contraction length) is not set"
        return None
    from nkieval.numerics.oracle import UnknownOpError, get_op

    try:
        get_op(task.numerics.op)
    except UnknownOpError as e:
        return str(e)
    return None


def checked_reference_outputs(task: Task, fn: Callable[..., Any], inputs: dict[str, np.ndarray],
                              dims: dict[str, int]) -> list[np.ndarray]:
    """:func:`reference_outputs` for the review: a reference that raises or returns what the signature does
    not declare (count, shape, dtype) is the task's fault, :class:`TaskError` (exit 2), never the
    candidate's mismatch or the judge's failure."""
    from nkieval.sim.dtypes import to_dtype

    where = task.reference_file.name
    shape = ", ".join(f"{k}={v}" for k, v in dims.items())
    try:
        outs = reference_outputs(task, fn, inputs)
    except TaskError:
        raise
    except Exception as e:  # the task author's code
        raise TaskError(f"reference raised on shape {shape}: {type(e).__name__}: {e}", where=where,
                        rule="reference-output") from None
    if len(outs) != len(task.outputs):
        raise TaskError(f"reference returned {len(outs)} output(s) on shape {shape}; the signature declares "
                        f"{len(task.outputs)}", where=where, rule="reference-output")
    for spec, o in zip(task.outputs, outs):
        want = spec.concrete(dims)
        if tuple(o.shape) != want or o.dtype != to_dtype(spec.dtype).storage:
            raise TaskError(f"reference output {spec.name} on shape {shape} is {o.dtype}{list(o.shape)}; the "
                            f"signature declares {spec.dtype}{list(want)}", where=where, rule="reference-output")
    return outs


@dataclass
class CheckReport:
    """What ``task check`` found: hard errors stop a task; warnings weaken it."""

    task: Task | None
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


def check_task(path: str | Path, *, run_reference: bool = True) -> CheckReport:
    """Validate a task fully: schema, files, reference signature and outputs, shape coverage."""
    from nkieval.sim.dtypes import to_dtype
    from nkieval.tasks.inputs import generate_inputs

    try:
        task = load_task(path)
    except TaskError as e:
        return CheckReport(task=None, errors=[str(e)])
    rep = CheckReport(task=task)
    why = numerics_op_problem(task)
    if why:  # otherwise every review of a correct kernel fails later with a false "no outputs"
        rep.errors.append(f"task.toml:numerics.op: {why} [task rule numerics-op]")
    from nkieval.hardware import get_target

    p = int(get_target(task.default_target).partitions)  # one tile's rows
    dims = {d for s in task.shapes for d in s.dims}
    for d in sorted(dims):
        hidden_vals = [s.dims[d] for s in task.hidden_shapes]
        if hidden_vals and all(v % p == 0 for v in hidden_vals) and max(hidden_vals) >= p:
            rep.warnings.append(f"task.toml:shapes.hidden: every hidden value of {d} is a multiple of {p}; "
                                "add a ragged size to catch tail bugs")
    if all(max(s.dims.values()) <= p for s in task.hidden_shapes):
        rep.warnings.append(f"task.toml:shapes.hidden: no hidden shape overflows one {p}-row tile")
    if task.cuda_file is None:
        rep.warnings.append("no kernel.cu: Migration fidelity cannot be assessed for this task")
    if task.solution_file is None:
        rep.warnings.append("no solution_nki.py: performance cannot be compared with an expert solution")
    if len(task.flawed) < 2:
        rep.warnings.append(f"only {len(task.flawed)} flawed candidate(s); the suite asks for >= 2 per task")
    if not run_reference:
        return rep
    fn = load_reference(task)
    try:
        variants = load_reference_variants(task)
    except TaskError as e:
        rep.errors.append(str(e))
        variants = []
    for case in task.shapes:
        specs = [(t.name, t.concrete(case.dims), t.dtype, t.family) for t in task.inputs]
        ins = generate_inputs(specs, task.families[0], 0, case.label)
        try:
            outs = reference_outputs(task, fn, ins)
            again = reference_outputs(task, fn, ins)
        except Exception as e:  # the reference is the task author's code: report, don't crash
            rep.errors.append(f"reference.py raised on {case.label} ({case.describe()}): {type(e).__name__}: {e}")
            continue
        if len(outs) != len(task.outputs):
            rep.errors.append(f"reference.py returned {len(outs)} output(s) on {case.label}; the signature declares "
                              f"{len(task.outputs)}")
            continue
        for spec, o, o2 in zip(task.outputs, outs, again):
            want = spec.concrete(case.dims)
            if tuple(o.shape) != want:
                rep.errors.append(f"reference output {spec.name} on {case.label} has shape {tuple(o.shape)}, the "
                                  f"signature says {want}")
            if o.dtype != to_dtype(spec.dtype).storage:
                rep.errors.append(f"reference output {spec.name} has dtype {o.dtype}, the signature says {spec.dtype}")
            if not np.array_equal(np.asarray(o, np.float64), np.asarray(o2, np.float64), equal_nan=True):
                rep.errors.append(f"reference output {spec.name} is not deterministic on {case.label}")
        for var in variants:
            rep.errors += _variant_shape_errors(task, var, ins, case)
    return rep


def _variant_shape_errors(task: Task, var: ReferenceVariant, ins: dict[str, np.ndarray], case: Any) -> list[str]:
    """A known wrong formula (and each of its later-output formulas) must run and return its output's shape."""
    errors = []
    specs = {task.outputs[0].name: task.outputs[0]} | {o.name: o for o in task.outputs[1:]}
    fns = [(task.outputs[0].name, var.fn, ""), *((n, f, f"['outputs'][{n!r}]") for n, f in var.outputs.items())]
    for name, fn, where in fns:
        try:
            vo = np.asarray(fn(*[ins[t.name] for t in task.inputs], **task.params))
        except Exception as e:  # the task author's code: report, don't crash
            errors.append(f"reference.py:VARIANTS[{var.id!r}]{where} raised on {case.label}: {type(e).__name__}: {e}")
            continue
        want = specs[name].concrete(case.dims)
        if tuple(vo.shape) != want:
            errors.append(f"reference.py:VARIANTS[{var.id!r}]{where} returns shape {tuple(vo.shape)} on {case.label}; "
                          f"the {'first ' if not where else ''}output{' ' + name if where else ''} is {want}")
    return errors
