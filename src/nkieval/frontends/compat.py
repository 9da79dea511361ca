"""Compatibility report: run a directory of NKI kernels/tests written for the reference simulator.

``nkieval compat PATH`` finds the ``.py`` files under PATH that import NKI (``neuronxcc.nki`` =
Beta 1, ``nki`` = current API), runs each in its own subprocess with nkieval's import shim
(as the public harnesses alias modules), and reports per file: ran / passed / failed, the
first error, and who is to blame:

* ``nkieval``     — an API nkieval lacks (AttributeError/ImportError on an NKI module,
  ``NotImplementedError``) or a crash (non-validation exception) inside nkieval's code;
* ``kernel``      — the kernel broke an NKI rule (its own ``NkiValidationError``);
* ``assertion``   — a test's own check failed (numerical mismatch or test logic);
* ``environment`` — a missing third-party package or file (torch, jax, test data …);
* ``timeout``.

How a file runs: pytest files (``test_*.py`` / ``*_test.py``) under pytest (one report per
test); files with a ``__main__`` block as scripts; other files are imported (kernel modules:
checks that decorators and module-level NKI code load).
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

_NKIEVAL_DIR = str(Path(__file__).resolve().parents[1]) + os.sep
_NKI_ROOTS = ("nki", "neuronxcc")
BLAMES = ("nkieval", "kernel", "assertion", "environment", "timeout")


@dataclass
class FileResult:
    """What happened to one file."""

    path: str
    generation: str  # beta1 | current | mixed
    kind: str  # pytest | script | import
    status: str  # passed | failed | error | imported | skipped | timeout
    tests: dict[str, int] = field(default_factory=dict)  # outcome -> count (pytest files)
    blame: str | None = None
    error: str | None = None  # first error, one line
    seconds: float = 0.0
    blames: dict[str, int] = field(default_factory=dict)  # per failing test (pytest files)


# -- discovery ------------------------------------------------------------------------------------------
def nki_generation(source: str) -> str | None:
    """``beta1`` if the file imports ``neuronxcc.nki``, ``current`` if it imports ``nki``, else None."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return "unparsable"
    b1 = cur = False
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for n in names:
            if n == "neuronxcc.nki" or n.startswith("neuronxcc.nki."):
                b1 = True
            elif n == "nki" or n.startswith("nki."):
                cur = True
            elif n == "neuronxcc" and isinstance(node, ast.ImportFrom):
                b1 = b1 or any(a.name == "nki" for a in node.names)
    if b1 and cur:
        return "mixed"
    return "beta1" if b1 else "current" if cur else None


def file_kind(path: Path, source: str) -> str:
    name = path.name
    if name.startswith("test_") or name.endswith("_test.py"):
        return "pytest"
    if "__main__" in source and "if __name__" in source:
        return "script"
    return "import"


def discover(root: Path) -> list[tuple[Path, str, str]]:
    """(file, generation, kind) for every NKI-importing Python file under ``root``."""
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)
    found = []
    for p in files:
        try:
            src = p.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        gen = nki_generation(src)
        if gen is None:
            continue
        found.append((p, gen, "error" if gen == "unparsable" else file_kind(p, src)))
    return found


def python_paths(root: Path, file: Path) -> list[str]:
    """Import roots as the public harnesses set them: the file's directory, ``src/`` dirs, the root."""
    paths = [str(file.parent)]
    base = root if root.is_dir() else root.parent
    ups = [a / "src" for a in list(base.parents)[:3]]  # PATH may be a sub-directory of a repository
    for cand in (base / "src", base, *[d / "src" for d in base.iterdir() if d.is_dir()], *ups):
        if cand.is_dir() and str(cand) not in paths:
            paths.append(str(cand))
    return paths


# -- classification -------------------------------------------------------------------------------------
def classify(exc: BaseException) -> str:
    """Who is to blame for ``exc`` (see module docstring)."""
    from nkieval.sim.errors import NkiValidationError

    if isinstance(exc, NkiValidationError) and not _is_mode_error(exc) and exc.rule != "unsupported":
        return "kernel"
    if isinstance(exc, NotImplementedError) or _is_mode_error(exc):
        return "nkieval"
    if isinstance(exc, ImportError):
        mod = (getattr(exc, "name", None) or "").split(".")[0]
        if mod in _NKI_ROOTS or "nkieval" in str(exc):
            return "nkieval"
        return "environment"
    if isinstance(exc, AttributeError) and "nkieval.frontends" in str(exc):
        return "nkieval"
    if isinstance(exc, FileNotFoundError) or type(exc).__name__ == "FixtureLookupError":
        return "environment"
    if _crashed_in_nkieval(exc):
        return "nkieval"
    if isinstance(exc, AssertionError):
        return "assertion"
    return "kernel"


