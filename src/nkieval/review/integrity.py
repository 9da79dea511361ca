"""Pre-run integrity scan of a candidate's source: the harness's own anti-reward-hacking floor.

Why here and not only in nkieval.analysis: whatever the analysis rules become, the review must
refuse candidates that reach outside the kernel, because the sandboxed child runs the
candidate in the same interpreter as the simulator that judges it (anchors-eval.md §5.9/§5.10).
The scan is deliberately small and AST-based: modules that give access to the process, the
file system or nkieval itself, and the builtins that execute or open arbitrary things.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

#: Import roots a kernel has no business with.
FORBIDDEN_MODULES = frozenset({
    "os", "sys", "subprocess", "socket", "ctypes", "importlib", "builtins", "gc", "inspect", "pickle", "marshal",
    "shutil", "pathlib", "multiprocessing", "threading", "signal", "resource", "nkieval", "reference", "runpy",
    "tempfile", "io", "urllib", "http", "requests",
})
FORBIDDEN_CALLS = frozenset({"open", "exec", "eval", "compile", "__import__", "globals", "breakpoint", "setattr",
                             "delattr", "vars"})


# Every issue the walk below can report needs one of these in the source text: a forbidden module or
# call name as a word, "__" (dunder attributes, __import__), or a relative import. Python folds
# non-ASCII identifiers to their NFKC form (full-width letters o, s name ``os``), so a source with
# any non-ASCII character is always walked.
_MAY_OFFEND = re.compile(r"\b(?:" + "|".join(sorted(FORBIDDEN_MODULES | FORBIDDEN_CALLS)) + r")\b|__|\bfrom\b[\s\\]*\.")


@dataclass(frozen=True)
class IntegrityIssue:
    line: int
    what: str
    why: str
    #: "forbidden" (a hack: verdict hack-suspected); "syntax" or "encoding" (the file is not a Python
    #: program: verdict fail, the candidate's ordinary fault). None of them is run.
    kind: str = "forbidden"


def scan(source: str) -> list[IntegrityIssue]:
    """Integrity issues in ``source`` (an unparsable file is one issue, not an exception)."""
    if "\x00" in source:
        return [IntegrityIssue(0, "the candidate is not UTF-8 text (it contains NUL bytes)", "nothing can be checked",
                               kind="encoding")]
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        return [IntegrityIssue(e.lineno or 0, f"the file does not parse: {e.msg} (line {e.lineno})",
                               "nothing can be checked", kind="syntax")]
    except (ValueError, RecursionError, MemoryError) as e:  # (a parser limit: still not a runnable program)
        return [IntegrityIssue(0, f"the file does not parse: {type(e).__name__}: {str(e)[:200]}",
                               "nothing can be checked", kind="syntax")]
    issues: list[IntegrityIssue] = []
    if source.isascii() and _MAY_OFFEND.search(source) is None:
        return issues  # (the walk would find nothing: it costs as much as the parse)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                root = a.name.split(".")[0]
                if root in FORBIDDEN_MODULES:
                    issues.append(IntegrityIssue(node.lineno, f"imports {a.name}",
                                                 "process, file-system and harness access is not allowed in a kernel"))
        elif isinstance(node, ast.ImportFrom):
            root = (node.module or "").split(".")[0]
            if node.level == 0 and root in FORBIDDEN_MODULES:
                issues.append(IntegrityIssue(node.lineno, f"imports from {node.module}",
                                             "process, file-system and harness access is not allowed in a kernel"))
            elif node.level > 0:
                issues.append(IntegrityIssue(node.lineno, "uses a relative import",
                                             "a candidate is one self-contained file"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_CALLS:
            issues.append(IntegrityIssue(node.lineno, f"calls {node.func.id}()",
                                         "dynamic code, file access and attribute patching are not allowed"))
        elif isinstance(node, ast.Attribute) and node.attr.startswith("__") and node.attr.endswith("__") and \
                node.attr not in ("__name__", "__doc__", "__init__"):
            issues.append(IntegrityIssue(node.lineno, f"touches the dunder attribute {node.attr}",
                                         "introspection can reach the harness's objects"))
    return sorted(issues, key=lambda i: i.line)
