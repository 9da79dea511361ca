"""Bad usage of every command is exit 2 with a message naming the option, never a traceback (issue #25)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from nkieval.cli import main
from nkieval.tasks import BUILTIN_ROOT

SOLUTION = str(BUILTIN_ROOT / "vector_add" / "solution_nki.py")
KERNEL = SOLUTION + "::vector_add"


@pytest.mark.parametrize("args,message", [
    (["lint", SOLUTION, "--target", "trn9"], "unknown target 'trn9'"),
    (["demo", "--target", "trn9"], "unknown target 'trn9'"),
    (["profile", KERNEL, "--target", "trn9", "--input", "256", "--input", "256"], "unknown target 'trn9'"),
    (["profile", KERNEL, "--input", "256", "--input", "256", "--trace", "/nonexistent-dir/t.json"],
     "directory /nonexistent-dir does not exist"),
    (["profile", KERNEL, "--input", "256", "--input", "256", "--json", "/nonexistent-dir/e.json"],
     "directory /nonexistent-dir does not exist"),
    (["profile", KERNEL, "--input", "100000x100000", "--input", "100000x100000"], "the inputs need 74.5 GiB"),
    (["task", "check", "/nonexistent"], "neither a task directory nor a built-in task id"),
    (["review", "/nonexistent", SOLUTION], "neither a task directory nor a built-in task id"),
    (["review", "vector_add", SOLUTION, "--target", "trn9"], "unknown target 'trn9'"),
])
def test_bad_usage_is_exit_2_with_a_message(args, message):
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 2, r.output
    assert message in r.output, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)


def test_a_bad_target_in_the_environment_is_exit_2(monkeypatch):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn9")
    r = CliRunner().invoke(main, ["lint", SOLUTION])
    assert r.exit_code == 2 and "NEURON_PLATFORM_TARGET_OVERRIDE" in r.output and "trn9" in r.output, r.output


def test_a_known_target_alias_is_accepted():
    r = CliRunner().invoke(main, ["lint", SOLUTION, "--target", "gen3"])
    assert r.exit_code in (0, 1) and "unknown target" not in r.output, r.output
