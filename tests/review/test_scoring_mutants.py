"""Tests written to kill mutants of the review's integrity scan and verdict (issue #25, item 5;
benchmarks/mutation.py). Each states its expectation from the specification, not from the code."""

from __future__ import annotations

import pytest

from nkieval.review.integrity import scan
from nkieval.review.verdict import EXIT_FAIL, EXIT_HARNESS, EXIT_PASS, exit_code

# Everything a kernel must not import, from what a candidate may not reach
# (the process, the file system, the network, the interpreter's internals, nkieval and the task's reference):
# removing any one of them from the scan's list must fail this test.
MUST_BE_FORBIDDEN = ["os", "sys", "subprocess", "socket", "ctypes", "importlib", "builtins", "gc", "inspect",
                     "pickle", "marshal", "shutil", "pathlib", "multiprocessing", "threading", "signal", "resource",
                     "nkieval", "reference", "runpy", "tempfile", "io", "urllib", "http", "requests"]


@pytest.mark.parametrize("module", MUST_BE_FORBIDDEN)
@pytest.mark.parametrize("form", ["import {m}\n", "import {m}.x as y\n", "from {m} import z\n"])
def test_each_forbidden_module_is_refused_in_every_import_form(module, form):
    (issue,) = scan(form.format(m=module) + "def k(a):\n    return a\n")
    assert issue.kind == "forbidden" and module in issue.what and issue.line == 1


@pytest.mark.parametrize("module", ["numpy", "math", "nki", "functools", "itertools", "operator", "dataclasses"])
def test_modules_a_kernel_may_use_are_not_refused(module):
    assert scan(f"import {module}\ndef k(a):\n    return a\n") == []


@pytest.mark.parametrize("call", ["open", "exec", "eval", "compile", "__import__", "globals", "breakpoint",
                                  "setattr", "delattr", "vars"])
def test_each_forbidden_call_is_refused(call):
    issues = scan(f"def k(a):\n    x = 1\n    return {call}(a)\n")
    assert [i.line for i in issues if call in i.what] == [3], issues


def test_dunder_attributes_are_refused_except_the_three_harmless_ones():
    assert [i.what for i in scan("def k(a):\n    return a.__class__\n")] == [
        "touches the dunder attribute __class__"]
    for ok in ("__name__", "__doc__", "__init__"):
        assert scan(f"def k(a):\n    return a.{ok}\n") == [], ok


def test_a_relative_import_is_refused():
    (issue,) = scan("from . import helper\ndef k(a):\n    return a\n")
    assert issue.what == "uses a relative import"


def test_exit_codes_of_every_verdict():
    """README: 0 pass, 1 not passed (every other reviewed verdict), 3 harness error."""
    assert exit_code("pass") == EXIT_PASS == 0
    for v in ("fail", "hack-suspected", "impossible", "sandbox-violation"):
        assert exit_code(v) == EXIT_FAIL == 1, v
    for v in ("harness-error", "infra-error"):
        assert exit_code(v) == EXIT_HARNESS == 3, v
