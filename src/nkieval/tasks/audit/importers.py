"""``nkieval task import``: KernelBench-style and NKIBench-style tasks into nkieval task directories.

**KernelBench-style**: a Python file with a PyTorch ``class Model(nn.Module)`` (``__init__(*get_init_inputs())``,
``forward(*inputs)``), ``get_inputs()`` returning the forward's tensors and ``get_init_inputs()``.
**NKIBench-style** (as this importer reads it): a Python file with a NumPy ``reference(*inputs)`` (or
``ref``/``numpy_reference``), ``get_inputs()`` returning NumPy arrays, and optionally a kernel function
decorated with ``@nki.jit`` (copied as the task's ``solution_nki.py``).

What the importer writes: ``task.toml`` (signature from the inputs' shapes, one dimension symbol per
distinct input axis, output shapes found by evaluating the reference on two probe shapes; the public
shape from ``get_inputs``, ragged and small hidden shapes derived from it; numerics op ``reference`` with
a float64 oracle), ``reference.py`` and a generated statement.

Torch is optional. With torch installed the reference calls the module itself (float64 in, declared
dtype out). Without it, ``forward`` bodies that are one expression over the inputs built from the
common elementwise, reduction and softmax ops (``torch.relu``, ``F.gelu``, ``x.sum(dim=1)``,
``torch.softmax(x, dim=-1)``, arithmetic, ...) are translated to NumPy; anything else is refused with
the construct named. Shapes come from running ``get_inputs()`` against a stand-in ``torch`` that only
records ``randn``/``rand``/``zeros``/``ones`` shapes and dtypes, so no tensor is ever allocated.
The source file is the task author's own code and runs in this process (like ``reference.py``).
"""

from __future__ import annotations

import ast
import re
import sys
import textwrap
import types
from pathlib import Path
from typing import Any

import numpy as np

from nkieval.tasks.audit.coverage import P


class TaskImportError(ValueError):
    """The source cannot be imported as a task (names the construct and why)."""


# ------------------------------------------------------------------------------- stand-in torch
class _Shape:
    def __init__(self, shape: tuple[int, ...], dtype: str = "float32") -> None:
        self.shape = tuple(int(s) for s in shape)
        self.dtype = dtype

    def to(self, *a: Any, **k: Any) -> _Shape:
        return self

    cuda = cpu = contiguous = float = to


def _shape_args(args: tuple[Any, ...]) -> tuple[int, ...]:
    if len(args) == 1 and isinstance(args[0], tuple | list):
        return tuple(args[0])
    return tuple(a for a in args if isinstance(a, int))


def _stub_torch() -> types.ModuleType:
    t = types.ModuleType("torch")
    dt = {"float32": "float32", "float": "float32", "bfloat16": "bfloat16", "float16": "float16", "int32": "int32",
          "int64": "int32", "long": "int32"}
    for k in dt:
        setattr(t, k, k)

    def make(*args: Any, dtype: Any = "float32", **_: Any) -> _Shape:
        return _Shape(_shape_args(args), dt.get(str(dtype).replace("torch.", ""), "float32"))

    def randint(low: int, high: int | None = None, size: Any = (), **k: Any) -> _Shape:
        return _Shape(tuple(size), "int32")

    for name in ("randn", "rand", "zeros", "ones", "empty"):
        setattr(t, name, make)
    t.randint = randint  # type: ignore[attr-defined]
    nn = types.ModuleType("torch.nn")

    class Module:
        def __init__(self, *a: Any, **k: Any) -> None:
            pass

    nn.Module = Module  # type: ignore[attr-defined]
    nn.functional = types.ModuleType("torch.nn.functional")  # type: ignore[attr-defined]
    t.nn = nn  # type: ignore[attr-defined]
    t.manual_seed = lambda *a, **k: None  # type: ignore[attr-defined]
    return t


