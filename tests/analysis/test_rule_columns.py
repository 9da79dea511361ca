"""Findings point at the offending expression: ``col`` is 1-based (``Finding``'s contract), so an expression at
0-based column c is reported at c + 1 (issue #25, item 5: ``+ 1`` → ``| 1`` survived where every test put the
expression at an even column). Each case here puts it at an odd one."""

from __future__ import annotations

import pytest

from nkieval.analysis import analyze_nki

HEAD = "import nki\nimport nki.language as nl\nimport numpy as np\n\n\n@nki.jit\ndef k(a):\n"


@pytest.mark.parametrize("line,col", [
    ("    y = (np.load('f.npy'))\n", 10),  # a forbidden call: `np.load(` starts at 0-based column 9
    ("    y = (a.__dict__)\n", 10),  # interpreter internals through an attribute: `a.__dict__` at 9
    ("    y = (__builtins__)\n", 10),  # ... through a name at 9
])
def test_nki041_reports_the_1_based_column_of_the_expression(line, col):
    found = [f for f in analyze_nki(HEAD + line + "    return a\n", "k.py", target="trn2") if f.rule == "NKI041"]
    assert [(f.line, f.col) for f in found] == [(8, col)], found
