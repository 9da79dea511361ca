"""A clean, preloaded process that forks sandboxed candidate runs on request.

Why not ``multiprocessing``'s forkserver: it re-imports the parent's ``__main__`` in every child
(its spawn "preparation"), which drags harness code into the candidate's process and breaks
when the parent is a script. The zygote is started as ``python -I -m nkieval.review.zygote``,
imports NumPy and the simulator once, and then, for each request line on stdin
(``{"job": DIR, "cases": [...]}``), forks a child that runs :func:`nkieval.review.child.run_cases`
in its own session. It answers ``{"pid": N}`` at once and ``{"exit": CODE}`` when the child
ends (negative CODE: killed by that signal). A fork costs milliseconds instead of the ~0.5 s an
interpreter start and imports take, and the child inherits nothing from the harness.
"""

from __future__ import annotations

import json
import os
import sys


def _serve() -> None:
    import ml_dtypes  # noqa: F401  (preload)
    import numpy  # noqa: F401

    import nkieval.frontends.nki
    import nkieval.review.child as child
    import nkieval.sim.runner  # noqa: F401

    out = sys.stdout
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        pid = os.fork()
        if pid == 0:  # the sandboxed child
            try:
                os.setsid()
                devnull = os.open(os.devnull, os.O_RDONLY)
                os.dup2(devnull, 0)
                os.close(devnull)
                child.run_cases(req["job"], [int(k) for k in req["cases"]])
            finally:
                os._exit(0)  # never run the zygote's (or the candidate's) atexit handlers
        out.write(json.dumps({"pid": pid}) + "\n")
        out.flush()
        _, status = os.waitpid(pid, 0)
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        out.write(json.dumps({"exit": code}) + "\n")
        out.flush()


if __name__ == "__main__":  # pragma: no cover - runs as its own process
    _serve()
