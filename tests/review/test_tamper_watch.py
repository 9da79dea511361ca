"""The tracer's audit hook (``nkieval.review.tamper``): what it catches and what it leaves to the harness.

Audit hooks cannot be removed, so each scenario runs in a fresh interpreter: it writes a candidate file, installs a
:class:`TamperWatch` for it, then imports and calls the candidate, and prints the events the watch recorded. Each
runs twice: with the table of the harness's modules walked at ``install``, and as in the sandbox's worker, with it
taken ahead (``snapshot_harness_modules``, the zygote's) and modules loaded after the snapshot added at ``install``."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

DRIVER = textwrap.dedent('''
    import importlib.util, json, sys
    from nkieval.review.tamper import TamperWatch, TamperError, snapshot_harness_modules
    if sys.argv[2] == "snapshot":
        snapshot_harness_modules()
    import nkieval.sim.context as context  # (a module loaded after the snapshot, as the handler's imports are)

    cand_path = sys.argv[1]
    watch = TamperWatch(cand_path)
    watch.install()
    spec = importlib.util.spec_from_file_location("candidate", cand_path)
    mod = importlib.util.module_from_spec(spec)
    outcome = "ran"
    try:
        spec.loader.exec_module(mod)
        mod.main(context)
    except TamperError:
        outcome = "stopped"
    # the harness's own frame lookups, after the candidate: never an event
    for _ in range(3):
        context.user_frame(1)
    print(json.dumps({"outcome": outcome, "events": [e["event"] for e in watch.events],
                      "where": [e["location"] for e in watch.events]}))
''')


@pytest.fixture(autouse=True, params=["walk", "snapshot"])
def table(request, monkeypatch):
    """How the watch's table of harness modules is made (see the module's docstring)."""
    monkeypatch.setattr(sys.modules[__name__], "TABLE", request.param)


TABLE = "walk"


def _run(tmp_path: Path, candidate: str) -> dict:
    cand = tmp_path / "candidate.py"
    cand.write_text(textwrap.dedent(candidate))
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    out = subprocess.run([sys.executable, str(driver), str(cand), TABLE], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_candidate_s_own_frame_lookup_is_caught_at_its_line(tmp_path: Path) -> None:
    got = _run(tmp_path, '''
        import sys

        def main(context):
            return sys._getframe(1)
    ''')
    assert got == {"outcome": "stopped", "events": ["sys._getframe"], "where": ["candidate.py:5"]}


def test_a_candidate_function_called_back_by_the_harness_is_still_caught(tmp_path: Path) -> None:
    # ``copy.deepcopy`` (harness code: loaded before the candidate) calls the candidate's ``__deepcopy__``, whose
    # lookup returns the harness's frame: the event is still raised by the candidate's line
    got = _run(tmp_path, '''
        import copy
        import sys

        class Peek:
            def __deepcopy__(self, memo):
                return sys._getframe(1)

        def main(context):
            return copy.deepcopy(Peek())
    ''')
    assert got["outcome"] == "stopped" and got["events"] == ["sys._getframe"]
    assert got["where"] == ["candidate.py:7"]


def test_candidate_code_bound_to_the_harness_s_globals_is_caught_at_the_binding(tmp_path: Path) -> None:
    # the harness module's globals dict is reachable (``__globals__`` is not audited); running code with it is
    got = _run(tmp_path, '''
        import sys

        def main(context):
            g = context.user_frame.__globals__
            return eval("sys._getframe(0)", g)
    ''')
    assert got["outcome"] == "stopped" and got["events"] == ["compile"]


def test_a_candidate_that_claims_a_harness_file_is_still_caught(tmp_path: Path) -> None:
    # a module's ``__file__`` is the candidate's to change; its globals are not one of the harness's modules'
    got = _run(tmp_path, '''
        import sys
        import nkieval.sim.context as _c
        __file__ = _c.__file__

        def main(context):
            return sys._getframe(0)
    ''')
    assert got["outcome"] == "stopped" and got["events"] == ["sys._getframe"]


def test_the_harness_s_frame_lookups_called_from_the_candidate_are_not_events(tmp_path: Path) -> None:
    # what the simulator does for every instruction the candidate issues: look up the kernel line
    got = _run(tmp_path, '''
        def main(context):
            for _ in range(5):
                f = context.user_frame(1)
            return f
    ''')
    assert got == {"outcome": "ran", "events": [], "where": []}


@pytest.mark.parametrize("body, event", [
    ("return main.__code__", "object.__getattr__"),
    ("import types; return types.FunctionType(main.__code__, dict(vars(context)))", "object.__getattr__"),
    ("import gc; return gc.get_objects()", "gc.get_objects"),
    ("return open(__file__).read()", "open"),
])
def test_other_reaches_from_the_candidate_s_line_are_caught(tmp_path: Path, body: str, event: str) -> None:
    got = _run(tmp_path, f'''
        def main(context):
            {body}
    ''')
    assert got["outcome"] == "stopped" and got["events"] == [event]


def test_the_zygotes_snapshot_plus_what_came_after_is_the_whole_walk(monkeypatch) -> None:
    """``harness_globals`` from a snapshot equals a walk of every module loaded now: with modules loaded after the
    snapshot, with none, and (falling back to the walk) with one removed after it."""
    import types

    from nkieval.review import tamper

    monkeypatch.setattr(tamper, "_SNAPSHOT", [None])
    monkeypatch.setattr(sys, "modules", dict(sys.modules))  # (a copy this test may change)

    def walk() -> dict:
        return {id(m.__dict__): m.__dict__ for m in sys.modules.values() if isinstance(m, types.ModuleType)}

    assert tamper.harness_globals() == walk()  # (no snapshot taken)
    tamper.snapshot_harness_modules()
    assert tamper.harness_globals() == walk()
    for name in ("nkieval_test_after_a", "nkieval_test_after_b"):
        sys.modules[name] = types.ModuleType(name)
    sys.modules["nkieval_test_not_a_module"] = object()  # type: ignore[assignment]
    got = tamper.harness_globals()
    assert got == walk() and id(sys.modules["nkieval_test_after_b"].__dict__) in got
    monkeypatch.setattr(tamper, "_SNAPSHOT", [None])
    tamper.snapshot_harness_modules()
    del sys.modules[next(iter(sys.modules))]  # (the order no longer extends the snapshot's)
    sys.modules["nkieval_test_after_c"] = types.ModuleType("nkieval_test_after_c")
    got = tamper.harness_globals()
    assert got == walk() and id(sys.modules["nkieval_test_after_c"].__dict__) in got