def _is_mode_error(exc: BaseException) -> bool:
    return type(exc).__name__ == "Beta1ModeError"


def _crashed_in_nkieval(exc: BaseException) -> bool:
    """Did the exception escape from nkieval's code (deeper than any frame of the kernel or test)?

    Library frames (numpy, the standard library) below nkieval's still count as nkieval's crash."""
    tb = exc.__traceback__
    last_ours = last_user = -1
    i = 0
    while tb is not None:
        fn = tb.tb_frame.f_code.co_filename
        if fn.startswith(_NKIEVAL_DIR):
            last_ours = i
        elif not _is_library(fn):
            last_user = i
        tb = tb.tb_next
        i += 1
    return last_ours > last_user


def _is_library(filename: str) -> bool:
    return "site-packages" in filename or filename.startswith((sys.prefix, sys.base_prefix, "<"))


def one_line(exc: BaseException) -> str:
    msg = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {msg[0] if msg else ''}"
    tb = traceback.extract_tb(exc.__traceback__)
    if tb:
        fr = tb[-1]
        text += f" [{os.path.basename(fr.filename)}:{fr.lineno}]"
    return text[:400]


# -- the child process ----------------------------------------------------------------------------------
def _child(path: str, kind: str, out: str, paths: list[str]) -> None:
    """Run one file under the shim and write a JSON result to ``out``."""
    import runpy
    import warnings

    warnings.simplefilter("ignore")
    os.environ.setdefault("NKI_SIMULATOR", "1")
    for p in reversed(paths):
        sys.path.insert(0, p)
    from nkieval import frontends

    frontends.install(force=True)
    res: dict[str, Any] = {"tests": {}, "blames": {}, "error": None, "blame": None}

    def fail(exc: BaseException) -> None:
        if res["error"] is None:
            res["error"], res["blame"] = one_line(exc), classify(exc)

    if kind == "pytest":
        import pytest

        class Collector:
            def pytest_runtest_makereport(self, item: Any, call: Any) -> None:
                if call.excinfo is not None and call.when in ("setup", "call") and \
                        not call.excinfo.errisinstance(pytest.skip.Exception):
                    b = classify(call.excinfo.value)
                    res["blames"][b] = res["blames"].get(b, 0) + 1
                    fail(call.excinfo.value)

            def pytest_runtest_logreport(self, report: Any) -> None:
                if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
                    res["tests"][report.outcome] = res["tests"].get(report.outcome, 0) + 1

            def pytest_collectreport(self, report: Any) -> None:
                if report.failed:
                    res["tests"]["collect_error"] = res["tests"].get("collect_error", 0) + 1
                    if res["error"] is None:
                        res["error"] = str(report.longrepr).strip().splitlines()[-1][:400]
                        res["blame"] = _blame_text(res["error"])

        root = os.environ.get("NKIEVAL_COMPAT_ROOT") or os.path.dirname(path)
        code = pytest.main([path, "-q", "-p", "no:cacheprovider", "-c", os.devnull, "--rootdir", root,
                            "--confcutdir", root], plugins=[Collector()])
        res["exit"] = int(code)
    else:
        try:
            module = _package_module(path) if kind == "import" else None
            if module is not None:  # inside a package: import it as the package's module (relative imports)
                import importlib

                sys.path.insert(0, module[0])
                importlib.import_module(module[1])
            else:
                sys.argv = [path]  # the script's own command line (no arguments), not the compat child's
                runpy.run_path(path, run_name="__main__" if kind == "script" else "compat_import")
        except SystemExit as e:
            if e.code not in (0, None):
                res["error"] = f"SystemExit: {e.code}"
                res["blame"] = "environment"
        except BaseException as e:
            fail(e)
    with open(out, "w") as f:
        json.dump(res, f)


def _package_module(path: str) -> tuple[str, str] | None:
    """(import root, dotted module name) for a file inside a package (directories with __init__.py)."""
    p = Path(path).resolve()
    parts = [p.stem]
    d = p.parent
    while (d / "__init__.py").exists():
        parts.insert(0, d.name)
        d = d.parent
    return (str(d), ".".join(parts)) if len(parts) > 1 else None


def _blame_text(text: str) -> str:
    """Blame from an error *text* (collection errors reach us only as text)."""
    t = text
    if "NkiValidationError" in t:
        return "kernel"
    if "NotImplementedError" in t or "Beta1Unsupported" in t or "nkieval.frontends" in t:
        return "nkieval"
    if "ModuleNotFoundError" in t or "ImportError" in t:
        return "nkieval" if any(f"'{r}'" in t or f"'{r}." in t for r in _NKI_ROOTS) else "environment"
    return "environment"


