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


def _crit(cid: str, weight: float, level: int | None):
    from nkieval.review.model import CriterionResult

    return CriterionResult(cid, cid, weight, "pass" if level == 4 else "partial", level, "")


def test_score_is_the_weighted_mean_level_of_the_assessed_criteria():
    """By hand: weights 30 at level 4, 20 at level 2, 10 at level 1 and one not assessed:
    100 * (30 * 4/4 + 20 * 2/4 + 10 * 1/4) / 60 = 100 * 42.5 / 60 = 70.8333..."""
    from nkieval.review.scoring import total_score

    crits = [_crit("a", 30, 4), _crit("b", 20, 2), _crit("c", 10, 1), _crit("d", 40, None)]
    assert total_score(crits, "pass") == pytest.approx(100 * 42.5 / 60)
    assert total_score([_crit("a", 30, 4)], "fail") == 100.0
    assert total_score([_crit("a", 30, 0), _crit("b", 10, 0)], "fail") == 0.0


@pytest.mark.parametrize("verdict", ["hack-suspected", "impossible", "sandbox-violation", "harness-error"])
def test_integrity_and_harness_verdicts_score_zero_and_zero_every_level(verdict):
    from nkieval.review.scoring import total_score

    crits = [_crit("a", 30, 4), _crit("b", 20, 3), _crit("c", 5, None)]
    assert total_score(crits, verdict, "why") == 0.0
    assert [c.level for c in crits] == [0, 0, None]
    assert all(c.capped_by == f"verdict {verdict}: why" for c in crits[:2])


@pytest.mark.parametrize(("level", "word"), [(4, "pass"), (3, "partial"), (2, "partial"), (1, "fail"), (0, "fail")])
def test_level_words(level, word):
    """The rubric's words: 4 pass, 2-3 partial, 0-1 fail."""
    from nkieval.review.scoring import _verdict

    assert _verdict(level) == word


@pytest.mark.parametrize(("rel", "names"), [(2.0**-8, "bf16"), (2.0**-11, "fp16/tf32"), (2.0**-20, None), (0.7, None)])
def test_precision_hint_names_the_format_whose_precision_the_error_matches(rel, names):
    """bf16 keeps 8 significand bits (relative error ~2^-8), fp16 and tf32 11 (~2^-11); 2^-20 is fp32-ish and a
    relative error of 0.7 is a wrong value, not a precision problem."""
    from nkieval.review.scoring import _precision_hint

    hint = _precision_hint({"got": 1.0 + rel, "expected": 1.0})
    if names is None:
        assert "the precision of" not in hint
    else:
        assert f"the precision of {names}" in hint, hint
