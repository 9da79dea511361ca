"""Data flows one way: ``nkieval.reward`` uses the review; nothing below it imports ``nkieval.reward``."""

import ast
from pathlib import Path

import nkieval

SRC = Path(nkieval.__file__).resolve().parent
BELOW = ("review", "sim", "tasks", "perf", "numerics", "analysis", "hardware", "frontends")


def test_nothing_below_reward_imports_it():
    bad = []
    for pkg in BELOW:
        for f in (SRC / pkg).rglob("*.py"):
            for node in ast.walk(ast.parse(f.read_text(), str(f))):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                bad += [f"{f.relative_to(SRC)}: {n}" for n in names if n.startswith("nkieval.reward")]
    assert not bad, bad