def _exec_source(path: Path, stub: bool) -> dict[str, Any]:
    saved = {k: sys.modules.get(k) for k in ("torch", "torch.nn", "torch.nn.functional")}
    if stub:
        t = _stub_torch()
        sys.modules.update({"torch": t, "torch.nn": t.nn, "torch.nn.functional": t.nn.functional})  # type: ignore[attr-defined]
    else:
        from nkieval import frontends

        frontends.install()  # an NKIBench file imports nki for its kernel: serve the simulator's front end
    try:
        ns: dict[str, Any] = {"__name__": "nkieval_import_source", "__file__": str(path)}
        exec(compile(path.read_text(), str(path), "exec"), ns)  # the task author's file, like reference.py
        return ns
    except SyntaxError as e:
        raise TaskImportError(f"{path.name} does not parse: {e.msg} (line {e.lineno})") from None
    except Exception as e:  # the author's module raised at import time
        raise TaskImportError(f"{path.name} raised while loading: {type(e).__name__}: {e}") from None
    finally:
        if stub:
            for k, v in saved.items():
                if v is None:
                    sys.modules.pop(k, None)
                else:
                    sys.modules[k] = v


def _torch_available() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


# ------------------------------------------------------------------------------- forward -> NumPy
_FN = {
    "relu": "np.maximum({0}, 0.0)", "sigmoid": "1.0 / (1.0 + np.exp(-{0}))", "tanh": "np.tanh({0})",
    "exp": "np.exp({0})", "log": "np.log({0})", "abs": "np.abs({0})", "sqrt": "np.sqrt({0})",
    "rsqrt": "1.0 / np.sqrt({0})", "neg": "-({0})", "square": "np.square({0})", "sin": "np.sin({0})",
    "cos": "np.cos({0})", "silu": "{0} / (1.0 + np.exp(-{0}))",
    "gelu": "0.5 * {0} * (1.0 + _erf({0} / np.sqrt(2.0)))",
    "softplus": "np.logaddexp(0.0, {0})", "elu": "np.where({0} > 0, {0}, np.expm1({0}))",
}
_RED = {"sum": "np.sum", "mean": "np.mean", "amax": "np.max", "max": "np.max", "amin": "np.min", "min": "np.min",
        "prod": "np.prod", "cumsum": "np.cumsum"}
_MODS = {"torch", "F", "nn", "functional", "torch.nn.functional"}


def _is_torch_call(f: ast.expr) -> str | None:
    if isinstance(f, ast.Attribute):
        base = ast.unparse(f.value)
        if base in ("torch", "F", "torch.nn.functional", "nn.functional"):
            return f.attr
    return None


class _ToNumpy(ast.NodeTransformer):
    def __init__(self, args: list[str]) -> None:
        self.args = set(args)

    def _kw(self, n: ast.Call, name: str, pos: int | None = None) -> ast.expr | None:
        for k in n.keywords:
            if k.arg == name:
                return k.value
        if pos is not None and len(n.args) > pos:
            return n.args[pos]
        return None

    def visit_Name(self, n: ast.Name) -> ast.expr:
        if n.id not in self.args:
            raise TaskImportError(f"forward uses {n.id!r}, which is not an input (module state needs torch)")
        return n

    def visit_Call(self, n: ast.Call) -> ast.expr:
        name = _is_torch_call(n.func)
        if name is None and isinstance(n.func, ast.Attribute) and ast.unparse(n.func.value) not in _MODS:
            # a method on a tensor: x.sum(dim=1), x.relu(), x.exp()
            name = n.func.attr
            n = ast.Call(func=ast.Name("_m"), args=[n.func.value, *n.args], keywords=n.keywords)
        if name is None:
            raise TaskImportError(f"forward calls {ast.unparse(n.func)}, which the torch-free importer does not know")
        x = self.visit(n.args[0])
        if name in _FN:
            return ast.parse(_FN[name].format(f"({ast.unparse(x)})"), mode="eval").body
        if name in _RED:
            dim = self._kw(n, "dim", 1)
            keep = self._kw(n, "keepdim", 2)
            parts = [ast.unparse(x)]
            if dim is not None:
                parts.append(f"axis={ast.unparse(dim)}")
            if name not in ("cumsum",) and keep is not None:
                parts.append(f"keepdims={ast.unparse(keep)}")
            return ast.parse(f"{_RED[name]}({', '.join(parts)})", mode="eval").body
        if name in ("softmax", "log_softmax"):
            dim = self._kw(n, "dim", 1)
            if dim is None:
                raise TaskImportError(f"{name} without dim")
            fn = "_softmax" if name == "softmax" else "_log_softmax"
            return ast.parse(f"{fn}({ast.unparse(x)}, {ast.unparse(dim)})", mode="eval").body
        if name in ("matmul", "mm", "bmm"):
            y = self.visit(n.args[1])
            return ast.parse(f"np.matmul({ast.unparse(x)}, {ast.unparse(y)})", mode="eval").body
        if name in ("maximum", "minimum", "add", "mul", "sub", "div"):
            y = self.visit(n.args[1])
            op = {"maximum": "np.maximum", "minimum": "np.minimum", "add": "np.add", "mul": "np.multiply",
                  "sub": "np.subtract", "div": "np.divide"}[name]
            return ast.parse(f"{op}({ast.unparse(x)}, {ast.unparse(y)})", mode="eval").body
        if name in ("clamp", "clip"):
            lo, hi = self._kw(n, "min", 1), self._kw(n, "max", 2)
            return ast.parse(f"np.clip({ast.unparse(x)}, {ast.unparse(lo) if lo else 'None'}, "
                             f"{ast.unparse(hi) if hi else 'None'})", mode="eval").body
        if name in ("leaky_relu",):
            slope = self._kw(n, "negative_slope", 1)
            s = ast.unparse(slope) if slope is not None else "0.01"
            return ast.parse(f"np.where({ast.unparse(x)} > 0, {ast.unparse(x)}, {s} * {ast.unparse(x)})",
                             mode="eval").body
        raise TaskImportError(f"forward calls {name}, which the torch-free importer does not know")

    def visit_Constant(self, n: ast.Constant) -> ast.expr:
        return n


