"""The sandbox's zygote, supervisor and worker (run as ``python -I -m nkieval.review.isolation._zygote``).

Process tree, one request at a time::

    judge ──pipes── zygote Z            user+net+mount+ipc+uts namespaces, read-only /, non-dumpable
                      └─ supervisor M   one per request: new pid + mount namespace, deadline, verdict
                           └─ worker W  pid 1 of its own pid namespace, fresh /proc /tmp /dev/shm,
                                        rlimits, no capabilities, no_new_privs, seccomp; runs handler

Z is started by the judge as a fresh interpreter (nothing of the judge's heap is inherited), with a
clean environment; it imports NumPy, nkieval and the handler's module once, then isolates itself
(:mod:`._setup`) and keeps one M (with its W) forked ahead of the next request (:mod:`._worker`). Z and
M run only this package's code; W runs the handler (hostile code).
"""

from __future__ import annotations

import errno
import gc
import json
import os
import signal
import sys
import time
import traceback
from typing import Any

from nkieval.review.isolation import _linux, _worker
from nkieval.review.isolation._frames import FrameError, read_frame, write_frame
from nkieval.review.isolation._setup import Handler, SetupError, Steps, _preload, enter_sandbox, needed_paths
from nkieval.review.isolation._worker import _META_CAP, _set_rlimits, _supervise, _worker_mounts


def _standby(handler: Handler, cfg: dict[str, Any], in_fd: int,
             out_fd: int) -> tuple[int, int, int]:
    """Fork the supervisor (and, through it, the worker) for the next request ahead of time:
    (pid, request write fd, result read fd)."""
    qr, qw = os.pipe()
    rr, rw = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(qw)
            os.close(rr)
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, in_fd)  # keep 0-2 taken, so the worker's fds never land there
            os.close(null)
            os.close(out_fd)
            _linux.prctl(_linux.PR_SET_PDEATHSIG, signal.SIGKILL)
            _supervise(handler, cfg, qr, rw)
        except BaseException:
            traceback.print_exc()
            code = 70
        os._exit(code)
    os.close(qr)
    os.close(rw)
    return pid, qw, rr


def _serve(handler: Handler, cfg: dict[str, Any], in_fd: int, out_fd: int) -> None:
    policy = cfg["policy"]
    needed_paths()  # (once, here: every supervisor and worker forked from now on reads it from memory)
    standby = _standby(handler, cfg, in_fd, out_fd)
    while True:
        pid, qw, rr = standby
        try:
            meta = read_frame(in_fd, _META_CAP)
            request = read_frame(in_fd, policy["max_request_bytes"])
            float(json.loads(meta)["timeout_s"])
        except (FrameError, ValueError, KeyError, TypeError):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return
        try:
            write_frame(qw, meta)
            write_frame(qw, request)
            while True:  # streamed parts first (forwarded as they come), then the final (meta, payload)
                res_meta = read_frame(rr, _META_CAP)
                res_payload = read_frame(rr, policy["max_response_bytes"])
                if "part" not in json.loads(res_meta):
                    break
                write_frame(out_fd, res_meta)
                write_frame(out_fd, res_payload)
        except (FrameError, OSError, ValueError) as e:
            res_meta = json.dumps({"status": "harness-error", "detail": f"supervisor failed: {e}",
                                   "exit_code": None, "signal": None, "stderr_tail": "", "wall_s": 0.0}).encode()
            res_payload = b""
            os.kill(pid, signal.SIGKILL)
        os.close(qw)
        os.close(rr)
        write_frame(out_fd, res_meta)  # answer first: the supervisor's namespaces tear down meanwhile
        write_frame(out_fd, res_payload)
        os.waitpid(pid, 0)
        standby = _standby(handler, cfg, in_fd, out_fd)


def _probe(cfg: dict[str, Any], out_fd: int) -> None:
    """Try every isolation step, recording what fails and why (``nkieval doctor``)."""
    steps = Steps(strict=False)
    info: dict[str, Any] = {}
    if not steps.run("preload", lambda: info.update(fn=_preload(cfg["handler"]))):
        write_frame(out_fd, json.dumps({"steps": steps.results}).encode())
        return
    try:
        extra = enter_sandbox(cfg["handler"], cfg["hide"], steps)
    except SetupError as e:
        steps.results[e.step] = [False, e.reason]
        extra = {}
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        wsteps = Steps(strict=False)
        ok_pid = wsteps.run("pid_ns", _linux.unshare, _linux.CLONE_NEWPID | _linux.CLONE_NEWNS)
        if ok_pid:
            child = os.fork()
            if child:
                _, st = os.waitpid(child, 0)
                os._exit(os.WEXITSTATUS(st) if os.WIFEXITED(st) else 1)
        if ok_pid:  # never mount outside a namespace of our own
            wsteps.run("private_tmp_and_proc", _worker_mounts, cfg["policy"]["tmp_mb"],
                       cfg["policy"].get("hide_in_worker", ()))
        else:
            wsteps.results["private_tmp_and_proc"] = [False, "requires pid_ns"]
        wsteps.run("rlimits", _set_rlimits, cfg["policy"], 10.0)
        wsteps.run("capabilities_dropped", _linux.drop_all_capabilities)
        wsteps.run("no_new_privs", _linux.prctl, _linux.PR_SET_NO_NEW_PRIVS, 1)

        def _seccomp() -> None:
            from nkieval.review.isolation import _seccomp as sc

            sc.build_and_load()

        wsteps.run("seccomp", _seccomp)
        write_frame(w, json.dumps(wsteps.results).encode())
        os._exit(0)
    os.close(w)
    try:
        steps.results.update(json.loads(read_frame(r, _META_CAP, time.monotonic() + 60)))
    except (FrameError, ValueError) as e:
        steps.results["worker"] = [False, f"probe worker failed: {e}"]
    os.waitpid(pid, 0)
    write_frame(out_fd, json.dumps({"steps": steps.results, "extra": extra}).encode())


def main() -> int:
    cfg = json.loads(sys.argv[1])
    out_fd = os.dup(1)
    os.dup2(2, 1)  # stray prints from imports must not corrupt the frames
    in_fd = 0
    if cfg["mode"] == "probe":
        _probe(cfg, out_fd)
        return 0
    try:
        handler = _preload(cfg["handler"])
        if cfg["mode"] == "sandbox":
            steps = Steps(strict=True)
            extra = enter_sandbox(cfg["handler"], cfg["hide"], steps)
            isolation = {"level": "full", "zygote": steps.results, **extra}
            if cfg["policy"].get("seccomp", True):
                from nkieval.review.isolation import _seccomp

                flt, isolation["seccomp_filter"] = _seccomp.build()
                _worker.FILTER = _seccomp.compile_bpf(flt)
        else:
            isolation = {"level": "none"}
        gc.freeze()
    except SetupError as e:
        write_frame(out_fd, json.dumps({"ready": False, "step": e.step, "error": e.reason}).encode())
        return 1
    except Exception as e:
        write_frame(out_fd, json.dumps({"ready": False, "step": "preload",
                                        "error": f"{type(e).__name__}: {e}"}).encode())
        return 1
    write_frame(out_fd, json.dumps({"ready": True, "isolation": isolation, "pid": os.getpid()}).encode())
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # a dead standby is an EPIPE to handle, not a kill
    try:
        _serve(handler, cfg, in_fd, out_fd)
    except OSError as e:
        if e.errno != errno.EPIPE:  # EPIPE: the judge went away
            raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
