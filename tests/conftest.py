"""Shared test setup: the `nki` import shim is active for the whole test session, and every module of the
package is imported before any test runs.

Why the imports: nkieval is a pytest plugin (``pytest --nki-sim``), so pytest rewrites the asserts of every
module of the distribution as it is first imported, with ``ast``. CPython 3.11's ``ast`` keeps its recursion
depth in interpreter-wide state, so a module imported lazily in the main thread while a review's worker thread
parses a candidate with ``ast`` can fail with "SystemError: AST constructor recursion depth mismatch" (a flaky
failure seen under load). Importing everything up front leaves no rewrite to race with a review."""

import importlib
import pkgutil

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
