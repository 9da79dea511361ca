"""The candidate kernel in a model's response: the fenced code block that defines the task's entry point.

A policy answers in Markdown: prose, perhaps a ``<think>`` section, one or several fenced blocks (a
first draft, a test, the final kernel). :func:`extract_kernel` takes the **last** block that defines
``def <entry>`` (the task's ``kernel`` name), the model's final answer; a block left open at the end
(a truncated generation) counts as a block. A response with no fence that parses as Python and
defines the entry point is taken whole (a bare source file). Anything else is "no kernel found":
the candidate's fault, reward 0, never an exception.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

#: Languages a fenced block may declare and still be taken as Python (an empty tag counts).
PYTHON_TAGS = frozenset({"", "python", "python3", "py", "nki", "py3"})

_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([A-Za-z0-9_+.-]*)[^\n]*$", re.MULTILINE)
_THINK = re.compile(r"<think>.*?(</think>|\Z)", re.DOTALL | re.IGNORECASE)


@dataclass(frozen=True)
class Extraction:
    """What :func:`extract_kernel` found: the source (None: no kernel) and why this one."""

    source: str | None
    reason: str
    blocks: int

    @property
    def found(self) -> bool:
        return self.source is not None


def code_blocks(text: str) -> list[tuple[str, str]]:
    """The fenced blocks of ``text`` in order, as (language tag, body); an unclosed last block runs to the end."""
    out: list[tuple[str, str]] = []
    pos = 0
    while True:
        m = _FENCE.search(text, pos)
        if m is None:
            return out
        fence, tag = m.group(1), m.group(2).lower()
        body_start = m.end() + 1
        close = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.MULTILINE)
        c = close.search(text, body_start)
        if c is None:
            out.append((tag, text[body_start:]))
            return out
        out.append((tag, text[body_start:c.start()]))
        pos = c.end()


def defines(source: str, entry: str) -> bool:
    """Whether ``source`` defines a top-level function (or assigns a name) ``entry``; a syntax error is
    judged by the text (``def entry(``), so a kernel with a typo is still the candidate, and its
    review says where the syntax error is."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # (deep nesting: a parser limit, not ours)
        return re.search(rf"^\s*(async\s+)?def\s+{re.escape(entry)}\s*\(", source, re.MULTILINE) is not None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == entry:
            return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == entry for t in node.targets):
            return True
    return False


def extract_kernel(response: str, entry: str) -> Extraction:
    """The kernel source in ``response`` (a model's answer or a bare source file) for entry point ``entry``."""
    if not isinstance(response, str):
        return Extraction(None, f"the response is {type(response).__name__}, not text", 0)
    text = _THINK.sub("", response)
    blocks = [(tag, body) for tag, body in code_blocks(text) if tag in PYTHON_TAGS]
    if blocks:
        hits = [body for _, body in blocks if defines(body, entry)]
        if hits:
            why = "the only fenced block" if len(blocks) == 1 else \
                f"the last of {len(hits)} fenced block(s) defining {entry}() (of {len(blocks)})"
            return Extraction(hits[-1].strip("\n") + "\n", why, len(blocks))
        return Extraction(None, f"no kernel found: none of the {len(blocks)} fenced Python block(s) defines "
                                f"{entry}()", len(blocks))
    if "```" not in text and "~~~" not in text and defines(text, entry):
        try:
            ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return Extraction(None, f"no kernel found: no fenced code block, and the text is not Python "
                                    f"defining {entry}()", 0)
        return Extraction(text, "the whole response (Python source, no fences)", 0)
    return Extraction(None, f"no kernel found: no fenced code block defines {entry}()", 0)