_HELPERS = '''
def _erf(x):
    from math import erf
    return np.vectorize(erf, otypes=[np.float64])(x)


def _softmax(x, axis):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def _log_softmax(x, axis):
    m = np.max(x, axis=axis, keepdims=True)
    return x - m - np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))
'''


def forward_to_numpy(model_cls: type, args: list[str]) -> str:
    """A float64 NumPy expression for ``Model.forward`` (one ``return`` of torch ops over the inputs)."""
    import inspect

    try:
        src = textwrap.dedent(inspect.getsource(model_cls.forward))
    except (OSError, TypeError, AttributeError) as e:
        raise TaskImportError(f"cannot read Model.forward: {e}") from None
    fn = ast.parse(src).body[0]
    assert isinstance(fn, ast.FunctionDef)
    body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
        raise TaskImportError("forward must be a single `return <expression>` to import without torch")
    expr = _ToNumpy(args).visit(body[0].value)
    return ast.unparse(expr)


# ------------------------------------------------------------------------------- task writing
def _dims(shapes: list[tuple[int, ...]]) -> list[list[str]]:
    """One symbol per distinct (input, axis); axes of equal size that a broadcast could share keep
    distinct symbols unless the size matches the same axis of the first input."""
    letters = "NDKMLHWCEFGPQRSTUVXYZ"
    out: list[list[str]] = []
    used = 0
    for i, s in enumerate(shapes):
        row = []
        for ax, v in enumerate(s):
            if i > 0 and ax < len(shapes[0]) and shapes[0][ax] == v and len(s) == len(shapes[0]):
                row.append(out[0][ax])
            else:
                row.append(letters[used] if used < len(letters) else f"D{used}")
                used += 1
        out.append(row)
    return out


def _bind(symbols: list[list[str]], shapes: list[tuple[int, ...]]) -> dict[str, int]:
    return {sym: v for row, s in zip(symbols, shapes) for sym, v in zip(row, s)}


def _primes(n: int) -> list[int]:
    ps, k = [], 131
    while len(ps) < n:
        if all(k % p for p in range(2, int(k ** 0.5) + 1)):
            ps.append(k)
        k += 2
    return ps


