"""No function in ``numerics/`` is longer than 150 lines (issue #25, item 7: the numerics files were split by job
and their longest functions with them)."""

from __future__ import annotations

import ast
from pathlib import Path

NUMERICS = Path(__file__).resolve().parents[2] / "src" / "nkieval" / "numerics"
LIMIT = 150


def test_no_numerics_function_is_over_150_lines():
    long = []
    for path in sorted(NUMERICS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = node.end_lineno - node.lineno + 1
                if n > LIMIT:
                    long.append(f"{path.name}:{node.lineno} {node.name} ({n} lines)")
    assert long == [], long
