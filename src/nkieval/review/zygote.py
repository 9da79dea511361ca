"""A clean, preloaded process that forks sandboxed candidate runs on request.

Why not ``multiprocessing``'s forkserver: it re-imports the parent's ``__main__`` in every child
(its spawn "preparation"), which drags harness code into the candidate's process and breaks
when the parent is a script. The zygote is started as ``python -I -m nkieval.review.zygote``,
imports NumPy and the simulator once, and then serves request lines on stdin
(``{"job": DIR, "cases": [...]}``): each goes to a child that runs
:func:`nkieval.review.child.run_cases` in its own session. It answers ``{"pid": N}`` at once
and ``{"pid": N, "exit": CODE}`` when that child ends (negative CODE: killed by that signal).
A fork costs milliseconds instead of the ~0.5 s an interpreter start and imports take, and
the child inherits nothing from the harness.

The child for the next request is forked ahead of time (a standby, blocked on a pipe until
its job arrives), so a request waits for no fork at all; each standby is a fresh fork of the
zygote that has run nothing, so every run still starts from the same clean state. The
preloaded objects are frozen (``gc.freeze``) before any fork: a child's garbage collections
then never walk them, which would copy their memory pages into the child one by one.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import sys
from typing import Any


def _warm_up() -> None:
    """Pay once, here, for what every forked child would otherwise pay on its first case: lazy
    imports (``numpy.random``, ~50 ms), the ``nki`` import aliases every candidate goes through,
    the target TOMLs, the simulator's first-call caches, the array-file and trace writers.
    Runs a three-instruction kernel of its own; never fails the zygote's start."""
    try:
        import importlib.util  # noqa: F401  (the child imports the candidate with it)
        import mmap  # noqa: F401  (the child maps its input files)
        import resource  # noqa: F401  (the child sets its limits with it)

        import numpy as np
        import numpy.random

        from nkieval import frontends

        frontends.install(force=True)  # what every child does first; idempotent there
        # the alias modules every candidate imports (through the finder, as a candidate does)
        import nki.isa
        import nki.language  # noqa: F401

        import nkieval.frontends.beta1.launch  # noqa: F401  (every child's _kernel_entry: ~9 ms of imports)
        from nkieval.hardware import targets
        from nkieval.review import npzio
        from nkieval.review.child import _Capture, _check_outputs, _unwritten_masks
        from nkieval.review.tracer import warm_kernel
        from nkieval.sim.options import SimOptions
        from nkieval.sim.runner import run_kernel

        targets.all_targets()

        kernel = warm_kernel

        args = list(npzio.loads(bytearray(npzio.dumps({"a": np.ones((4, 8), np.float32)}))).values())
        cap = _Capture(kernel)
        res = run_kernel(cap, args, {}, target="trn2", options=SimOptions.from_env(max_instructions=100))
        _check_outputs(cap.raw, 1, args)
        _unwritten_masks(res.trace, cap.raw)
        npzio.dumps({"out0": np.asarray(res.outputs)})
        res.trace.to_compact()
        # the executor replays recorded programs: its decoder and first-call caches too
        from nkieval.sim.program import ArgSpec, Program, record_program, replay_program

        prog = record_program(kernel, [ArgSpec((4, 8), "float32")], {}, target="trn2").program
        replay_program(Program.from_json(prog.to_json()), args, {}, target="trn2")
    except Exception:  # a warm-up only: the children import and run everything themselves anyway
        pass


def _read_probe(paths: list[str]) -> str | None:
    """The text of the harness's sealed probe input (``sandbox.SealedInput``), read the way a
    child reads its inputs (through ``/proc/<harness pid>/fd/<n>``), or None if that fails:
    then the harness writes input files instead."""
    try:
        with open(paths[0], "rb") as fh:
            return fh.read(256).decode("ascii")
    except (IndexError, OSError, UnicodeDecodeError):
        return None


def _spawn(child: Any, close: tuple[int, ...]) -> tuple[int, int]:
    """Fork a standby child now, before any job: it waits, blocked on a pipe, for its one job, so
    a request is answered without a fork on the way (the fork's milliseconds are spent between
    runs instead). Returns (pid, write end of its job pipe)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the sandboxed child, clean: it has run nothing but this
        try:
            os.close(w)
            os.setsid()
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            devnull = os.open(os.devnull, os.O_RDWR)
            os.dup2(devnull, 0)
            # not the harness's pipe: a standby outliving the zygote must not keep it open
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            os.close(devnull)
            for fd in close:  # the zygote's own wake-up pipe
                os.close(fd)
            data = b""
            while not data.endswith(b"\n"):
                chunk = os.read(r, 65536)
                if not chunk:  # the zygote is gone or shutting down: no job
                    os._exit(0)
                data += chunk
            os.close(r)
            req = json.loads(data)
            child.run_cases(req["job"], [int(k) for k in req["cases"]])
        finally:
            os._exit(0)  # never run the zygote's (or the candidate's) atexit handlers
    os.close(r)
    return pid, w


def _serve() -> None:
    import select

    import ml_dtypes  # noqa: F401  (preload)
    import numpy  # noqa: F401

    import nkieval.frontends.nki
    import nkieval.review.child as child
    import nkieval.sim.runner  # noqa: F401
    _warm_up()
    gc.collect()
    gc.freeze()  # the preloaded objects: a child's collections never walk (and copy) their pages

    out_fd = sys.stdout.fileno()

    def send(msg: dict[str, Any]) -> None:
        data = (json.dumps(msg) + "\n").encode()
        while data:
            data = data[os.write(out_fd, data):]

    # SIGCHLD wakes the select loop through this pipe; children are reaped as they end
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    standby = _spawn(child, (wake_r, wake_w))

    def reap() -> None:
        nonlocal standby
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
            if pid == standby[0]:  # died unused (killed from outside): replace it
                os.close(standby[1])
                standby = _spawn(child, (wake_r, wake_w))
            else:
                send({"pid": pid, "exit": code})

    send({"ready": True, "probe": _read_probe(sys.argv[1:2])})
    buf = b""
    while True:
        try:
            ready, _, _ = select.select([0, wake_r], [], [])
        except InterruptedError:
            continue
        if wake_r in ready:
            try:
                while os.read(wake_r, 4096):
                    pass
            except BlockingIOError:
                pass
            reap()
        if 0 not in ready:
            continue
        chunk = os.read(0, 65536)
        if not chunk:  # the harness is gone: so are we (the standby sees its pipe close and leaves)
            return
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if not line.strip():
                continue
            json.loads(line)  # a malformed request is the harness's bug: fail loudly
            while True:
                pid, w = standby
                try:
                    os.write(w, line + b"\n")
                    os.close(w)
                    break
                except OSError:  # the standby died before its job: take a fresh one
                    os.close(w)
                    standby = _spawn(child, (wake_r, wake_w))
            send({"pid": pid})
            standby = _spawn(child, (wake_r, wake_w))  # the next one, while this one runs


if __name__ == "__main__":  # pragma: no cover - runs as its own process
    _serve()