def import_task(source: Path, parent: Path, *, kind: str = "auto", task_id: str | None = None) -> Path:
    """Write an nkieval task directory for ``source`` under ``parent``; return its path."""
    text = source.read_text()
    if kind == "auto":
        kind = "kernelbench" if re.search(r"class\s+Model\s*\(", text) else "nkibench"
    tid = task_id or re.sub(r"[^a-z0-9_]", "_", source.stem.lower()).strip("_")
    if not re.match(r"^[a-z][a-z0-9_]{1,63}$", tid):
        tid = f"t_{tid}"[:64]
    use_torch = kind == "kernelbench" and _torch_available()
    ns = _exec_source(source, stub=kind == "kernelbench" and not use_torch)
    if "get_inputs" not in ns:
        raise TaskImportError(f"{source.name} defines no get_inputs()")
    raw = list(ns["get_inputs"]())
    shapes = [tuple(np.shape(x) if not isinstance(x, _Shape) else x.shape) for x in raw]
    dtypes = [_dtype_of(x) for x in raw]
    if kind == "kernelbench":
        init = list(ns.get("get_init_inputs", lambda: [])())
        model = ns.get("Model")
        if model is None:
            raise TaskImportError(f"{source.name} defines no class Model")
        import inspect

        names = [p for p in inspect.signature(model.forward).parameters if p != "self"][: len(raw)]
        if use_torch:
            ref_body = _torch_reference(source, names, init)
        else:
            if init:
                raise TaskImportError("get_init_inputs() is not empty: module parameters need torch to import")
            expr = forward_to_numpy(model, names)
            ref_body = f"def _f64({', '.join(names)}):\n    return {expr}\n"
        origin = "KernelBench-style PyTorch module"
    else:
        fn_name = next((n for n in ("reference", "ref", "numpy_reference") if callable(ns.get(n))), None)
        if fn_name is None:
            raise TaskImportError(f"{source.name} defines no reference()/ref()/numpy_reference()")
        import inspect

        names = list(inspect.signature(ns[fn_name]).parameters)[: len(raw)]
        src_fn = textwrap.dedent(inspect.getsource(ns[fn_name]))
        ref_body = src_fn.replace(f"def {fn_name}(", "def _f64_impl(", 1) + \
            f"\n\ndef _f64({', '.join(names)}):\n    return _f64_impl({', '.join(names)})\n"
        origin = "NKIBench-style NumPy reference"
    ref_src = _reference_module(ref_body, names, use_torch)
    rns: dict[str, Any] = {}
    exec(compile(ref_src, "reference.py", "exec"), rns)  # the generated reference: evaluate shapes
    symbols = _dims(shapes)
    dims = _bind(symbols, shapes)
    out_syms = _output_symbols(rns["oracle"], symbols, shapes, dtypes)
    out_dtype = "float32"
    hidden = _hidden(dims)
    statement = (f"Imported from {source.name} ({origin}). Write `{tid}({', '.join(names)})` in NKI: "
                 + "; ".join(f"`{n}` is a {'fp32' if d == 'float32' else d} tensor of shape [{', '.join(s)}] in HBM"
                             for n, d, s in zip(names, dtypes, symbols))
                 + f". Return a new shared-HBM fp32 tensor `out` of shape [{', '.join(out_syms)}] equal to the "
                   "module's forward (see reference.py). Sizes are arbitrary positive integers, not necessarily "
                   "multiples of 128.")
    k = _reduction_symbol(ref_src, symbols, names)
    d = parent / tid
    if d.exists():
        raise TaskImportError(f"{d} already exists")
    d.mkdir(parents=True)
    sig_in = ", ".join(f'{{ name = "{n}", shape = {_toml_list(s)}, dtype = "{dt}" }}'
                       for n, s, dt in zip(names, symbols, dtypes))
    toml = f'''schema = "nkieval.task/1"
id = "{tid}"
title = "{origin}: {source.stem}"
level = 1
api = "nki"
targets = ["trn2"]
kernel = "{tid}"
tags = ["imported", "{kind}"]
statement = """
{textwrap.fill(statement, 100)}
"""

[signature]
inputs = [{sig_in}]
outputs = [{{ name = "out", shape = {_toml_list(out_syms)}, dtype = "{out_dtype}" }}]

[numerics]
op = "reference"
k = {k if isinstance(k, int) else f'"{k}"'}
recipe = {{ inputs = [{", ".join('"fp32"' for _ in names)}], accumulate = "fp32", output = "fp32" }}

[correctness]
rtol = 1e-3
atol = 1e-5

[inputs]
families = ["normal", "integers"]

[shapes]
public = [{_toml_dims(dims)}]
hidden = [{", ".join(_toml_dims(h) for h in hidden)}]

[perf]
bound = "memory"
'''
    (d / "task.toml").write_text(toml)
    (d / "reference.py").write_text(ref_src)
    if kind == "nkibench":
        sol = _nki_solution(text, tid)
        if sol:
            (d / "solution_nki.py").write_text(sol)
    return d


def _dtype_of(x: Any) -> str:
    if isinstance(x, _Shape):
        return x.dtype if x.dtype in ("float32", "bfloat16", "int32") else "float32"
    s = str(getattr(x, "dtype", "float32")).replace("torch.", "")
    return {"float32": "float32", "bfloat16": "bfloat16", "int32": "int32", "int64": "int32"}.get(s, "float32")


