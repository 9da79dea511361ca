"""The task format: one directory per task, described by ``task.toml``.

Why a schema of our own rather than free-form TOML: a task suite is only as good as its
weakest task, and a malformed task (a shape that does not bind a dimension, a dtype NKI does
not have, a hidden-shape list that is empty) silently weakens every review run on it. So
every field is parsed here, once, into frozen dataclasses, and every problem is reported as
a :class:`TaskError` that names the file, the key and what was expected. The format is
documented in docs/tasks.md; ``SCHEMA_VERSION`` is bumped on incompatible changes.

A task directory holds::

    task.toml          metadata, signature, shapes, numerics, limits, flawed candidates
    reference.py       NumPy reference: ``reference(*inputs, **params)`` returns the output(s)
    kernel.cu          optional CUDA source to port (with its launch code)
    baseline_nki.py    optional straightforward correct NKI kernel (the speed reference)
    solution_nki.py    optional expert NKI kernel
    flawed/*.py        optional flawed candidates named in ``[[flawed]]``
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nkieval.sim.program.codec import DEFAULT_MAX_INSTRUCTIONS

SCHEMA_VERSION = "nkieval.task/1"

#: Criteria a flawed candidate may be expected to be caught in (ids of the review rubric).
CRITERIA = ("correctness", "numerics", "hardware", "performance", "migration", "code_quality")
#: NKI API generations a task can ask for.
API_GENERATIONS = ("nki", "neuronxcc")
TARGETS = ("trn1", "trn2", "trn3")
LEVELS = (1, 2, 3)
_ID_RE = re.compile(r"^[a-z][a-z0-9_]{1,63}$")
_DIM_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class TaskError(ValueError):
    """A malformed task. ``where`` is ``file`` or ``file:key``; ``rule`` a short stable id."""

    def __init__(self, message: str, *, where: str = "task.toml", rule: str = "schema") -> None:
        self.where = where
        self.rule = rule
        self.detail = message
        super().__init__(f"{where}: {message} [task rule {rule}]")


@dataclass(frozen=True)
class TensorSpec:
    """One kernel argument or output: name, symbolic shape (dim names or ints), dtype name."""

    name: str
    shape: tuple[str | int, ...]
    dtype: str
    #: input generation override: a family name applied to this input only (e.g. "positive").
    family: str | None = None

    def concrete(self, dims: Mapping[str, int]) -> tuple[int, ...]:
        return tuple(d if isinstance(d, int) else int(dims[d]) for d in self.shape)

    def symbols(self) -> set[str]:
        return {d for d in self.shape if isinstance(d, str)}


@dataclass(frozen=True)
class ShapeCase:
    """One shape binding (``{"N": 300, "F": 1000}``); ``hidden`` cases are never shown to authors."""

    dims: Mapping[str, int]
    hidden: bool
    index: int
    note: str = ""

    @property
    def label(self) -> str:
        kind = "hidden" if self.hidden else "public"
        return f"{kind}-{self.index}"

    def describe(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.dims.items())


@dataclass(frozen=True)
class FlawedCandidate:
    """A deliberately flawed kernel and the rubric criterion that must catch it."""

    file: str
    flaw: str
    criterion: str
    #: optional extra criteria that may also mark it down (never required).
    also: tuple[str, ...] = ()
    #: words the review's feedback in ``criterion`` must contain (case-insensitive, any one of them):
    #: how the tests check that the review names the flaw, not just lowers a level.
    evidence: tuple[str, ...] = ()
    #: input families that suffice to expose the flaw (quick checks and tests review only these;
    #: empty: all of the task's families)
    families: tuple[str, ...] = ()




@dataclass(frozen=True)
class Limits:
    """Per-candidate resource limits of the sandboxed run."""

    timeout_s: float = 60.0
    memory_mb: int = 4096
    max_instructions: int = DEFAULT_MAX_INSTRUCTIONS


#: A stated expert roofline fraction below this needs a ``[perf] note`` giving the reason (rule perf-note).
LOW_ROOFLINE_FRACTION = 0.3


@dataclass(frozen=True)
class PerfSpec:
    """Performance expectations: the bound class and the fraction of roofline the expert reaches."""

    bound: str = "memory"  # "memory" | "compute"
    expert_roofline_fraction: float | None = None
    #: Python expression over the dims giving model FLOPs (e.g. "2*M*N*K"); None: not a FLOP kernel.
    flops: str | None = None
    note: str = ""


@dataclass(frozen=True)
class NumericsSpec:
    """How the numerical standard judges the output: the op class, its parameters, the recipe."""

    op: str
    recipe: Mapping[str, Any]
    op_params: Mapping[str, Any] = field(default_factory=dict)
    #: dim name whose value is the contraction length for the generic op path.
    k: str | int | None = None


@dataclass(frozen=True)
class Task:
    """A parsed, validated task. Paths are absolute; use :func:`nkieval.tasks.load_task`."""

    id: str
    title: str
    level: int
    api: str
    targets: tuple[str, ...]
    kernel: str
    statement: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    params: Mapping[str, Any]
    shapes: tuple[ShapeCase, ...]
    families: tuple[str, ...]
    numerics: NumericsSpec
    rtol: float
    atol: float
    perf: PerfSpec
    limits: Limits
    flawed: tuple[FlawedCandidate, ...]
    directory: Path
    reference_file: Path
    cuda_file: Path | None
    baseline_file: Path | None
    solution_file: Path | None
    tags: tuple[str, ...] = ()
    notes: str = ""

    @property
    def public_shapes(self) -> tuple[ShapeCase, ...]:
        return tuple(s for s in self.shapes if not s.hidden)

    @property
    def hidden_shapes(self) -> tuple[ShapeCase, ...]:
        return tuple(s for s in self.shapes if s.hidden)

    @property
    def default_target(self) -> str:
        return self.targets[0]

    def compulsory_bytes(self, dims: Mapping[str, int]) -> tuple[int, int]:
        """(bytes every correct kernel must read from HBM, bytes it must write): each input and output once."""
        from nkieval.sim.dtypes import to_dtype

        def size(spec: TensorSpec) -> int:
            n = 1
            for d in spec.concrete(dims):
                n *= d
            return n * to_dtype(spec.dtype).itemsize

        return sum(size(s) for s in self.inputs), sum(size(s) for s in self.outputs)

    def model_flops(self, dims: Mapping[str, int]) -> float | None:
        if not self.perf.flops:
            return None
        return float(eval(self.perf.flops, {"__builtins__": {}}, dict(dims)))  # validated at load time


# ----------------------------------------------------------------------------- parsing helpers
def _req(table: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in table:
        raise TaskError(f"missing required key '{key}'", where=where, rule="missing-key")
    return _typed(table[key], kind, f"{where}.{key}" if where != "task.toml" else f"task.toml:{key}")


def _typed(value: Any, kind: type | tuple[type, ...], where: str) -> Any:
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise TaskError(f"expected {names}, got {type(value).__name__} {value!r}", where=where, rule="type")
    return value


def _opt(table: Mapping[str, Any], key: str, kind: type | tuple[type, ...], default: Any, where: str) -> Any:
    if key not in table:
        return default
    return _typed(table[key], kind, f"{where}:{key}" if ":" not in where else f"{where}.{key}")


def _str_list(table: Mapping[str, Any], key: str, default: list[str], where: str) -> tuple[str, ...]:
    """An optional list of strings."""
    items = _opt(table, key, list, default, where)
    for i, v in enumerate(items):
        _typed(v, str, f"{where}{':' if ':' not in where else '.'}{key}[{i}]")
    return tuple(items)


def _check_keys(table: Mapping[str, Any], allowed: Sequence[str], where: str) -> None:
    import difflib

    for key in table:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), list(allowed), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise TaskError(f"unknown key '{key}'{hint} (allowed: {', '.join(allowed)})", where=where,
                            rule="unknown-key")


def _dtype_name(value: Any, where: str) -> str:
    from nkieval.sim.dtypes import UnknownDTypeError, to_dtype

    name = _typed(value, str, where)
    try:
        return to_dtype(name).name
    except UnknownDTypeError as e:
        raise TaskError(f"unknown dtype {name!r}: {e.detail}", where=where, rule="dtype") from None


def _tensor_spec(raw: Any, where: str) -> TensorSpec:
    t = _typed(raw, dict, where)
    _check_keys(t, ("name", "shape", "dtype", "family"), where)
    name = _req(t, "name", str, where)
    if not _DIM_RE.match(name):
        raise TaskError(f"tensor name {name!r} must be a Python identifier", where=where, rule="name")
    shape_raw = _req(t, "shape", list, where)
    shape: list[str | int] = []
    for i, d in enumerate(shape_raw):
        if isinstance(d, bool) or not isinstance(d, int | str):
            raise TaskError(f"shape[{i}] must be a dimension name or a positive int, got {d!r}", where=where,
                            rule="shape")
        if isinstance(d, int) and d < 1:
            raise TaskError(f"shape[{i}] must be positive, got {d}", where=where, rule="shape")
        if isinstance(d, str) and not _DIM_RE.match(d):
            raise TaskError(f"shape[{i}] {d!r} is not a dimension name", where=where, rule="shape")
        shape.append(d)
    if not shape:
        raise TaskError("shape must have at least one dimension", where=where, rule="shape")
    dtype = _dtype_name(_req(t, "dtype", str, where), f"{where}.dtype")
    family = t.get("family")
    if family is not None:
        _typed(family, str, f"{where}.family")
    return TensorSpec(name=name, shape=tuple(shape), dtype=dtype, family=family)


_TOP_KEYS = ("schema", "id", "title", "level", "api", "targets", "kernel", "statement", "tags", "notes", "files",
             "signature", "numerics", "correctness", "inputs", "shapes", "perf", "limits", "flawed")


def parse_task(data: Mapping[str, Any], directory: Path) -> Task:
    """Validate a loaded ``task.toml`` table. Files are checked by :func:`nkieval.tasks.loader.load_task`."""
    from nkieval.tasks.inputs import FAMILIES

    W = "task.toml"
    _check_keys(data, _TOP_KEYS, W)
    schema = _opt(data, "schema", str, SCHEMA_VERSION, W)
    if schema != SCHEMA_VERSION:
        raise TaskError(f"schema {schema!r} is not supported (this nkieval reads {SCHEMA_VERSION!r})",
                        where=f"{W}:schema", rule="schema-version")
    tid = _req(data, "id", str, W)
    if not _ID_RE.match(tid):
        raise TaskError(f"id {tid!r} must be lower-case letters, digits and '_' (2-64 chars, starting with a letter)",
                        where=f"{W}:id", rule="id")
    title = _req(data, "title", str, W)
    level = _req(data, "level", int, W)
    if level not in LEVELS:
        raise TaskError(f"level must be one of {LEVELS}, got {level}", where=f"{W}:level", rule="value")
    api = _opt(data, "api", str, "nki", W)
    if api not in API_GENERATIONS:
        raise TaskError(f"api must be one of {API_GENERATIONS}, got {api!r}", where=f"{W}:api", rule="value")
    targets = _str_list(data, "targets", ["trn2"], W)
    if not targets or any(t not in TARGETS for t in targets):
        raise TaskError(f"targets must be a non-empty list drawn from {TARGETS}, got {list(targets)}",
                        where=f"{W}:targets", rule="value")
    kernel = _req(data, "kernel", str, W)
    if not _DIM_RE.match(kernel):
        raise TaskError(f"kernel {kernel!r} must be a Python identifier", where=f"{W}:kernel", rule="name")
    statement = _req(data, "statement", str, W).strip()
    if len(statement) < 40:
        raise TaskError("statement is too short to be a problem statement (< 40 characters)",
                        where=f"{W}:statement", rule="value")

    files = _opt(data, "files", dict, {}, W)
    _check_keys(files, ("reference", "cuda", "baseline", "solution"), f"{W}:files")
    for key, rel in files.items():
        _typed(rel, str, f"{W}:files.{key}")

    sig = _req(data, "signature", dict, W)
    _check_keys(sig, ("inputs", "outputs", "params"), f"{W}:signature")
    ins = tuple(_tensor_spec(x, f"{W}:signature.inputs[{i}]") for i, x in
                enumerate(_req(sig, "inputs", list, f"{W}:signature")))
    outs = tuple(_tensor_spec(x, f"{W}:signature.outputs[{i}]") for i, x in
                 enumerate(_req(sig, "outputs", list, f"{W}:signature")))
    if not ins or not outs:
        raise TaskError("signature needs at least one input and one output", where=f"{W}:signature", rule="signature")
    names = [t.name for t in ins + outs]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise TaskError(f"duplicate tensor name(s) {sorted(dup)}", where=f"{W}:signature", rule="signature")
    params = dict(_opt(sig, "params", dict, {}, f"{W}:signature"))
    for k, v in params.items():
        if isinstance(v, dict | list):
            raise TaskError(f"param {k!r} must be a scalar (number, string or bool)", where=f"{W}:signature.params",
                            rule="type")
    symbols = set().union(*(t.symbols() for t in ins))
    out_symbols = set().union(*(t.symbols() for t in outs))
    if out_symbols - symbols:
        raise TaskError(f"output dimension(s) {sorted(out_symbols - symbols)} are not dimensions of any input",
                        where=f"{W}:signature.outputs", rule="signature")

    num = _req(data, "numerics", dict, W)
    _check_keys(num, ("op", "recipe", "op_params", "k"), f"{W}:numerics")
    recipe = dict(_req(num, "recipe", dict, f"{W}:numerics"))
    _validate_recipe(recipe, f"{W}:numerics.recipe")
    k = num.get("k")
    if isinstance(k, str) and k not in symbols:
        raise TaskError(f"k names dimension {k!r}, which no input has", where=f"{W}:numerics.k", rule="signature")
    if k is not None and not isinstance(k, str) and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise TaskError(f"k must be a dimension name or a positive int, got {k!r}", where=f"{W}:numerics.k",
                        rule="type")
    _validate_op(_req(num, "op", str, f"{W}:numerics"), f"{W}:numerics.op")
    numerics = NumericsSpec(op=_req(num, "op", str, f"{W}:numerics"), recipe=recipe,
                            op_params=dict(_opt(num, "op_params", dict, {}, f"{W}:numerics")), k=k)

    corr = _opt(data, "correctness", dict, {}, W)
    _check_keys(corr, ("rtol", "atol"), f"{W}:correctness")
    rtol = _opt(corr, "rtol", float, 1e-2, f"{W}:correctness")
    atol = _opt(corr, "atol", float, 1e-3, f"{W}:correctness")
    if rtol < 0 or atol < 0:
        raise TaskError("rtol and atol must be >= 0", where=f"{W}:correctness", rule="value")

    inp = _opt(data, "inputs", dict, {}, W)
    _check_keys(inp, ("families",), f"{W}:inputs")
    families = _str_list(inp, "families", ["normal"], f"{W}:inputs")
    for i, f in enumerate(list(families) + [t.family for t in ins if t.family]):
        if f not in FAMILIES:
            raise TaskError(f"unknown input family {f!r}; known: {', '.join(FAMILIES)}",
                            where=f"{W}:inputs.families[{i}]", rule="family")
    if not families:
        raise TaskError("inputs.families must not be empty", where=f"{W}:inputs.families", rule="value")

    shp = _req(data, "shapes", dict, W)
    _check_keys(shp, ("public", "hidden"), f"{W}:shapes")
    cases: list[ShapeCase] = []
    for kind in ("public", "hidden"):
        raw = _req(shp, kind, list, f"{W}:shapes")
        if not raw:
            raise TaskError(f"shapes.{kind} must list at least one shape", where=f"{W}:shapes.{kind}", rule="shapes")
        for i, entry in enumerate(raw):
            where = f"{W}:shapes.{kind}[{i}]"
            entry = dict(_typed(entry, dict, where))
            note = entry.pop("note", "")
            missing = sorted(symbols - entry.keys())
            extra = sorted(entry.keys() - symbols)
            if missing:
                raise TaskError(f"does not bind dimension(s) {missing} used by the signature", where=where,
                                rule="shape-binding")
            if extra:
                raise TaskError(f"binds {extra}, which no input uses (dimensions: {sorted(symbols)})", where=where,
                                rule="shape-binding")
            for d, v in entry.items():
                if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                    raise TaskError(f"dimension {d} must be a positive int, got {v!r}", where=where, rule="shape")
            cases.append(ShapeCase(dims=dict(entry), hidden=kind == "hidden", index=i, note=str(note)))

    perf_t = _opt(data, "perf", dict, {}, W)
    _check_keys(perf_t, ("bound", "expert_roofline_fraction", "flops", "note"), f"{W}:perf")
    bound = _opt(perf_t, "bound", str, "memory", f"{W}:perf")
    if bound not in ("memory", "compute"):
        raise TaskError(f"perf.bound must be 'memory' or 'compute', got {bound!r}", where=f"{W}:perf.bound",
                        rule="value")
    flops = _opt(perf_t, "flops", str, None, f"{W}:perf")
    if flops is not None:
        _check_expr(flops, symbols, f"{W}:perf.flops")
    frac = _opt(perf_t, "expert_roofline_fraction", float, None, f"{W}:perf")
    note = _opt(perf_t, "note", str, "", f"{W}:perf")
    if frac is not None and not 0.0 < frac <= 1.0:
        raise TaskError(f"perf.expert_roofline_fraction must be in (0, 1], got {frac}",
                        where=f"{W}:perf.expert_roofline_fraction", rule="value")
    if frac is not None and frac < LOW_ROOFLINE_FRACTION and not note.strip():
        raise TaskError(f"expert_roofline_fraction {frac:g} is below {LOW_ROOFLINE_FRACTION:g}: [perf] note must "
                        "say what bounds the expert below that (the engine or latency the performance model "
                        "reports)", where=f"{W}:perf.note", rule="perf-note")
    perf = PerfSpec(bound=bound, expert_roofline_fraction=frac, flops=flops, note=note)

    lim_t = _opt(data, "limits", dict, {}, W)
    _check_keys(lim_t, ("timeout_s", "memory_mb", "max_instructions"), f"{W}:limits")
    limits = Limits(timeout_s=_opt(lim_t, "timeout_s", float, 60.0, f"{W}:limits"),
                    memory_mb=_opt(lim_t, "memory_mb", int, 4096, f"{W}:limits"),
                    max_instructions=_opt(lim_t, "max_instructions", int, DEFAULT_MAX_INSTRUCTIONS, f"{W}:limits"))
    if limits.timeout_s <= 0 or limits.memory_mb < 256 or limits.max_instructions < 1:
        raise TaskError("limits must be positive (memory_mb >= 256)", where=f"{W}:limits", rule="value")

    _check_case_sizes(ins + outs, cases, limits, W)

    flawed: list[FlawedCandidate] = []
    for i, fl in enumerate(_opt(data, "flawed", list, [], W)):
        where = f"{W}:flawed[{i}]"
        fl = _typed(fl, dict, where)
        _check_keys(fl, ("file", "flaw", "criterion", "also", "evidence", "families"), where)
        fl_fams = _str_list(fl, "families", [], where)
        for f in fl_fams:
            if f not in families:
                raise TaskError(f"family {f!r} is not one of the task's input families ({', '.join(families)})",
                                where=f"{where}.families", rule="family")
        crit = _req(fl, "criterion", str, where)
        also = _str_list(fl, "also", [], where)
        for c in (crit, *also):
            if c not in CRITERIA:
                raise TaskError(f"criterion {c!r} is not a rubric criterion ({', '.join(CRITERIA)})", where=where,
                                rule="value")
        flawed.append(FlawedCandidate(file=_req(fl, "file", str, where), flaw=_req(fl, "flaw", str, where),
                                      criterion=crit, also=also,
                                      evidence=_str_list(fl, "evidence", [], where),
                                      families=fl_fams))

    def path_of(key: str, default: str, required: bool) -> Path | None:
        rel = files.get(key, default)
        p = (directory / rel).resolve()
        if not p.is_file():
            if required or key in files:
                raise TaskError(f"file {rel!r} is missing from {directory}", where=rel, rule="missing-file")
            return None
        return p

    return Task(
        id=tid, title=title, level=level, api=api, targets=targets, kernel=kernel, statement=statement,
        inputs=ins, outputs=outs, params=params, shapes=tuple(cases), families=families, numerics=numerics,
        rtol=rtol, atol=atol, perf=perf, limits=limits, flawed=tuple(flawed), directory=directory.resolve(),
        reference_file=path_of("reference", "reference.py", True),  # type: ignore[arg-type]
        cuda_file=path_of("cuda", "kernel.cu", False), baseline_file=path_of("baseline", "baseline_nki.py", False),
        solution_file=path_of("solution", "solution_nki.py", False),
        tags=_str_list(data, "tags", [], W), notes=_opt(data, "notes", str, "", W),
    )


#: A case's inputs and outputs together may take at most this fraction of ``limits.memory_mb``: the
#: sandboxed run also holds the simulator's copies of what the kernel loads, and the harness the
#: reference outputs and the prepared numerics check (float64: twice an fp32 output).
CASE_MEMORY_FRACTION = 0.25


def _check_case_sizes(tensors: Sequence[TensorSpec], cases: Sequence[ShapeCase], limits: Limits, W: str) -> None:
    """Every shape's tensors fit the task's memory limit (a 100000 x 100000 shape is a task error, found
    before anything is allocated)."""
    from nkieval.sim.dtypes import to_dtype

    budget = int(limits.memory_mb * (1 << 20) * CASE_MEMORY_FRACTION)
    for c in cases:
        total = 0
        for t in tensors:
            n = to_dtype(t.dtype).itemsize
            for d in t.concrete(c.dims):
                n *= d
            total += n
        if total > budget:
            raise TaskError(f"shape {c.describe()} needs {total / (1 << 20):,.0f} MiB for its inputs and outputs; "
                            f"a case may use at most {CASE_MEMORY_FRACTION:g} of limits.memory_mb "
                            f"({budget / (1 << 20):,.0f} MiB)",
                            where=f"{W}:shapes.{'hidden' if c.hidden else 'public'}[{c.index}]", rule="shape-size")


def _check_expr(expr: str, symbols: set[str], where: str) -> None:
    import ast

    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError as e:
        raise TaskError(f"not an expression: {e.msg}", where=where, rule="expression") from None
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id not in symbols:
            raise TaskError(f"unknown dimension {node.id!r} in {expr!r}", where=where, rule="expression")
        if not isinstance(node, ast.Expression | ast.BinOp | ast.Name | ast.Constant | ast.Load | ast.operator |
                          ast.UnaryOp | ast.unaryop):
            raise TaskError(f"only arithmetic over dimension names is allowed in {expr!r}", where=where,
                            rule="expression")


def _validate_op(op: str, where: str) -> None:
    """An op the numerics standard knows (or ``reference``: reference.py's oracle)."""
    if op == "reference":
        return
    try:
        from nkieval.numerics.oracle import UnknownOpError, get_op
    except ImportError:  # numerics not built: the review says so
        return
    try:
        get_op(op)
    except UnknownOpError as e:
        raise TaskError(str(e), where=where, rule="op") from None


def _validate_recipe(recipe: dict[str, Any], where: str) -> None:
    """Validate with the numerics standard's own parser when it is available."""
    try:
        from nkieval.numerics.recipe import PrecisionRecipe, RecipeError
    except ImportError:  # numerics not built: the review marks Numerical standard "not assessed"
        return
    try:
        PrecisionRecipe.from_dict(recipe)
    except RecipeError as e:
        raise TaskError(str(e), where=where, rule="recipe") from None


def read_toml(path: Path) -> dict[str, Any]:
    """Parse ``task.toml``, turning syntax errors into a TaskError with the line."""
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise TaskError(f"no task.toml in {path.parent}", where=str(path), rule="missing-file") from None
    except tomllib.TOMLDecodeError as e:
        raise TaskError(f"invalid TOML: {e}", where=path.name, rule="toml") from None
    except UnicodeDecodeError as e:  # TOML is UTF-8
        raise TaskError(f"invalid TOML: not UTF-8 text ({e.reason} at byte {e.start})", where=path.name,
                        rule="toml") from None
    except OSError as e:  # a directory named task.toml, no permission
        raise TaskError(f"cannot read task.toml: {e.strerror}", where=str(path), rule="missing-file") from None
