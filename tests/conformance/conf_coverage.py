"""Generated coverage listing: which ``nki.isa`` / ``nki.language`` API names have conformance cases.

The API lists come from the front ends themselves (``__all__``), the covered names from the
case tables, so the listing cannot drift from either. Run as a script to print it:

    .venv/bin/python tests/conformance/conf_coverage.py
"""

from __future__ import annotations

import enum
import os
import sys
from collections import defaultdict
from typing import Any

if __name__ == "__main__":  # standalone: make the shim and sibling modules importable
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from nkieval import frontends

    frontends.install()

import nki.isa as nisa
import nki.language as nl

from nkieval.sim.dtypes import DType
from nkieval.sim.memory import Buffer


def api_names() -> dict[str, list[str]]:
    """Public callables of each namespace (dtypes, buffers and enums are data, not calls)."""
    isa = [n for n in nisa.__all__ if callable(getattr(nisa, n)) and not isinstance(getattr(nisa, n), type)]
    lang = []
    for n in nl.__all__:
        obj = getattr(nl, n)
        if isinstance(obj, DType | Buffer) or n in NL_TYPES:
            continue
        if callable(obj) or n == "tile_size":
            lang.append(n)
    return {"nisa": sorted(isa), "nl": sorted(lang), "tensor": tensor_methods()}


#: ``nki.language`` classes that are not calls: ``NKIObject`` is a base for the user's own classes, the
#: grid types are what ``nl.tiles`` / ``nl.blocks`` / ``nl.alloc_tiles`` / ``nl.alloc_blocks`` return
#: (exercised through those calls' cases)
NL_TYPES = {"NKIObject", "NkiGrid", "NkiTileGrid", "NkiBlockGrid"}

#: current-API names the front end refuses on purpose (with an error saying why): no legal case is expected,
#: an illegal one is
REFUSED = {"nl.gather_flattened"}  # removed in NKI 0.2; the error names its replacement


#: NkiTensor members that are nkieval internals, not NKI API
_TENSOR_INTERNAL = {"access", "numpy"}


def tensor_methods() -> list[str]:
    """Public view/query methods of ``NkiTensor`` (listed as ``tensor.<name>``)."""
    from nkieval.sim.tensor import NkiTensor

    return sorted(n for n, v in vars(NkiTensor).items()
                  if not n.startswith("_") and callable(v) and n not in _TENSOR_INTERNAL)


def beta1_api_names() -> dict[str, list[str]]:
    """Public callables of ``neuronxcc.nki.language`` / ``.isa`` (the Beta-1 front end), less what it refuses
    on purpose (``BETA1_REFUSED``), plus the ``nki.compiler`` direct allocators and ``nt.mutable_tensor``."""
    import neuronxcc.nki.isa as b1isa  # type: ignore[import-not-found]
    import neuronxcc.nki.language as b1nl  # type: ignore[import-not-found]

    def calls(mod: Any, extra: tuple[str, ...] = ()) -> list[str]:
        out = []
        for n in mod.__all__:
            obj = getattr(mod, n)
            if isinstance(obj, DType | Buffer) or f"{mod.__name__.split('.')[-1]}.{n}" in BETA1_REFUSED:
                continue
            if (callable(obj) and not (isinstance(obj, type) and issubclass(obj, enum.Enum))) or n in extra:
                out.append(n)
        return sorted(out)

    isa = [n for n in calls(b1isa) if not isinstance(getattr(b1isa, n), type)]
    return {"nl": calls(b1nl, ("tile_size",)), "nisa": isa,
            "ncc": ["psum.alloc", "psum.mod_alloc", "sbuf.alloc", "sbuf.mod_alloc"], "nt": ["mutable_tensor"]}


#: Beta-1 names the front end refuses on purpose (with an error saying why), so no legal case is expected
BETA1_REFUSED = {"isa.builtin_custom_op"}


def _tally(names: dict[str, list[str]], legal: list[Any], illegal: list[Any],
           frontend: str | None = None) -> dict[str, Any]:
    """Count the legal and illegal rows per API name; rows naming an unknown API are listed apart."""
    table: dict[str, dict[str, dict[str, Any]]] = {
        ns: {n: {"legal": 0, "illegal": 0, "frontends": set()} for n in lst} for ns, lst in names.items()}
    unknown: set[str] = set()
    counts: dict[str, int] = defaultdict(int)
    for kind, cases in (("legal", legal), ("illegal", illegal)):
        for c in cases:
            ns, _, name = c.api.partition(".")
            entry = table.get(ns, {}).get(name)
            if entry is None:
                unknown.add(c.api)
                continue
            entry[kind] += 1
            entry["frontends"].add(frontend or c.frontend)
            counts[kind] += 1
    return {**table, "unknown": sorted(unknown), "counts": dict(counts)}


def beta1_coverage() -> dict[str, Any]:
    from conf_cases_beta1 import CASES as B1_CASES
    from conf_cases_beta1 import ILLEGAL as B1_ILLEGAL

    return _tally(beta1_api_names(), B1_CASES, B1_ILLEGAL, frontend="beta1")


def coverage() -> dict[str, Any]:
    from conf_cases_isa import CASES as ISA_CASES
    from conf_cases_isa import ILLEGAL as ISA_ILLEGAL
    from conf_cases_language import CASES as NL_CASES
    from conf_cases_language import ILLEGAL as NL_ILLEGAL
    from conf_cases_views import CASES as VIEW_CASES
    from conf_cases_views import ILLEGAL as VIEW_ILLEGAL

    return _tally(api_names(), ISA_CASES + NL_CASES + VIEW_CASES, ISA_ILLEGAL + NL_ILLEGAL + VIEW_ILLEGAL)


def format_listing(cov: dict[str, Any], namespaces: tuple[str, ...] = ("nisa", "nl", "tensor"),
                   title: str = "", refused: frozenset[str] | set[str] = frozenset()) -> str:
    lines = [title] if title else []
    for ns in namespaces:
        entries = cov[ns]
        done = [n for n, e in entries.items() if e["legal"]]
        n_refused = sum(f"{ns}.{n}" in refused for n in entries)
        lines.append(f"{ns}: {len(done)}/{len(entries)} API names have legal cases"
                     + (f", {n_refused} refused on purpose (illegal cases only)" if n_refused else ""))
        for n, e in entries.items():
            mark = "ok " if e["legal"] else "ref " if f"{ns}.{n}" in refused else "-- "
            fe = ",".join(sorted(e["frontends"])) or "-"
            lines.append(f"  {mark}{ns}.{n:<28} legal={e['legal']:<3} illegal={e['illegal']:<3} front ends={fe}")
    if cov["unknown"]:
        lines.append(f"unknown API names in tables: {cov['unknown']}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(format_listing(coverage(), refused=REFUSED))
    print()
    print(format_listing(beta1_coverage(), ("nisa", "nl", "ncc", "nt"), "Beta 1 (neuronxcc.nki):"))
