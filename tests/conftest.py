"""Shared test setup: the `nki` import shim is active for the whole test session, and every module of the
package is imported before any test runs.

Why the imports: nkieval is a pytest plugin (``pytest --nki-sim``), so pytest rewrites the asserts of every
module of the distribution as it is first imported, with ``ast``. CPython 3.11's ``ast`` keeps its recursion
depth in interpreter-wide state, so a module imported lazily in the main thread while a review's worker thread
parses a candidate with ``ast`` can fail with "SystemError: AST constructor recursion depth mismatch" (a flaky
failure seen under load). Importing everything up front leaves no rewrite to race with a review."""

import importlib
import pkgutil
import time
from collections.abc import Callable

import pytest

import nkieval
from nkieval import frontends

frontends.install()


def _import_all() -> None:
    for mod in pkgutil.walk_packages(nkieval.__path__, "nkieval."):
        if mod.name.endswith("__main__") or ".isolation._zygote" in mod.name:
            continue
        try:
            importlib.import_module(mod.name)
        except ImportError:  # an optional extra that is not installed (its own tests skip)
            pass


_import_all()


def _fast_cpu_clock(monkeypatch: pytest.MonkeyPatch, factor: float = 5.0, step_s: float = 0.0) -> None:
    """The CUDA executor's CPU clock runs ``factor`` times as fast as the thread's CPU time (a machine that much
    slower), jumping ``step_s`` more at every reading; patched wherever the name is bound (the executor's modules,
    the package)."""
    import nkieval.cuda as cuda
    import nkieval.cuda.interp as interp
    import nkieval.cuda.resume as resume
    import nkieval.cuda.runner as runner
    import nkieval.cuda.values as values

    ahead = [0.0]

    def clock() -> float:
        ahead[0] += step_s
        return factor * time.thread_time() + ahead[0]

    for mod in (cuda, interp, resume, runner, values):
        if hasattr(mod, "executor_seconds"):
            monkeypatch.setattr(mod, "executor_seconds", clock)


@pytest.fixture(autouse=True)
def _fresh_trace_cache() -> None:
    """Each test starts without the programs earlier tests' reviews recorded (``review.cache.TRACES``): a test
    that reviews a source an earlier test reviewed meets its tracer, as a fresh process would."""
    from nkieval.review.cache import TRACES

    TRACES.clear()


@pytest.fixture
def fast_cpu_clock() -> Callable[..., None]:
    """:func:`_fast_cpu_clock`, for the tests that make the executor's machine look slower or stalled."""
    return _fast_cpu_clock