# -- the parent ---------------------------------------------------------------------------------------------
def run_file(root: Path, file: Path, gen: str, kind: str, timeout: float) -> FileResult:
    rel = str(file.relative_to(root)) if root.is_dir() else file.name
    if kind == "error":
        return FileResult(rel, gen, "import", "error", blame="kernel", error="SyntaxError: file does not parse")
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="nkieval-compat-") as tmp:
        out = os.path.join(tmp, "result.json")
        cmd = [sys.executable, "-m", "nkieval.frontends.compat", "--child", str(file), kind, out,
               os.pathsep.join(python_paths(root, file))]
        env = dict(os.environ)
        env["MPLBACKEND"] = "Agg"
        env["NKIEVAL_COMPAT_ROOT"] = str(root if root.is_dir() else root.parent)
        try:
            proc = subprocess.run(cmd, cwd=str(file.parent), capture_output=True, text=True, timeout=timeout,
                                  env=env)
        except subprocess.TimeoutExpired:
            return FileResult(rel, gen, kind, "timeout", blame="timeout", error=f"no result after {timeout:.0f} s",
                              seconds=time.perf_counter() - t0)
        secs = time.perf_counter() - t0
        if not os.path.exists(out):
            tail = (proc.stderr or proc.stdout).strip().splitlines()
            return FileResult(rel, gen, kind, "error", blame="nkieval", seconds=secs,
                              error=f"runner died (exit {proc.returncode}): {tail[-1] if tail else ''}"[:400])
        with open(out) as f:
            res = json.load(f)
    tests = {k: int(v) for k, v in res.get("tests", {}).items()}
    if kind == "pytest":
        bad = tests.get("failed", 0) + tests.get("collect_error", 0)
        if bad:
            status = "failed"
        elif tests.get("passed", 0):
            status = "passed"
        elif res.get("exit", 0) not in (0, 5):
            status = "error"
        else:
            status = "skipped"
    else:
        status = "failed" if res.get("error") else ("passed" if kind == "script" else "imported")
    return FileResult(rel, gen, kind, status, tests, res.get("blame") if status in ("failed", "error") else None,
                      res.get("error") if status in ("failed", "error") else None, secs, res.get("blames", {}))


def run_compat(root: Path, timeout: float = 120.0, jobs: int | None = None,
               files: Iterable[tuple[Path, str, str]] | None = None) -> list[FileResult]:
    found = list(files) if files is not None else discover(root)
    jobs = jobs or max(1, (os.cpu_count() or 2) // 2)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(lambda f: run_file(root, f[0], f[1], f[2], timeout), found))


def summary(results: list[FileResult]) -> dict[str, Any]:
    by_gen: dict[str, Counter[str]] = {}
    blame: Counter[str] = Counter()
    tests: Counter[str] = Counter()
    for r in results:
        by_gen.setdefault(r.generation, Counter())[r.status] += 1
        if r.blame:
            blame[r.blame] += 1
        tests.update(r.tests)
    return {"files": len(results), "by_generation": {g: dict(c) for g, c in sorted(by_gen.items())},
            "blame": dict(blame), "tests": dict(tests)}


def format_report(results: list[FileResult]) -> str:
    lines = []
    w = max([len(r.path) for r in results] + [4])
    for r in results:
        t = " ".join(f"{k}={v}" for k, v in sorted(r.tests.items()))
        head = f"{r.status.upper():<8} {r.generation:<7} {r.kind:<6} {r.path:<{w}}  {t}"
        lines.append(head.rstrip())
        if r.error:
            lines.append(f"         [{r.blame}] {r.error}")
    s = summary(results)
    lines.append("")
    lines.append(f"{s['files']} files")
    for g, c in s["by_generation"].items():
        lines.append(f"  {g:<10} " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
    if s["blame"]:
        lines.append("  blame      " + ", ".join(f"{k} {v}" for k, v in sorted(s["blame"].items())))
    if s["tests"]:
        lines.append("  tests      " + ", ".join(f"{k} {v}" for k, v in sorted(s["tests"].items())))
    return "\n".join(lines)


def to_json(results: list[FileResult]) -> dict[str, Any]:
    return {"summary": summary(results), "files": [asdict(r) for r in results]}


if __name__ == "__main__":  # pragma: no cover - the child process entry
    if len(sys.argv) == 6 and sys.argv[1] == "--child":
        _child(sys.argv[2], sys.argv[3], sys.argv[4], [p for p in sys.argv[5].split(os.pathsep) if p])
    else:
        sys.exit("usage: python -m nkieval.frontends.compat --child FILE KIND OUT PATHS")
