"""TEST-ONLY handler for the sandbox's tests and ``nkieval doctor``: each request names one
escape attempt; the sandbox must stop every one. Never used by the review pipeline.

Request: JSON ``{"probe": NAME, ...arguments}``. Response: JSON describing what happened (for the
probes that are expected to return); the others are expected to be killed."""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def _err(e: BaseException) -> dict[str, Any]:
    return {"ok": False, "error": type(e).__name__, "errno": getattr(e, "errno", None), "text": str(e)}


def _write(path: str) -> dict[str, Any]:
    try:
        with open(path, "w") as f:
            f.write("escaped")
        return {"ok": True}
    except OSError as e:
        return _err(e)


def _read(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            return {"ok": True, "data": f.read(4096).decode(errors="replace")}
    except OSError as e:
        return _err(e)


def _tcp(port: int) -> dict[str, Any]:
    import socket

    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=2)
        s.close()
        return {"ok": True}
    except OSError as e:
        return _err(e)


def _kill(pid: int) -> dict[str, Any]:
    import signal

    out: dict[str, Any] = {}
    for target in (pid, -1):
        try:
            os.kill(target, signal.SIGKILL)
            out[str(target)] = "sent"
        except OSError as e:
            out[str(target)] = type(e).__name__
    return out


def _thread() -> dict[str, Any]:
    import threading

    box: list[int] = []
    threads = [threading.Thread(target=lambda i=i: box.append(i * i)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"ok": True, "results": sorted(box)}


def _numpy() -> dict[str, Any]:
    import numpy as np

    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    return {"ok": True, "sum": float((a @ a.T).sum())}


def _tmp(name: str) -> dict[str, Any]:
    import tempfile

    before = sorted(os.listdir(tempfile.gettempdir()))
    with open(os.path.join(tempfile.gettempdir(), name), "w") as f:
        f.write("x")
    fd, path = tempfile.mkstemp()
    os.close(fd)
    return {"ok": True, "before": before, "tempdir": tempfile.gettempdir(), "mkstemp": path,
            "home": os.environ.get("HOME")}


def _print(total_mb: int) -> dict[str, Any]:
    chunk = "x" * (1 << 20)
    written = 0
    try:
        for _ in range(total_mb):
            sys.stdout.write(chunk)
            sys.stdout.flush()
            written += len(chunk)
    except OSError as e:
        return {"written": written, **_err(e)}
    return {"ok": True, "written": written}


def _proc() -> dict[str, Any]:
    pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    return {"pids": pids, "pid": os.getpid(), "ppid": os.getppid(), "uid": os.getuid(),
            "hostname": os.uname().nodename}


def _status() -> dict[str, Any]:
    with open("/proc/self/status") as f:
        fields = dict(line.split(":", 1) for line in f if ":" in line)
    return {k: fields[k].strip() for k in ("CapEff", "CapBnd", "NoNewPrivs", "Seccomp") if k in fields}


def _import(module: str) -> dict[str, Any]:
    import importlib

    try:
        importlib.import_module(module)
        return {"ok": True}
    except Exception as e:
        return _err(e)


#: what :func:`prepare` saw, in this worker (empty: it did not run here)
PREPARED: list[dict[str, Any]] = []


def prepare() -> None:
    """The standby worker's request-independent step (``_setup.Handler.prepare``): notes its process state, so
    that a request can check it ran, once, in this worker, already sandboxed."""
    PREPARED.append({"pid": os.getpid(), **_status()})


def handle(request: bytes) -> bytes:
    req = json.loads(request)
    name = req["probe"]
    out: Any
    if name == "echo":
        return request
    elif name == "tcp":
        out = _tcp(int(req.get("port", 22)))
    elif name == "socket":
        import socket

        out = _err_or_ok(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
    elif name == "fork":
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        out = {"ok": True, "forked": pid}
    elif name == "subprocess":
        import subprocess

        out = {"ok": True, "rc": subprocess.run(["true"], check=False).returncode}
    elif name == "system":
        out = {"ok": True, "rc": os.system("true")}
    elif name == "ctypes_system":
        import ctypes

        out = {"ok": True, "rc": ctypes.CDLL(None).system(b"true")}
    elif name == "execv":
        os.execv("/bin/true", ["true"])
    elif name == "write":
        out = _write(req["path"])
    elif name == "read":
        out = _read(req["path"])
    elif name == "proc":
        out = _proc()
    elif name == "status":
        out = _status()
    elif name == "alloc":
        buf = bytearray(int(req["bytes"]))
        out = {"ok": True, "len": len(buf)}
    elif name == "busy":
        while True:
            pass
    elif name == "busy_on_cpu":  # a busy loop on one given core
        os.sched_setaffinity(0, {int(req["cpu"])})
        while True:
            pass
    elif name == "sleep":
        import time

        time.sleep(float(req["s"]))
        out = {"ok": True}
    elif name == "print":
        out = _print(int(req["mb"]))
    elif name == "big_response":
        return b"x" * int(req["bytes"])
    elif name == "kill":
        out = _kill(int(req["pid"]))
    elif name == "thread":
        out = _thread()
    elif name == "numpy":
        out = _numpy()
    elif name == "tmp":
        out = _tmp(req["name"])
    elif name == "import":
        out = _import(req["module"])
    elif name == "exit":
        os._exit(int(req.get("code", 0)))
    elif name == "close_and_spin":  # close every inherited fd, then never return
        os.closerange(3, 1 << 16)
        while True:
            pass
    elif name == "forge":  # try to pass off a harness failure / a fake result on every open fd
        for fd in range(3, 64):
            for body in (b"H" + b"harness failed", b"M"):
                try:
                    os.write(fd, len(body).to_bytes(8, "big") + body)
                except OSError:
                    pass
        os._exit(70)
    elif name == "swap_output":  # replace the captured-output file with a FIFO, then exit
        path = os.path.join(os.environ.get("TMPDIR", "/tmp"), ".nkieval-output")
        os.unlink(path)
        os.mkfifo(path)
        print("after swap", flush=True)
        os._exit(9)
    elif name == "parts":  # stream n parts ahead of the result (then, optionally, hang)
        from nkieval.review.isolation import send_part

        sent = [send_part(f"part {i};".encode() * int(req.get("repeat", 1))) for i in range(int(req["n"]))]
        if req.get("then") == "hang":
            while True:
                pass
        out = {"ok": True, "sent": all(sent)}
    elif name == "prepared":
        out = {"ok": True, "prepared": PREPARED}
    elif name == "answer_then_linger":  # the final record written by hand, then no exit
        from nkieval.review.isolation import _worker

        fd = _worker._PART_FD[0]
        assert fd is not None
        _worker.write_frame(fd, _worker._OK + json.dumps({"ok": True, "early": True}).encode())
        import time

        time.sleep(float(req["s"]))
        out = {"ok": True, "early": False}
    elif name == "raise":
        raise RuntimeError("probe raised")
    else:
        raise ValueError(f"unknown probe {name!r}")
    return json.dumps(out).encode()


def _err_or_ok(fn: Any) -> dict[str, Any]:
    try:
        fn()
        return {"ok": True}
    except OSError as e:
        return _err(e)
