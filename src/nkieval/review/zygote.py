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


def _warm_up() -> None:
    """Pay once, here, for what every forked child would otherwise pay on its first case: lazy
    imports (``numpy.random``, ~50 ms), the target TOMLs, the simulator's first-call caches.
    Runs a three-instruction kernel of its own; never fails the zygote's start."""
    try:
        import numpy as np
        import numpy.random

        import nkieval.frontends.nki.isa as nisa
        import nkieval.frontends.nki.language as nl
        from nkieval.hardware import targets
        from nkieval.sim.options import SimOptions
        from nkieval.sim.runner import run_kernel

        targets.all_targets()

        def kernel(a):  # type: ignore[no-untyped-def]
            t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=a)
            nisa.tensor_tensor(dst=t, data1=t, data2=t, op=nl.add)
            out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
            nisa.dma_copy(dst=out, src=t)
            return out

        res = run_kernel(kernel, [np.ones((4, 8), np.float32)], {}, target="trn2",
                         options=SimOptions.from_env(max_instructions=100))
        res.trace.to_json()
    except Exception:  # a warm-up only: the children import and run everything themselves anyway
        pass


def _serve() -> None:
    import ml_dtypes  # noqa: F401  (preload)
    import numpy  # noqa: F401

    import nkieval.frontends.nki
    import nkieval.review.child as child
    import nkieval.sim.runner  # noqa: F401
    _warm_up()

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
