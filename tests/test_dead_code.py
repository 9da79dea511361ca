"""Dead code (issue #25, item 6): vulture finds functions, methods and classes of ``src/nkieval`` that nothing
in ``src``, ``tests`` or ``benchmarks`` uses, and unused arguments (100 % confidence). What it finds is compared
with an exact list of what is used dynamically, each with its reason: a new dead function fails, and so does a
listed one that is gone or used again (remove it from the list).

Not scanned: the NKI kernels that are data (built-in tasks and ports, examples, the calibration kernels: loaded by
name). Names behind registration decorators (instructions, cost rules, CLI commands, jitted kernels) are used
through their registry. Variables and attributes are not checked: dataclass fields are read through ``asdict`` and
reports, which vulture cannot see.
"""

from __future__ import annotations

from pathlib import Path

from vulture import Vulture

import nkieval

SRC = Path(nkieval.__file__).resolve().parent
ROOT = SRC.parents[1]
DECORATORS = ["@nki.jit", "@instruction", "@cost_rule", "@_recorded_view", "@click.*", "@*.command", "@*.group",
              "@app.*", "@pytest.fixture", "@property", "@cached_property", "@functools.cached_property",
              "@target_option"]
EXCLUDE = ["*/tasks/builtin/*", "*/tasks/ports/*", "*/examples/*", "*/perf/calibration/kernels.py"]

#: (module, name) -> why it stays
USED_DYNAMICALLY: dict[tuple[str, str], str] = {
    ("cli.py", "format_commands"): "click calls it to print the lazily loaded command list",
    ("frontends/__init__.py", "create_module"): "importlib's Loader protocol (the neuronxcc alias)",
    ("frontends/beta1/compiler.py", "auto_alloc"): "Beta-1 API: ncc.sbuf.auto_alloc() in user kernels",
    ("frontends/beta1/compiler.py", "log_level"): "Beta-1 API signature: enable_stack_allocator(log_level=)",
    ("frontends/beta1/language.py", "default_bool"): "to do: _make_binary's unused argument",
    ("frontends/beta1/language.py", "loop_indices"): "Beta-1 API signature: nl.loop_reduce(x, op, loop_indices)",
    ("frontends/beta1/tensor.py", "assert_shape"): "Beta-1 API: tensor.assert_shape() in user kernels",
    ("frontends/compat.py", "pytest_runtest_makereport"): "a pytest hook of the compat run's plugin",
    ("frontends/compat.py", "pytest_runtest_logreport"): "a pytest hook of the compat run's plugin",
    ("frontends/compat.py", "pytest_collectreport"): "a pytest hook of the compat run's plugin",
    ("pytest_plugin.py", "pytest_addoption"): "a pytest hook (entry point pytest11)",
    ("pytest_plugin.py", "pytest_configure"): "a pytest hook (entry point pytest11)",
    ("review/__init__.py", "__getattr__"): "the module's lazy attributes (PEP 562)",
    ("reward/__init__.py", "__getattr__"): "the module's lazy attributes (PEP 562)",
    ("tasks/audit/importers.py", "high"): "torch.randint's signature, mimicked for imported tests",
}


def _unused() -> dict[tuple[str, str], str]:
    v = Vulture(ignore_decorators=DECORATORS)
    v.scavenge([str(SRC), str(ROOT / "tests"), str(ROOT / "benchmarks")], exclude=EXCLUDE)
    out = {}
    for item in v.get_unused_code(min_confidence=60):
        path = Path(item.filename).resolve()
        if SRC not in path.parents or not (item.typ in ("function", "method", "class") or item.confidence == 100):
            continue
        out[(path.relative_to(SRC).as_posix(), item.name)] = f"{item.typ} at line {item.first_lineno}"
    return out


def test_no_dead_functions_beyond_the_listed_dynamic_uses():
    found = _unused()
    assert found.keys() == USED_DYNAMICALLY.keys(), {
        "unused (remove, or list with the reason it stays)": {k: v for k, v in found.items()
                                                             if k not in USED_DYNAMICALLY},
        "listed but no longer found (remove from the list)": [k for k in USED_DYNAMICALLY if k not in found]}
