"""Public faces of the simulator: the current ``nki`` API and (later) legacy ``neuronxcc.nki``.

Activation is explicit: :func:`install` puts an import shim in front of ``sys.meta_path`` so
that ``import nki`` (and ``nki.language``, ``nki.isa``, ``nki.typing``) load nkieval's modules.
It refuses to shadow a real Neuron SDK that is importable unless ``force=True``.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import ModuleType

#: alias root → nkieval module implementing it
ALIASES: dict[str, str] = {
    "nki": "nkieval.frontends.nki",
    "neuronxcc": "nkieval.frontends.neuronxcc",
}


class ShadowingError(RuntimeError):
    """A real Neuron SDK module is importable; nkieval will not shadow it unless forced."""


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(self.target)

    def exec_module(self, module: ModuleType) -> None:  # already executed by import_module
        return None


class _AliasFinder(importlib.abc.MetaPathFinder):
    def __init__(self, aliases: dict[str, str]) -> None:
        self.aliases = dict(aliases)

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        for root, impl in self.aliases.items():
            if fullname == root or fullname.startswith(root + "."):
                real = impl + fullname[len(root):]
                if importlib.util.find_spec(real) is None:
                    return None
                is_pkg = hasattr(importlib.import_module(real), "__path__")
                return importlib.machinery.ModuleSpec(fullname, _AliasLoader(real), is_package=is_pkg)
        return None


_FINDER: _AliasFinder | None = None


def _real_sdk_present(root: str) -> bool:
    """Is a real (non-placeholder) package importable under ``root``? Placeholders are empty."""
    spec = importlib.util.find_spec(root.split(".")[0])
    if spec is None or not spec.submodule_search_locations:
        return False
    import os

    for loc in spec.submodule_search_locations:
        if os.path.exists(os.path.join(loc, "language.py")) or os.path.isdir(os.path.join(loc, "language")) \
                or os.path.isdir(os.path.join(loc, "nki")):
            return True
    return False


def install(force: bool = False) -> None:
    """Make ``import nki`` load nkieval's simulator front end (idempotent)."""
    global _FINDER
    if _FINDER is not None:
        return
    if not force:
        real = [r for r in ALIASES if r not in sys.modules and _real_sdk_present(r)]
        if real:
            raise ShadowingError(
                f"a real Neuron SDK package is importable as {', '.join(real)}; nkieval will not shadow it. "
                "Use install(force=True) (or NKIEVAL_FORCE_SHIM=1 with `nkieval run`) to simulate anyway.")
    _FINDER = _AliasFinder(ALIASES)
    sys.meta_path.insert(0, _FINDER)
    for root in ALIASES:
        for name in [m for m in sys.modules if m == root or m.startswith(root + ".")]:
            del sys.modules[name]


def uninstall() -> None:
    """Remove the shim and forget aliased modules."""
    global _FINDER
    if _FINDER is None:
        return
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
    for root in _FINDER.aliases:
        for name in [m for m in sys.modules if m == root or m.startswith(root + ".")]:
            del sys.modules[name]
    _FINDER = None


def installed() -> bool:
    return _FINDER is not None