def _reference_module(body: str, names: list[str], use_torch: bool) -> str:
    args = ", ".join(names)
    return f'''"""Reference generated by `nkieval task import`: the source's computation in float64, rounded once."""

import numpy as np

{_HELPERS if not use_torch else ""}
{body}

def oracle({args}):
    return np.asarray(_f64({", ".join(f"np.asarray({n}, np.float64)" for n in names)}), np.float64)


def reference({args}):
    return oracle({args}).astype(np.float32)
'''


def _torch_reference(source: Path, names: list[str], init: list[Any]) -> str:
    return f'''import runpy

import torch

_NS = runpy.run_path({str(source.resolve())!r})
_MODEL = _NS["Model"](*_NS.get("get_init_inputs", lambda: [])()).double().eval()


def _f64({", ".join(names)}):
    with torch.no_grad():
        return _MODEL({", ".join(f"torch.from_numpy(np.asarray({n}, np.float64))" for n in names)}).numpy()
'''


def _output_symbols(oracle: Any, symbols: list[list[str]], shapes: list[tuple[int, ...]],
                    dtypes: list[str]) -> list[str]:
    """The output's dimension symbols: evaluate on a probe shape where every symbol has a distinct size."""
    uniq = sorted({s for row in symbols for s in row})
    sizes = dict(zip(uniq, _primes(len(uniq))))
    ins = [np.random.default_rng(0).standard_normal([sizes[s] for s in row]) for row in symbols]
    try:
        out = np.asarray(oracle(*ins))
    except Exception as e:
        raise TaskImportError(f"the reference raised on a probe shape: {type(e).__name__}: {e}") from None
    by_size = {v: k for k, v in sizes.items()}
    syms = []
    for v in out.shape:
        if v not in by_size:
            raise TaskImportError(f"output dimension {v} is not an input dimension (shape {out.shape})")
        syms.append(by_size[v])
    if not syms:
        raise TaskImportError("the output is a scalar; nkieval tasks return tensors")
    return syms


def _reduction_symbol(ref_src: str, symbols: list[list[str]], names: list[str]) -> str | int:
    """The contraction length for the numerics standard: the last axis of the first input when the
    reference reduces (sum, mean, softmax, matmul), else 1."""
    if re.search(r"np\.(sum|mean|max|min|prod|cumsum|matmul)|_softmax|_log_softmax|torch", ref_src):
        return symbols[0][-1]
    return 1


def _hidden(dims: dict[str, int]) -> list[dict[str, int]]:
    ragged = {k: v + max(1, v // 4) + (1 if (v + max(1, v // 4)) % P == 0 else 0) for k, v in dims.items()}
    small = {k: (1 if i == 0 else min(v, 7)) for i, (k, v) in enumerate(dims.items())}
    tile = {k: 129 if v >= 129 else v for k, v in dims.items()}
    return [ragged, small, tile]


def _toml_list(xs: list[str]) -> str:
    return "[" + ", ".join(f'"{x}"' for x in xs) + "]"


def _toml_dims(d: dict[str, int]) -> str:
    return "{ " + ", ".join(f"{k} = {v}" for k, v in d.items()) + " }"


def _nki_solution(text: str, tid: str) -> str | None:
    """The NKIBench file's ``@nki.jit`` kernel, renamed to the task's entry point, as solution_nki.py."""
    tree = ast.parse(text)
    kernels = [n for n in tree.body if isinstance(n, ast.FunctionDef)
               and any("jit" in ast.unparse(d) for d in n.decorator_list)]
    if not kernels:
        return None
    k = kernels[0]
    k.name = tid
    keep = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)
            and any("nki" in ast.unparse(n) or a.name in ("math", "numpy") for a in n.names)]
    helpers = [n for n in tree.body if isinstance(n, ast.Assign) and all(isinstance(t, ast.Name) and t.id.isupper()
                                                                         for t in n.targets)]
    mod = ast.Module(body=[*keep, *helpers, k], type_ignores=[])
    return '"""Kernel imported by `nkieval task import` from an NKIBench-style file."""\n\n' + ast.unparse(mod) + "\n"


__all__ = ["TaskImportError", "forward_to_numpy", "import_task"]
