"""Malformed task directories and candidates, and the property every answer to them must have.

Shared by ``tests/fuzz/test_bad_inputs.py`` (a modest example count) and ``benchmarks/fuzz_bad_inputs.py``
(the long run). The property (issue #25, item 1):

* the exit code is the documented one: ``task check`` 0 (valid) or 2 (bad task); ``review`` 2 for a bad
  task, 0 or 1 for any candidate (never 3: a candidate cannot break the judge);
* the answer is a specific message: an ``error:``/``ERROR`` line naming the file and rule for a bad task,
  the verdict line for a candidate that did not pass;
* never a traceback from nkieval (``CliRunner`` would hand back the exception);
* nothing written outside the output directory: the task directory and the working directory are the
  same before and after, except for ``--out``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from hypothesis import strategies as st

from nkieval.cli import main
from nkieval.tasks import BUILTIN_ROOT

SOURCE_TASK = BUILTIN_ROOT / "vector_add"


def base_task() -> dict[str, Any]:
    """vector_add's task.toml with two small shapes and no flawed candidates (a review takes ~1 s)."""
    with open(SOURCE_TASK / "task.toml", "rb") as fh:
        data = tomllib.load(fh)
    data["shapes"] = {"public": [{"N": 256}], "hidden": [{"N": 300}]}
    data.pop("flawed", None)
    data["limits"] = {"timeout_s": 30, "memory_mb": 2048}
    return data


# ------------------------------------------------------------------------------ a TOML writer (no dependency)
def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        if isinstance(v, float) and v != v:
            return "nan"
        if isinstance(v, float) and v in (float("inf"), float("-inf")):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return '"' + v.encode("unicode_escape").decode("ascii").replace('"', '\\"') + '"'
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(type(v))


def _key(k: str) -> str:
    return k if k.replace("_", "").isalnum() and k.isascii() and k else _value(k)


def dumps(data: dict[str, Any]) -> str:
    """``data`` as TOML: scalars and inline values at the top, then one ``[table]`` per dict value."""
    lines = [f"{_key(k)} = {_value(v)}" for k, v in data.items() if not isinstance(v, dict)]
    for k, v in data.items():
        if isinstance(v, dict):
            lines += ["", f"[{_key(k)}]", *(f"{_key(kk)} = {_value(vv)}" for kk, vv in v.items())]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------ task mutations
JUNK = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
    st.lists(st.integers(-3, 3), max_size=3), st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)
DIMS = st.one_of(st.integers(-5, 0), st.integers(1, 600), st.integers(10**6, 10**12), st.just(2**63 - 1),
                 st.floats(allow_nan=True), st.text(max_size=3))
DTYPES = st.sampled_from(["float32", "bfloat16", "float16", "int32", "uint8", "float8_e4m3", "float64", "complex64",
                          "fp32", "", "float33", "tensor", "object"])
OPS = st.sampled_from(["add", "exp", "matmul", "reference", "softmax", "", "nonexistent_op", "__import__"])


def _paths(d: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = []
    if isinstance(d, dict):
        for k, v in d.items():
            out.append((*prefix, k))
            out += _paths(v, (*prefix, k))
    elif isinstance(d, list):
        for i, v in enumerate(d):
            out.append((*prefix, i))
            out += _paths(v, (*prefix, i))
    return out


def _set(d: Any, path: tuple[Any, ...], value: Any, delete: bool = False) -> None:
    for p in path[:-1]:
        d = d[p]
    if delete:
        del d[path[-1]]
    else:
        d[path[-1]] = value


@st.composite
def toml_mutations(draw: Callable[..., Any]) -> tuple[str, Any]:
    """(description, task.toml text or bytes): one to three edits of the base task, or garbage."""
    kind = draw(st.sampled_from(["edit", "edit", "edit", "shape", "dtype", "op", "garbage"]))
    if kind == "garbage":
        raw = draw(st.one_of(st.binary(max_size=200), st.text(max_size=200)))
        return "garbage", raw
    data = base_task()
    what = []
    if kind == "shape":
        d = draw(DIMS)
        data["shapes"][draw(st.sampled_from(["public", "hidden"]))] = [{"N": d}]
        what.append(f"N={d!r}")
    elif kind == "dtype":
        io = draw(st.sampled_from(["inputs", "outputs"]))
        dt = draw(DTYPES)
        data["signature"][io][0]["dtype"] = dt
        what.append(f"{io}[0].dtype={dt!r}")
    elif kind == "op":
        op = draw(OPS)
        data["numerics"]["op"] = op
        what.append(f"op={op!r}")
    for _ in range(draw(st.integers(1 if kind == "edit" else 0, 3))):
        paths = _paths(data)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        if draw(st.booleans()):
            _set(data, path, None, delete=True)
            what.append(f"del {path}")
        else:
            v = draw(JUNK)
            if v is None:
                continue
            _set(data, path, v)
            what.append(f"{path}={v!r}")
    return "; ".join(what) or kind, dumps(data)


REFERENCES = {
    "syntax-error": "def reference(a, b:\n    return a + b\n",
    "raises-at-import": "raise RuntimeError('broken at import')\n",
    "exits-at-import": "import sys\nsys.exit(0)\n",
    "imports-missing": "import no_such_module_here\n",
    "no-function": "import numpy as np\n",
    "not-callable": "reference = 3\n",
    "builtin-ufunc": "import numpy as np\nreference = np.add\n",
    "wrong-arity": "def reference(a):\n    return a\n",
    "extra-required": "def reference(a, b, c):\n    return a + b\n",
    "raises-on-call": "def reference(a, b):\n    raise ValueError('broken reference')\n",
    "returns-none": "def reference(a, b):\n    return None\n",
    "wrong-shape": "import numpy as np\ndef reference(a, b):\n    return np.zeros(3, np.float32)\n",
    "wrong-dtype": "def reference(a, b):\n    return (a + b).astype('float64')\n",
    "two-outputs": "def reference(a, b):\n    return a + b, a - b\n",
    "nondeterministic": ("import numpy as np\ndef reference(a, b):\n"
                         "    return (a + b + np.random.random_sample(a.shape)).astype(np.float32)\n"),
    "hidden-shape-only": ("import numpy as np\ndef reference(a, b):\n    if a.shape[0] == 300:\n"
                          "        raise IndexError('only the hidden shape')\n    return a + b\n"),
    "binary": b"\x00\xff\xfe garbage \x80",
    "bad-variants": "def reference(a, b):\n    return a + b\nVARIANTS = [1, 2]\n",
    "empty": "",
}


# ------------------------------------------------------------------------------ candidate mutations
KERNEL_HEAD = "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n\n\n"
CANDIDATES = {
    "empty": "",
    "syntax-error": "def vector_add(a, b:\n",
    "binary": b"\x00\x01\x02\xff\xfe",
    "latin-1": "# caf\xe9\n".encode("latin-1"),
    "no-kernel": KERNEL_HEAD + "def other(a, b):\n    return a\n",
    "not-a-function": KERNEL_HEAD + "vector_add = 3\n",
    "wrong-arity": KERNEL_HEAD + "@nki.jit\ndef vector_add(a):\n    return a\n",
    "too-many-args": KERNEL_HEAD + "@nki.jit\ndef vector_add(a, b, c):\n    return a\n",
    "returns-input": KERNEL_HEAD + "@nki.jit\ndef vector_add(a, b):\n    return a\n",
    "returns-none": KERNEL_HEAD + "@nki.jit\ndef vector_add(a, b):\n    return None\n",
    "returns-two": KERNEL_HEAD + "@nki.jit\ndef vector_add(a, b):\n    return a, b\n",
    "raises": KERNEL_HEAD + "@nki.jit\ndef vector_add(a, b):\n    raise ValueError('mine')\n",
    "raises-at-import": "raise ImportError('at import')\n",
    "exits-at-import": "import sys\nsys.exit(3)\n",
    "wrong-shape-output": KERNEL_HEAD + ("@nki.jit\ndef vector_add(a, b):\n"
                                         "    return nl.ndarray((7, 3), dtype=a.dtype, buffer=nl.shared_hbm)\n"),
    "wrong-dtype-output": KERNEL_HEAD + ("@nki.jit\ndef vector_add(a, b):\n"
                                         "    return nl.ndarray(a.shape, dtype=nl.int8, buffer=nl.shared_hbm)\n"),
    "huge-tensor": KERNEL_HEAD + ("@nki.jit\ndef vector_add(a, b):\n"
                                  "    return nl.ndarray((100000, 100000), dtype=a.dtype, buffer=nl.shared_hbm)\n"),
    "huge-sbuf-tile": KERNEL_HEAD + ("@nki.jit\ndef vector_add(a, b):\n"
                                     "    t = nl.ndarray((128, 10**9), dtype=a.dtype, buffer=nl.sbuf)\n"
                                     "    return a\n"),
    "recursion": KERNEL_HEAD + "@nki.jit\ndef vector_add(a, b):\n    return vector_add(a, b)\n",
    "writes-file": "open('written_by_candidate.txt', 'w').write('x')\n" + KERNEL_HEAD
                   + "@nki.jit\ndef vector_add(a, b):\n    return a\n",
    "forbidden-import": "import subprocess\n" + KERNEL_HEAD + "@nki.jit\ndef vector_add(a, b):\n    return a\n",
}


# ------------------------------------------------------------------------------ the property
def write_task(root: Path, toml: str | bytes | None = None, reference: str | bytes | None = None) -> Path:
    d = root / "task"
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    for f in ("reference.py", "solution_nki.py", "baseline_nki.py", "kernel.cu"):
        shutil.copy(SOURCE_TASK / f, d / f)
    t = dumps(base_task()) if toml is None else toml
    (d / "task.toml").write_bytes(t if isinstance(t, bytes) else t.encode())
    if reference is not None:
        (d / "reference.py").write_bytes(reference if isinstance(reference, bytes) else reference.encode())
    return d


def snapshot(*dirs: Path, skip: Path | None = None) -> dict[str, str]:
    """Every file under ``dirs`` (but ``skip``) with its content hash."""
    out = {}
    for d in dirs:
        for p in sorted(d.rglob("*")):
            if skip is not None and (p == skip or skip in p.parents):
                continue
            out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
    return out


def invoke(args: list[str], cwd: Path) -> Any:
    """Run ``nkieval ARGS`` in-process with ``cwd`` as the working directory."""
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(main, args, catch_exceptions=True)
    finally:
        os.chdir(old)


def no_traceback(r: Any, what: str) -> None:
    exc = r.exception
    assert exc is None or isinstance(exc, SystemExit), f"{what}: nkieval raised {type(exc).__name__}: {exc}\n{r.output}"
    assert "Traceback (most recent call last)" not in r.output, f"{what}: a traceback in the output\n{r.output}"


def check_task_answer(root: Path, what: str) -> int:
    """``task check`` on ``root/task``: exit 0 with OK, or 2 with a specific ERROR line; nothing written."""
    before = snapshot(root)
    r = invoke(["task", "check", str(root / "task")], root)
    no_traceback(r, what)
    assert r.exit_code in (0, 2), f"{what}: task check exit {r.exit_code}\n{r.output}"
    if r.exit_code == 0:
        assert "OK" in r.output, r.output
    else:
        err = [ln for ln in r.output.splitlines() if ln.startswith("ERROR")]
        assert err and all(len(e) > 20 for e in err), f"{what}: no specific message\n{r.output}"
    assert snapshot(root) == before, f"{what}: task check wrote files"
    return int(r.exit_code)


def review_answer(root: Path, candidate: Path, what: str, *, bad_task: bool) -> int:
    """``review`` of ``candidate`` on ``root/task``: exit 2 with ``error:`` for a bad task; for a candidate
    on a valid task 0, or 1 with the verdict line; nothing written outside ``root/out``."""
    out = root / "out"
    before = snapshot(root, skip=out)
    r = invoke(["review", str(root / "task"), str(candidate), "--no-progress", "--seed", "1", "--out", str(out)], root)
    no_traceback(r, what)
    if bad_task:
        assert r.exit_code == 2, f"{what}: review of a bad task exit {r.exit_code}\n{r.output}"
        assert "error: " in r.output, f"{what}: no specific message\n{r.output}"
    else:
        assert r.exit_code in (0, 1), f"{what}: review exit {r.exit_code}\n{r.output}"
        if r.exit_code == 1:
            verdict = [ln for ln in r.output.splitlines()
                       if ln.split(":")[0] in ("fail", "hack-suspected", "impossible", "sandbox-violation")]
            assert verdict and len(verdict[-1]) > 12, f"{what}: no verdict line\n{r.output}"
        assert (out / "review.json").is_file()
    assert snapshot(root, skip=out) == before, f"{what}: the review wrote outside its output directory"
    return int(r.exit_code)
